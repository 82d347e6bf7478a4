// The few kinds of failure the resource distinguishes, and one way to describe any of them.

/** A request that can never succeed as written: never retried. */
export class ConfigurationError extends Error {
  override name = 'ConfigurationError';
  constructor(readonly lines: readonly string[]) {
    super(lines.join('\n'));
  }
}

/** The repository refused our credentials, host key or proxy login: a retry cannot help. */
export class AccessError extends ConfigurationError {
  override name = 'AccessError';
  constructor(
    readonly args: readonly string[],
    readonly reason: string,
  ) {
    super([`error: git ${args[0] ?? ''} cannot use the lock repository: ${reason}`]);
  }
}

/** An operation that cannot succeed against the repository as it is (not retried). */
export class OperationError extends Error {
  override name = 'OperationError';
}

/**
 * A git command that exited non-zero, or (`exitCode` null) that a signal ended, `signal` where
 * known. `stderr` is git's own words, unredacted.
 */
export class GitCommandError extends Error {
  override name = 'GitCommandError';
  constructor(
    readonly args: readonly string[],
    readonly exitCode: number | null,
    readonly stdout: string,
    readonly stderr: string,
    signal?: string,
  ) {
    const ended = exitCode === null ? `killed by ${signal ?? 'a signal'}` : `exit ${exitCode}`;
    super(`git ${args[0] ?? ''} failed (${ended}): ${lastLines(stderr) || 'no output'}`);
  }
}

/** A git command that outlived `source.git_timeout`. */
export class GitTimeoutError extends Error {
  override name = 'GitTimeoutError';
  constructor(
    readonly args: readonly string[],
    readonly timeoutMs: number,
  ) {
    super(`git ${args[0] ?? ''} timed out after ${formatMs(timeoutMs)} (source.git_timeout)`);
  }
}

/** The run's cancellation signal fired (a stop signal, or a wait that timed out). */
export class CancelledError extends Error {
  override name = 'CancelledError';
  constructor(readonly reason: unknown) {
    super('cancelled');
  }
}

/** `params.wait_timeout` ran out while waiting. */
export class WaitTimeoutError extends Error {
  override name = 'WaitTimeoutError';
}

/** Transient failures kept happening past the retry budget. */
export class GaveUpError extends Error {
  override name = 'GaveUpError';
  constructor(
    message: string,
    override readonly cause: unknown,
  ) {
    super(message);
  }
}

export function describeError(error: unknown): string {
  if (error instanceof GaveUpError) return `${error.message}: ${describeError(error.cause)}`;
  if (error instanceof Error) return error.message;
  return String(error);
}

/** What git adds after every failed connection; dropping it keeps the line that says why. */
const GIT_BOILERPLATE = [
  'Please make sure you have the correct access rights',
  'and the repository exists.',
];

function lastLines(text: string): string {
  const lines = text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('hint:') && !GIT_BOILERPLATE.includes(line));
  // git names the cause first ("fatal: '…' does not appear to be a git repository") and the
  // generic advice last, so a long output keeps its first line as well as its last ones.
  if (lines.length > 4) return [lines[0], '…', ...lines.slice(-3)].join(' / ');
  return lines.join(' / ');
}

/** `322ms`, `2.4s`, `12m30s`, `1h5m`: rounded once, so 59m59.7s reads `1h`, never `59m60s`. */
export function formatMs(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  const tenths = Math.round(ms / 100) / 10;
  if (tenths < 60) return `${tenths}s`;
  const seconds = Math.round(ms / 1000);
  const minutes = Math.floor(seconds / 60);
  const rest = seconds - minutes * 60;
  if (minutes < 60) return rest ? `${minutes}m${rest}s` : `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  const restMinutes = minutes - hours * 60;
  return restMinutes ? `${hours}h${restMinutes}m` : `${hours}h`;
}
