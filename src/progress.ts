// What `out` says on stderr while it waits: a line when the situation changes and a heartbeat at
// most every 30 s, never a line per poll (a busy pool polls every retry_delay for hours).
import { describeError, formatMs } from './errors.js';
import type { Logger } from './logger.js';
import type { PoolReporter } from './lock-pool.js';

const HEARTBEAT_MS = 30_000;

export class ProgressReporter implements PoolReporter {
  private lastReason: string | undefined;
  private lastLineAt = 0;

  constructor(
    private readonly log: Logger,
    private readonly now: () => number,
  ) {}

  waiting(reason: string, _wanted: readonly string[], waitedMs: number): void {
    const now = this.now();
    if (reason !== this.lastReason) {
      this.log.info(`waiting for lock: ${reason}`);
    } else if (now - this.lastLineAt >= HEARTBEAT_MS) {
      this.log.info(`still waiting for lock (${formatMs(waitedMs)}): ${reason}`);
    } else {
      return;
    }
    this.lastReason = reason;
    this.lastLineAt = now;
  }

  conflict(name: string): void {
    // Calm words: losing a race is normal, and pipelines grep logs for "err".
    this.log.info(`the pool changed while taking "${name}"; trying again from the new state`);
    this.lastReason = undefined;
  }

  transient(error: unknown, attempt: number, delayMs: number): void {
    this.log.info(
      `git failed (attempt ${attempt}), trying again in ${formatMs(delayMs)}: ${describeError(error)}`,
    );
  }
}
