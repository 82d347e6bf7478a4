// What a put in the waiting line has seen of it over time (line-member.ts): since when each free
// lock has stood free (the stall that judges the puts ahead), when it first saw each entry where
// it points now, and which entries it took to be gone. The evidence goneAt (waiting-line.ts)
// weighs; the put's decisions stay LineMember's.
import type { Clock } from './retry.js';
import { pollMs, sightKey, type Stall, type WaitingEntry } from './waiting-line.js';

/**
 * A lock first seen free at `tip`, with no earlier sighting to go by: free since that tip was
 * committed, or since `seenAt` if earlier. The commit time (a git process) is read only when the
 * stall is viewed: a put first in line takes the lock at once and never reads it.
 */
interface Unread {
  seenAt: number;
  tip: string;
  /** When the put read the free locks: the time it counts from if the commit time is unknown. */
  readAt: number;
}

export class LineWatch {
  /** Each lock free at the last sync, and since when it is known to be free (or Unread). */
  private freeSince = new Map<string, number | Unread>();
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
  /** The tip at the last poll (see polled). */
  private lastPolled: string | undefined;

  constructor(
    private readonly clock: Clock,
    private readonly retryDelayMs: number,
    /** When this put last saw the tip move (the put's start until it first polls). */
    private moved: number,
    /** When a tip this put synced was committed (ms, to the second), where known. */
    private readonly committedAt: (tip: string) => Promise<number | undefined>,
  ) {}

  /** When this put first looked at the line (undefined before it did). */
  get watchingSince(): number | undefined {
    return this.firstLook;
  }

  /**
   * Keeps track of since when the free locks have been free. A lock seen free at the previous
   * read, at the same tip or a poll or two ago, has been free since then; any other since the
   * tip was committed (by its committer's clock, to the second), or since this put first saw the
   * tip (`seenAt`) if that is earlier. The stall dates from the lock freed first: with other locks
   * changing hands meanwhile, dating it from the last would put off judging the puts that left
   * the first untaken for as long as the others keep moving (live puts ahead show it, see
   * LineMember.showLife). No stall without free locks or without others in line. The commit time
   * is read only once the stall is viewed (Unread).
   */
  observe(tip: string, free: readonly string[], othersInLine: boolean, seenAt: number): void {
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
    const since = new Map<string, number | Unread>();
    for (const name of free)
      since.set(
        name,
        (recent ? this.freeSince.get(name) : undefined) ?? { seenAt, tip, readAt: now },
      );
    this.freeSince = since;
    const stallSince = this.earliestFree();
    if (this.stalled === undefined) this.stalled = { since: stallSince, tips: new Set([tip]) };
    else {
      this.stalled.since = stallSince;
      this.stalled.tips.add(tip);
    }
  }

  /** Reads the commit times the free locks first seen are dated by, once each. */
  private async settle(): Promise<void> {
    const times = new Map<string, number | undefined>();
    for (const [name, at] of this.freeSince) {
      if (typeof at === 'number') continue;
      if (!times.has(at.tip)) times.set(at.tip, await this.committedAt(at.tip));
      this.freeSince.set(name, Math.min(at.seenAt, (times.get(at.tip) ?? at.readAt) + 1_000));
    }
    if (this.stalled && times.size > 0) this.stalled.since = this.earliestFree();
  }

  /** The earliest a free lock is known to have been free since (an unread one: when seen). */
  private earliestFree(): number {
    return Math.min(
      ...[...this.freeSince.values()].map((at) => (typeof at === 'number' ? at : at.seenAt)),
    );
  }

  /** The tip a poll saw (undefined: no branch): when it moved, and a tip seen in the stall. */
  polled(tip: string | undefined): void {
    if (tip !== this.lastPolled) {
      this.lastPolled = tip;
      this.moved = this.clock.now();
    }
    if (tip !== undefined) this.stalled?.tips.add(tip);
  }

  /** The tip at the last poll. */
  get polledTip(): string | undefined {
    return this.lastPolled;
  }

  /** When this put last saw the tip move (see polled; QUIET_AFTER_DELAYS in line-member.ts). */
  get movedAt(): number {
    return this.moved;
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

  /**
   * The stall as goneAt judges it, with what this put has seen of the line: its start read first
   * where a lock first seen free dates it (a commit time, read only now).
   */
  async view(): Promise<Stall | undefined> {
    if (!this.stalled) return undefined;
    await this.settle();
    return {
      ...this.stalled,
      sightings: this.sightings,
      watchingSince: this.firstLook ?? this.clock.now(),
    };
  }
}
