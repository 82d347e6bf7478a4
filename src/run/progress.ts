// What `out` says on stderr while it waits: a line when the situation changes and a heartbeat at
// most every 30 s, never a line per poll (a busy pool polls every retry_delay for hours). Each
// line names who holds the wanted locks and for how long, looked up only when a line is due.
import { CancelledError, describeError, formatMs } from '../base/errors.js';
import type { Logger } from '../base/logger.js';
import type { PoolReporter } from '../lock/lock-pool.js';
import { describeHolder, type LockRecord } from '../repo/lock-holders.js';

const HEARTBEAT_MS = 30_000;
/** A line names this many holders at most (the longest-held first); the rest are counted. */
const MAX_HOLDERS_SHOWN = 3;

/** Who holds the claimed locks among `wanted` (see HolderLookup). */
export interface HolderSource {
  /** At `tip`, the newest branch tip the put has seen (fetched or looked at), where known. */
  claimed(wanted: readonly string[], tip?: string): Promise<LockRecord[]>;
  readonly searchedDepth: number;
}

export class ProgressReporter implements PoolReporter {
  private lastKey: string | undefined;
  private lastLineAt = 0;
  /** Set after the first failed lookup: later lines go without holders rather than retry. */
  private holdersBroken = false;

  constructor(
    private readonly log: Logger,
    private readonly now: () => number,
    private readonly holders?: HolderSource,
  ) {}

  async waiting(
    reason: string,
    wanted: readonly string[],
    waitedMs: number,
    tip?: string,
  ): Promise<void> {
    // The wanted locks are part of the situation: a lock released and another claimed between two
    // polls leaves the counts (the reason) the same but changes who is waited on.
    const key = `${reason}\0${wanted.join('\0')}`;
    const changed = key !== this.lastKey;
    if (!changed && this.now() - this.lastLineAt < HEARTBEAT_MS) return;
    this.lastKey = key;
    this.lastLineAt = this.now();
    const held = await this.lookUp(wanted, tip);
    const line = `${reason}${held}`;
    if (changed) this.log.info(`waiting for lock: ${line}`);
    else this.log.info(`still waiting for lock (${formatMs(waitedMs)}): ${line}`);
  }

  /**
   * `; "lock-a" held by URL since … (for …)` for each wanted lock that is claimed (SPEC §8), or
   * nothing when none is (or the lookup failed).
   */
  private async lookUp(wanted: readonly string[], tip: string | undefined): Promise<string> {
    if (!this.holders || this.holdersBroken || wanted.length === 0) return '';
    let records: LockRecord[];
    try {
      records = await this.holders.claimed(wanted, tip);
    } catch (error) {
      if (error instanceof CancelledError) throw error;
      this.holdersBroken = true;
      this.log.info(`could not look up who holds the lock: ${describeError(error)}`);
      return '';
    }
    if (records.length === 0) return '';
    const now = this.now();
    const depth = this.holders.searchedDepth;
    // Longest held first: the lock someone forgot is the one worth seeing.
    const sorted = [...records].sort(
      (a, b) => (a.since?.getTime() ?? -Infinity) - (b.since?.getTime() ?? -Infinity),
    );
    const shown = sorted.slice(0, MAX_HOLDERS_SHOWN).map((record) => {
      const holder = describeHolder(record, now, depth);
      return holder.startsWith('by ')
        ? `"${record.name}" held ${holder}`
        : `"${record.name}": ${holder}`;
    });
    const more = sorted.length - shown.length;
    return `; ${shown.join(', ')}${more > 0 ? `, and ${more} more` : ''}`;
  }

  conflict(name: string): void {
    // Calm words: losing a race is normal, and pipelines grep logs for "err".
    this.log.info(`the pool changed while taking "${name}"; trying again from the new state`);
    this.lastKey = undefined;
  }

  line(message: string): void {
    this.log.info(message);
  }

  transient(error: unknown, attempt: number, delayMs: number): void {
    this.log.info(
      `git failed (attempt ${attempt}), trying again in ${formatMs(delayMs)}: ${describeError(error)}`,
    );
  }
}
