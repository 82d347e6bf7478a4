// What a put in the waiting line has seen of it over time (line-member.ts): since when each free
// lock has stood free (the stall that judges the puts ahead), when it first saw each entry where
// it points now, which entries it took to be gone, and whether the line it last read on the
// server still tells the line now. The evidence goneAt (waiting-line.ts) weighs; the put's
// decisions stay LineMember's.
import type { Clock } from './retry.js';
import { goneAt, pollMs, showLifeAfterMs, sightKey, type Stall } from './waiting-line.js';
import { lockDemand, type WaitingEntry } from './line-entry.js';

/**
 * How long past one poll a lock may stand free before a put reads the line on the server again
 * (see infersLine): a hand-over to the put ahead takes about a poll and a push.
 */
const FREE_INFERRED_MS = 1_000;

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
  /** Whether the put has read the line on the server since it last joined (see infersLine). */
  private readSinceJoin = false;

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

  /**
   * The put joined the line, with the line read just before (`read`) or not (after a lost race):
   * a put that started before it may yet join ahead of it.
   */
  joined(read: boolean): void {
    this.readSinceJoin = read;
  }

  /** The put read the line on the server, in it. */
  readLine(): void {
    this.readSinceJoin = true;
  }

  /**
   * Whether a poll that finds the branch moved may take the line the put last saw, less the puts
   * whose claims landed since (their pushes took them out of it: LockStore.syncTo's `since`),
   * instead of reading the line on the server. Not after a join that followed a lost race until
   * the put has read the line again (the puts it raced join too, some started before it), nor
   * once a lock has stood free for longer than a hand-over takes (`atLastRead`: when the put last
   * read the pool): the puts ahead that leave it untaken may have left the line without a claim
   * (stopped, timed out, killed), which only the server's line shows. A put that starts within a
   * fetch of another may still stand ahead of it unseen; they are served in the other order, and
   * never both on one lock.
   */
  infersLine(atLastRead = false): boolean {
    if (!this.readSinceJoin) return false;
    if (this.freeSince.size === 0) return true;
    const handOver = pollMs(this.retryDelayMs) + FREE_INFERRED_MS;
    // A put far back whose branch moved since it read the free locks, perhaps with their claims:
    // polling every few seconds, it would otherwise read the line on the server at almost every
    // poll after one that saw a lock on its way to the put ahead. The puts nearer the front, which
    // poll often, judge a stall by the time until now.
    const at = atLastRead ? (this.syncedAt ?? this.clock.now()) : this.clock.now();
    return at - this.earliestFree() < handOver;
  }

  /**
   * When a put waiting in a stall has something to do: show it is alive (its entry last pointed
   * at `at`), or take out the puts `ahead` whose grace ends first, as many as it takes to free a
   * lock for it (`served`: whether the free locks serve it once the puts ahead took `demand`).
   */
  async wakeAt(
    ahead: readonly WaitingEntry[],
    at: string | undefined,
    served: (demand: number) => boolean,
    someFree: boolean,
  ): Promise<number | undefined> {
    const stall = await this.view();
    if (!stall) return undefined;
    const rd = this.retryDelayMs;
    const times: number[] = [];
    if (at === undefined || !stall.tips.has(at)) times.push(stall.since + showLifeAfterMs(rd));
    // The puts ahead whose grace ends first, as many as must go for the free locks to reach this
    // one: when the last of them goes.
    const byDeadline = ahead
      .map((entry) => ({ entry, at: goneAt(entry, stall, rd) }))
      .sort((a, b) => a.at - b.at);
    let demand = lockDemand(ahead);
    let needed: number | undefined;
    for (const { entry, at } of byDeadline) {
      if (served(demand)) break;
      demand -= entry.count ?? 1;
      needed = at;
    }
    if (someFree && needed !== undefined && served(demand)) times.push(needed);
    return times.length > 0 ? Math.min(...times) : undefined;
  }

  /** The entries `ahead` that count as gone now (see goneAt). */
  async goneAhead(ahead: readonly WaitingEntry[]): Promise<WaitingEntry[]> {
    // Nobody ahead to judge: the stall's start (a commit time) goes unread.
    if (ahead.length === 0) return [];
    const stall = await this.view();
    if (!stall) return [];
    const now = this.clock.now();
    return ahead.filter((entry) => goneAt(entry, stall, this.retryDelayMs) <= now);
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
