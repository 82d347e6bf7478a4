// The only module that touches `process`: stdin, argv, env, signals, stdout, exit code. Each
// script is `main(command)`: read the request, run the command, write one JSON document.
import { setTimeout as sleep } from 'node:timers/promises';
import type { CommandContext } from './run/context.js';
import { CancelledError, ConfigurationError, describeError } from './base/errors.js';
import { descendantsOf, GIT_STOP_SIGNAL, signalProcesses } from './git/child-processes.js';
import type { Clock } from './lock/retry.js';
import { ABORT_BUDGET_MS, HARD_EXIT_MS, SETTLE_MS } from './base/stop-budget.js';
import { Logger } from './base/logger.js';
import { randomUuid } from './base/lazy-builtins.js';

const SIGNAL_NUMBERS = { SIGHUP: 1, SIGINT: 2, SIGTERM: 15 } as const;
type StopSignal = keyof typeof SIGNAL_NUMBERS;

export const systemClock: Clock = {
  now: () => Date.now(),
  random: () => Math.random(),
  async sleep(ms, signal) {
    try {
      await sleep(ms, undefined, { signal });
    } catch {
      throw new CancelledError(signal.reason);
    }
  },
};

export type Command = (ctx: CommandContext) => Promise<unknown>;

export interface MainOptions {
  /** The resource scripts take their request on stdin; the pool command for people does not. */
  readStdin?: boolean;
  /**
   * Said, as the failure, when the script gets no folder argument: at once, before stdin is
   * read, so a person trying the script by hand is not left waiting for input it would refuse.
   */
  usage?: string;
  /** Turns the result into stdout's text (default: one JSON document); empty text writes nothing. */
  render?: (result: unknown) => string;
}

export async function main(command: Command, options: MainOptions = {}): Promise<void> {
  const { readStdin: takesStdin = true, render = (result) => `${JSON.stringify(result)}\n` } =
    options;
  const controller = new AbortController();
  const log = new Logger((text) => process.stderr.write(text));
  const abortTasks: ((signal: AbortSignal) => Promise<void>)[] = [];
  const exitTasks: (() => Promise<void>)[] = [];
  const forcedExitTasks: (() => void)[] = [];
  const runExitTasks = async () => {
    for (const task of exitTasks) await task().catch(() => undefined);
  };
  let stoppedBy: { signal: StopSignal; code: number } | undefined;
  // Whatever git runs at that moment (a push given time to finish, the compensating release)
  // gets the stop signal rather than being orphaned.
  const exitNow = (code: number): never => {
    for (const task of forcedExitTasks) {
      try {
        task();
      } catch {
        // Saying what is left must never keep the process from exiting.
      }
    }
    signalProcesses(descendantsOf(process.pid), GIT_STOP_SIGNAL);
    process.exit(code);
  };

  const ctx: CommandContext = {
    stdin: '',
    args: process.argv.slice(2),
    env: process.env,
    log,
    signal: controller.signal,
    clock: systemClock,
    newToken: randomUuid,
    onAbort: (task) => abortTasks.push(task),
    onExit: (task) => exitTasks.push(task),
    onForcedExit: (task) => forcedExitTasks.push(task),
  };
  const usage = ctx.args[0] ? undefined : options.usage;
  const input =
    usage !== undefined
      ? Promise.reject(new ConfigurationError([usage]))
      : takesStdin
        ? readStdin(controller.signal)
        : Promise.resolve('');
  const work = input
    .then((stdin) => command({ ...ctx, stdin }))
    .then(
      (result) => ({ ok: true as const, result }),
      (error: unknown) => ({ ok: false as const, error }),
    );

  // Once a signal arrived, this owns the exit, wherever the run was: waiting, pushing, writing
  // the result or removing its temporary files. The signal means Concourse is abandoning the
  // step and will not use its result even if it was written, so a claim must be released then too.
  const stopRun = async (code: number) => {
    await Promise.race([work, sleep(SETTLE_MS)]);
    const budget = AbortSignal.timeout(ABORT_BUDGET_MS);
    for (const task of abortTasks)
      await task(budget).catch((error: unknown) =>
        log.error(`error while stopping: ${describeError(error)}`),
      );
    await runExitTasks();
    process.stderr.write('', () => process.exit(code));
  };
  const onSignal = (signal: StopSignal) => {
    const code = 128 + SIGNAL_NUMBERS[signal];
    if (stoppedBy) {
      log.info(`received ${signal} again: exiting now`);
      exitNow(code);
    }
    stoppedBy = { signal, code };
    process.exitCode = code;
    log.info(`received ${signal}: stopping`);
    controller.abort(new Error(`stopped by ${signal}`));
    setTimeout(() => exitNow(code), HARD_EXIT_MS).unref();
    void stopRun(code);
  };
  for (const signal of Object.keys(SIGNAL_NUMBERS) as StopSignal[]) {
    // The entry scripts' (assets/) handlers, for a stop while the program loaded: this owns it
    // now. Added before they go: a signal that came while the program was evaluated waits to be
    // handled, and Node drops it if the signal's listeners drop to none in between.
    const loading = process.listeners(signal);
    process.on(signal, onSignal);
    for (const listener of loading) process.removeListener(signal, listener);
  }

  const settled = await work;
  if (stoppedBy) return;
  if (settled.ok) {
    const text = render(settled.result);
    if (text !== '') await writeStdout(text);
  } else {
    reportFailure(log, settled.error);
  }
  if (stoppedBy) return;
  await runExitTasks();
  const code = settled.ok ? 0 : 1;
  // Exit in the same turn as this last check: a signal from here on can no longer run our
  // handler, so the run's outcome cannot change after it was decided (and Node's own
  // teardown, during which SIGTERM would kill us outright, is skipped).
  process.stderr.write('', () => {
    if (!stoppedBy) process.exit(code);
  });
}

