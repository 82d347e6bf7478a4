// How fast the waiting line ahead of a put moves, the pace a put further back polls by
// (backPollMs): what the put has seen since it first looked, and far back, before that, what the
// pool's recent claims show (each lock a put in line takes is a place the line moves up).
import type { LockStore } from './lock-store.js';
import type { Clock } from './retry.js';
import { pollMs, type LineSeen } from './waiting-line.js';

/**
 * How far back before a put first looked at the line its pool's claims tell the line's pace: this
 * many retry_delays. Older claims say little of the pace now (a pool idle for a day, then a burst);
 * a pool whose locks change hands less often than that shows none, and the put goes by what it
 * sees.
 */
export const PACE_WINDOW_DELAYS = 60;

/**
 * The claims read, as if the put had watched them (LineSeen.before): the time from the oldest claim
 * within the window to `since` (when the put first looked), and the claims after that one. Commit
 * times are kept to the second: the oldest claim came half a second after its time, on average.
 * None with fewer than three claims in the window.
 */
export function claimsBefore(
  claims: readonly number[],
  since: number,
  retryDelayMs: number,
): LineSeen['before'] {
  const from = since - PACE_WINDOW_DELAYS * pollMs(retryDelayMs);
  const recent = claims.filter((at) => at >= from && at <= since);
  if (recent.length < 3) return undefined;
  return { spanMs: Math.max(0, since - recent[0]! - 500), claims: recent.length - 1 };
}

/** What a put in line has seen of the line ahead of it move, and the pool's claims before. */
export class LinePace {
  /** How many locks the puts that left the line ahead of this one waited for. */
  private departed = 0;
  /** The claims before the put first looked (undefined: not read yet; null: none to go by). */
  private before: LineSeen['before'] | null | undefined;

  constructor(
    private readonly store: LockStore,
    private readonly clock: Clock,
    private readonly retryDelayMs: number,
  ) {}

  /** Counts the locks that puts ahead of this one, now out of the line, waited for. */
  departedAhead(locks: number): void {
    this.departed += locks;
  }

  /**
   * How long the put has watched the line since `since` (when it first looked; undefined before)
   * and what it saw leave; far back, where each poll is a fetch (`far`), with the claims before,
   * read once, from the commits of its own copy. Nearer the front its looks cost the server
   * nothing, and it goes by the puts it saw leave, which early on reads the line as faster than
   * it is: it then learns sooner that locks released close together reach it.
   */
  async seen(since: number | undefined, far: boolean): Promise<LineSeen | undefined> {
    if (since === undefined) return undefined;
    const seen: LineSeen = { watchedMs: this.clock.now() - since, departed: this.departed };
    if (!far) return seen;
    if (this.before === undefined) {
      const { claims } = await this.store.holdHistory();
      this.before = claimsBefore(claims, since, this.retryDelayMs) ?? null;
    }
    if (this.before) seen.before = this.before;
    return seen;
  }
}
