// The one retry policy: an operation is a series of attempts, each done, waited or lost to a race
// (the branch moved); failures the network or the server may get over are tried again after a
// backoff, every other error ends the operation at once with its own message.
import { GaveUpError, GitCommandError, GitTimeoutError, CancelledError } from '../base/errors.js';

export interface Clock {
  now(): number;
  /** Resolves after `ms`, rejects with CancelledError when `signal` aborts. */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
  random(): number;
}

/** What one attempt came to; failures are thrown. */
export type Attempt<T> =
  { kind: 'done'; value: T } | { kind: 'waited' } | { kind: 'conflict'; name: string };

/** How often a transient failure (network, server) is retried before giving up. */
export const TRANSIENT_RETRIES = 4;
/** How often a command that timed out is tried again. */
export const TIMEOUT_RETRIES = 1;
const BACKOFF_MS = [500, 1000, 2000, 4000];
/** Jitter after a lost race, so racing writers don't collide again in lockstep. */
const CONFLICT_JITTER_MS = 200;

/**
 * Node's codes for a connection that failed or dropped, or a name that did not resolve: the
 * network may come back. Git's own failures arrive as GitCommandError; these reach the policy
 * from the Node side of a transport.
 */
const NETWORK_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
]);

/**
 * Whether trying again may help: a git command that failed or timed out, or a network error. A
 * refusal, a cancellation or a programming error (a TypeError) is not: it ends the operation with
 * its own message rather than as "git failed (attempt n)". Configuration and access errors are
 * never GitCommandErrors (git/git.ts sorts them out first).
 */
export function isTransient(error: unknown): boolean {
  if (error instanceof GitCommandError || error instanceof GitTimeoutError) return true;
  const code = (error as { code?: unknown } | null)?.code;
  return error instanceof Error && typeof code === 'string' && NETWORK_CODES.has(code);
}

export interface RetryOptions {
  clock: Clock;
  signal: AbortSignal;
  /** A lost race: the pool moved under us. */
  onConflict?(name: string): void;
  /** Whether to wait a random moment after a lost race before the next attempt (default yes). */
  jitterAfterConflict?(): boolean;
  onTransient?(error: unknown, attempt: number, delayMs: number): void;
  /** Lost races in a row before giving up (default: never), and the reason given then. */
  maxConflicts?: { attempts: number; reason: () => string };
}

/**
 * Runs `attempt` until it is done. A transient failure is retried TRANSIENT_RETRIES times with a
 * growing backoff, counted afresh after any attempt that got an answer; one that timed out is
 * retried TIMEOUT_RETRIES times in the whole run.
 */
export async function retry<T>(
  attempt: () => Promise<Attempt<T>>,
  options: RetryOptions,
): Promise<T> {
  const { clock, signal } = options;
  let failures = 0;
  let timeouts = 0;
  let conflicts = 0;
  for (;;) {
    if (signal.aborted) throw new CancelledError(signal.reason);
    let result: Attempt<T>;
    try {
      result = await attempt();
    } catch (error) {
      if (!isTransient(error)) throw error;
      // A command that outlived git_timeout (default 5m) gets one more try, not four: five
      // attempts at a silent server would hold the step for half an hour.
      if (error instanceof GitTimeoutError) timeouts++;
      if (failures >= TRANSIENT_RETRIES || timeouts > TIMEOUT_RETRIES)
        throw new GaveUpError(`gave up after ${failures + 1} attempts`, error);
      const delay = BACKOFF_MS[Math.min(failures, BACKOFF_MS.length - 1)]!;
      failures++;
      options.onTransient?.(error, failures, delay);
      await clock.sleep(delay, signal);
      continue;
    }
    if (result.kind === 'done') return result.value;
    failures = 0;
    if (result.kind === 'conflict') {
      conflicts++;
      const max = options.maxConflicts;
      if (max && conflicts >= max.attempts)
        throw new GaveUpError(`gave up after ${conflicts} attempts`, new Error(max.reason()));
      options.onConflict?.(result.name);
      if (options.jitterAfterConflict?.() ?? true)
        await clock.sleep(Math.floor(clock.random() * CONFLICT_JITTER_MS), signal);
    }
  }
}
