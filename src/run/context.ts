// What a command receives from `main`: its input, its streams as functions, the cancellation
// signal, the clock, and places to register work that must run when the process stops.
import type { Clock } from '../lock/retry.js';
import type { Logger } from '../base/logger.js';

export interface CommandContext {
  stdin: string;
  args: readonly string[];
  env: Readonly<Record<string, string | undefined>>;
  log: Logger;
  signal: AbortSignal;
  clock: Clock;
  newToken(): string;
  /** Runs if the process is stopped by a signal, with a short deadline of its own. */
  onAbort(task: (signal: AbortSignal) => Promise<void>): void;
  /** Runs before the process exits, whatever happened (temporary folders). */
  onExit(task: () => Promise<void>): void;
  /**
   * Runs, synchronously, when the process exits at once without finishing its stop (a second
   * signal, or the stop outlasting its budget): to say what is left undone.
   */
  onForcedExit(task: () => void): void;
}
