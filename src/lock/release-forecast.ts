// When a release that serves a put near the front of the waiting line becomes plausible, from the
// holds the branch's recent commits show (LockStore.holdHistory; waiting-line.ts says how): read
// once a tip, and not again for a while after holds too short to poll more slowly between.
import type { LockStore } from './lock-store.js';
import type { Clock } from './retry.js';
import { frontPollMs, holdsTooShort, pollMs, releasePlausibleAt } from './waiting-line.js';

export class ReleaseForecast {
  /** The last answer, for the tip and the releases it was worked out for. */
  private last: { tip: string; needed: number; at: number | undefined } | undefined;
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
   * of the `claimed` from being served: frontPollMs once the releases that serve it are plausible,
   * retry_delay at most before that.
   */
  async pollInterval(tip: string, needed: number, claimed: readonly string[]): Promise<number> {
    const fast = frontPollMs(this.retryDelayMs);
    if (needed <= 0) return fast;
    const left = ((await this.plausibleAt(tip, needed, claimed)) ?? -Infinity) - this.clock.now();
    return left > fast ? Math.min(pollMs(this.retryDelayMs), left) : fast;
  }

  /**
   * When the `needed` releases of the `claimed` locks that serve the put become plausible at the
   * synced `tip` (releasePlausibleAt); undefined for at any time.
   */
  private async plausibleAt(
    tip: string,
    needed: number,
    claimed: readonly string[],
  ): Promise<number | undefined> {
    if (this.last?.tip !== tip || this.last.needed !== needed) {
      this.last = { tip, needed, at: await this.read(needed, claimed) };
    }
    return this.last.at;
  }

  private async read(needed: number, claimed: readonly string[]): Promise<number | undefined> {
    const now = this.clock.now();
    if (now < this.unreadUntil) return undefined;
    const history = await this.store.holdHistory();
    if (holdsTooShort(history, this.retryDelayMs)) {
      this.unreadUntil = now + this.restMs;
      return undefined;
    }
    return releasePlausibleAt(history, claimed, this.retryDelayMs, needed);
  }
}
