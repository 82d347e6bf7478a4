// What a put in the waiting line has seen of it over time (line-member.ts): since when each free
// lock has stood free (the stall that judges the puts ahead), when it first saw each entry where
// it points now, and which entries it took to be gone. The evidence goneAt (waiting-line.ts)
// weighs; the put's decisions stay LineMember's.
import type { Clock } from './retry.js';
import { pollMs, sightKey, type Stall, type WaitingEntry } from './waiting-line.js';

export class LineWatch {
  /** Each lock free at the last sync, and since when it is known to be free. */
  private freeSince = new Map<string, number>();
  /** When, and at which tip, the free locks were last read. */
  private syncedAt: number | undefined;
  private syncedTip: string | undefined;
  /** Locks free while others stand in line, as this put has seen it (see waiting-line.ts). */
  private stalled: { since: number; tips: Set<string> } | undefined;
  /** When this put first saw each entry pointing where it points now (by sightKey). */
  private sightings = new Map<string, number>();
  /** Entries taken to be gone (sightKey), left out of the order. */
  private readonly gone = new Set<string>();
  /** When this put first looked at the line. */
  private firstLook: number | undefined;

  constructor(
    private readonly clock: Clock,
    private readonly retryDelayMs: number,
  ) {}

  /** When this put first looked at the line (undefined before it did). */
  get watchingSince(): number | undefined {
    return this.firstLook;
  }

  /** Since when the free locks have stood free while others wait, and the tips seen since. */
  get stall(): { readonly since: number; readonly tips: ReadonlySet<string> } | undefined {
    return this.stalled;
  }

  /**
   * Keeps track of since when the free locks have been free. A lock seen free at the previous
   * read, at the same tip or a poll or two ago, has been free since then; any other since the
   * tip was committed (`committedAt`, by its committer's clock, to the second), or since this put
   * first saw the tip (`seenAt`) if that is earlier. The stall dates from the lock freed first:
   * with other locks changing hands meanwhile, dating it from the last would put off judging the
   * puts that left the first untaken for as long as the others keep moving (live puts ahead show
   * it, see LineMember.showLife). No stall without free locks or without others in line.
   */
  async observe(
    tip: string,
    free: readonly string[],
    othersInLine: boolean,
    seenAt: number,
    committedAt: () => Promise<number | undefined>,
  ): Promise<void> {
    const now = this.clock.now();
    const previous = { at: this.syncedAt, tip: this.syncedTip };
    this.syncedAt = now;
    this.syncedTip = tip;
    if (free.length === 0 || !othersInLine) {
      this.freeSince = new Map();
      this.stalled = undefined;
      return;
    }
    const recent =
      previous.tip === tip ||
      (previous.at !== undefined && now - previous.at <= 2 * pollMs(this.retryDelayMs));
    let committed: number | undefined;
    const since = new Map<string, number>();
    for (const name of free) {
      let at = recent ? this.freeSince.get(name) : undefined;
      if (at === undefined) {
        committed ??= (await committedAt()) ?? now;
        at = Math.min(seenAt, committed + 1_000);
      }
      since.set(name, at);
    }
    this.freeSince = since;
    const stallSince = Math.min(...since.values());
    if (this.stalled === undefined) this.stalled = { since: stallSince, tips: new Set([tip]) };
    else {
      this.stalled.since = stallSince;
      this.stalled.tips.add(tip);
    }
  }

  /** A tip seen during the stall (a look's, between syncs). */
  sawTip(tip: string): void {
    this.stalled?.tips.add(tip);
  }

  /** The line as seen now, without the entries taken to be gone; notes when each was first seen. */
  present(seen: readonly WaitingEntry[]): WaitingEntry[] {
    const now = this.clock.now();
    this.firstLook ??= now;
    const sightings = new Map<string, number>();
    for (const entry of seen) {
      const key = sightKey(entry);
      sightings.set(key, this.sightings.get(key) ?? now);
    }
    this.sightings = sightings;
    return seen.filter((entry) => !this.gone.has(sightKey(entry)));
  }

  /** Leaves these entries out of the line from now on. */
  takeForGone(entries: readonly WaitingEntry[]): void {
    for (const entry of entries) this.gone.add(sightKey(entry));
  }

  /** The stall as goneAt judges it, with what this put has seen of the line. */
  view(): Stall | undefined {
    if (!this.stalled) return undefined;
    return {
      ...this.stalled,
      sightings: this.sightings,
      watchingSince: this.firstLook ?? this.clock.now(),
    };
  }
}