export function reportFailure(log: Logger, error: unknown): void {
  if (error instanceof ConfigurationError) {
    for (const line of error.lines) log.error(line);
    return;
  }
  const message = describeError(error);
  log.error(/^(error|invalid payload)\b/.test(message) ? message : `error: ${message}`);
}

/**
 * The largest request read from stdin. A request is `source` and `params`: even a 16384-bit RSA
 * key (12 kB as PEM), a known_hosts of a few hundred hosts and a long git_config are tens of
 * kilobytes together.
 */
const MAX_REQUEST_BYTES = 1024 * 1024;

/**
 * The request on stdin, up to MAX_REQUEST_BYTES. A stop signal ends the read at once: a writer
 * that never closes stdin must not hold the run until the hard exit.
 */
function readStdin(signal: AbortSignal): Promise<string> {
  const stdin = process.stdin;
  const chunks: Buffer[] = [];
  let size = 0;
  return new Promise<string>((resolve, reject) => {
    const settle = (outcome: () => void) => {
      stdin.off('data', onData).off('end', onEnd).off('error', onError);
      signal.removeEventListener('abort', onAbort);
      outcome();
    };
    const stopReading = () => {
      stdin.pause();
      stdin.destroy();
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_REQUEST_BYTES) {
        chunks.push(chunk);
        return;
      }
      stopReading();
      settle(() =>
        reject(
          new ConfigurationError([
            `invalid payload (the request on stdin is larger than ${MAX_REQUEST_BYTES / 1024 / 1024} MiB)`,
          ]),
        ),
      );
    };
    const onEnd = () => settle(() => resolve(Buffer.concat(chunks).toString('utf8')));
    const onError = (error: Error) => settle(() => reject(error));
    const onAbort = () => {
      stopReading();
      settle(() => reject(new CancelledError(signal.reason)));
    };
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    stdin.on('data', onData).on('end', onEnd).on('error', onError);
  });
}

function writeStdout(text: string): Promise<void> {
  return new Promise((resolve) => process.stdout.write(text, () => resolve()));
}
