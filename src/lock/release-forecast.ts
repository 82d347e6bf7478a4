// When a release that serves a put near the front of the waiting line becomes plausible, from the
// holds the branch's recent commits show (LockStore.holdHistory; waiting-line.ts says how): read
// once a tip, and not again for a while after holds too short to poll more slowly between.
import type { LockStore } from './lock-store.js';
import type { HoldHistory } from './pool-state.js';
import type { Clock } from './retry.js';
import {
  farPollMs,
  frontPollMs,
  holdsTooShort,
  pollMs,
  releasePlausibleAt,
} from './waiting-line.js';

export class ReleaseForecast {
  /** The holds read at the last tip (undefined: none to go by), for that tip. */
  private read: { tip: string; history: HoldHistory | undefined } | undefined;
  /** Until when the history goes unread: the holds last seen were too short to use. */
  private unreadUntil = 0;

  constructor(
    private readonly store: LockStore,
    private readonly clock: Clock,
    private readonly retryDelayMs: number,
    /** How long holds too short leave the history unread (its log is a process). */
    private readonly restMs: number,
  ) {}

  /**
   * How long a put near the front waits before its next poll at the synced `tip`, `needed` locks
   * of the `claimed` from being served: frontPollMs once the releases that serve it are plausible
   * (releasePlausibleAt), retry_delay at most before that, or farPollMs where the next release
   * serves a put ahead of it (`needed` over one). Only a stall on that put, gone, needs it sooner,
   * and one poll sees the free lock in time to take the put out after its grace (goneAfterMs).
   * `fastMs`, where given, stands for frontPollMs (WATCHED_BUSY_MS).
   */
  async pollInterval(
    tip: string,
    needed: number,
    claimed: readonly string[],
    fastMs?: number,
  ): Promise<number> {
    const fast = fastMs ?? frontPollMs(this.retryDelayMs);
    if (needed <= 0) return fast;
    const history = await this.historyAt(tip);
    const plausible = history && releasePlausibleAt(history, claimed, this.retryDelayMs, needed);
    const left = (plausible ?? -Infinity) - this.clock.now();
    const slowest = needed > 1 ? farPollMs(this.retryDelayMs) : pollMs(this.retryDelayMs);
    return left > fast ? Math.min(slowest, left) : fast;
  }

  /** The holds seen at `tip`, read once a tip; undefined while the history rests unread. */
  private async historyAt(tip: string): Promise<HoldHistory | undefined> {
    if (this.read?.tip === tip) return this.read.history;
    const now = this.clock.now();
    let history: HoldHistory | undefined;
    if (now >= this.unreadUntil) {
      history = await this.store.holdHistory();
      if (holdsTooShort(history, this.retryDelayMs)) {
        this.unreadUntil = now + this.restMs;
        history = undefined;
      }
    }
    this.read = { tip, history };
    return history;
  }
}
