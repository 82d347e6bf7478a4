// An acquire's place in the waiting line (line-entry.ts, waiting-line.ts), and what it last saw
// of the line and the pool: whether its turn has come, when to poll while it waits, which puts
// ahead are gone, and leaving the line at the end. LockPool asks it at each attempt; it never
// takes a lock itself.
import { describeError, formatMs } from '../base/errors.js';
import { LEAVE_AFTER_STOP_MS } from '../base/stop-budget.js';
import type { Clock } from './retry.js';
import { LinePace } from './line-pace.js';
import { LineWatch } from './line-watch.js';
import { ReleaseForecast } from './release-forecast.js';
import type { LockStore } from './lock-store.js';
import {
  FAR_BACK_LOCKS,
  FRONT_SPARE,
  KEPT_SESSIONS,
  POLL_FLOOR_MS,
  WATCHED_BUSY_MS,
  backPollMs,
  earliest,
  goneAfterMs,
  pollMs,
  showLifeAfterMs,
  sightKey,
} from './waiting-line.js';
import { entriesAhead, lockDemand, type WaitingEntry } from './line-entry.js';

/**
 * A pool whose tip this put has not seen move for this many retry_delays is quiet: the locks are
 * held for long, and the front of the line polls at retry_delay again (a release is then seen as
 * soon as the reference would see it) rather than at frontPollMs for hours.
 */
const QUIET_AFTER_DELAYS = 10;
/** How long a put that failed or timed out tries to take itself out of the line. */
const LEAVE_MS = 10_000;

export interface LineMemberOptions {
  pool: string;
  retryDelayMs: number;
  /** This put's token (letters and digits). */
  token: string;
  /** When the put started: its place in line. */
  started: number;
  /** How many locks the put takes at once (default 1). */
  count?: number;
  /** Who the put is, shown to people looking at the line (WaitingEntry.who). */
  who?: string;
  /** Says something about the line worth a line on stderr (refused, left behind, place). */
  say(message: string): void;
}

/** What a wait in line does between its looks at the line (LockPool's reporter and sleep). */
export interface LineWait {
  /**
   * Says what the put waits for (every poll; the reporter decides what is worth a line), with the
   * newest branch tip the put has seen, where who holds the locks is read.
   */
  report(tip: string): void | Promise<void>;
  /** Sleeps about `intervalMs`, or ends the wait (wait_timeout, cancellation) by throwing. */
  pause(intervalMs: number): Promise<void>;
  /** When to stop waiting whatever the branch does (a lease runs out then, SPEC §10). */
  wakeAt?: number;
}

export class LineMember {
  private me: WaitingEntry;
  /** Whether the entry is on the remote, as far as this put knows. */
  private joined = false;
  /** The remote refused the line's refs: this run waits without a place. */
  private refused = false;
  /** Whether the place in line has been said on stderr. */
  private placeSaid = false;
  /** Whether the attempt's sync read the line on the server with this put in it (observePool). */
  private readInLine = false;
  /** Whether the last poll read the tip on the put's kept session (LockStore.tipNow). */
  private watching = false;
  /** What the put last waited for when no lock was free (see LockPool.attempt). */
  private waitingFor: { reason: string; wanted: string[] } | undefined;
  /** Entries ahead of this put at the last look (undefined before the first). */
  private ahead: WaitingEntry[] | undefined;
  /** How fast the line ahead has moved (backPollMs). */
  private readonly pace: LinePace;
  /** Free locks at the last sync, and the claimed ones. */
  private free = 0;
  private claimedLocks: readonly string[] = [];
  /** When the releases that serve this put become plausible (see frontPollInterval). */
  private readonly forecast: ReleaseForecast;
  /** The tip at which this put last let the puts ahead claim first (see turn). */
  private deferredAt: string | undefined;
  /** The entries ahead at a look that found a tip this put has not fetched (see waitInLine). */
  private unfetched: string | undefined;
  /** What this put has seen of the line and the free locks over time. */
  private readonly watch: LineWatch;

  constructor(
    private readonly store: LockStore,
    private readonly clock: Clock,
    private readonly options: LineMemberOptions,
  ) {
    const { started, retryDelayMs, token, count, who } = options;
    this.me = { since: started, retryDelayMs, token };
    if (count && count > 1) this.me.count = count;
    if (who) this.me.who = who;
    this.watch = new LineWatch(clock, retryDelayMs, started, (tip) => store.commitTime(tip));
    this.pace = new LinePace(store, clock, retryDelayMs);
    const rest = QUIET_AFTER_DELAYS * pollMs(retryDelayMs);
    this.forecast = new ReleaseForecast(store, clock, retryDelayMs, rest);
  }

  /** Whether the line serves this run: false once the remote refused its refs. */
  get active(): boolean {
    return !this.refused;
  }

  /** The entry a claim's push takes out of the line with it, when the put is in line. */
  get leavingEntry(): WaitingEntry | undefined {
    return this.joined ? this.me : undefined;
  }

  /** The claim's push took the entry out with it. */
  claimed(): void {
    this.joined = false;
  }

  /** What the put waits for while its turn has not come: what it last waited for, if anything. */
  lastWait(): { reason: string; wanted: string[] } | undefined {
    return this.waitingFor;
  }

  /** Joins the line to wait for `wait`; false when the remote refuses it (no line this run). */
  async waitFor(wait: { reason: string; wanted: string[] }, tip: string): Promise<boolean> {
    if (!(await this.takePlace(tip, true))) return false;
    this.waitingFor = wait;
    return true;
  }

  /** Joins the line after a race for a free lock lost at `tip`, unless already in it. */
  async joinAfterLostRace(tip: string): Promise<void> {
    await this.takePlace(tip);
  }

  /** Whether the line last read may stand for the server's once the branch moved (LineWatch). */
  get infersLine(): boolean {
    return this.watch.infersLine();
  }

  /**
   * Notes the free and claimed locks at the synced tip (see LineWatch.observe). `read`: the line
   * came with the tip from the server (LockStore.sync). In line already (it joined after a lost
   * race), the put has read the line since it joined: its first poll need not read it again.
   */
  observePool(tip: string, free: readonly string[], claimed: readonly string[], read: boolean) {
    this.readInLine = read && this.joined;
    if (this.readInLine) this.watch.readLine();
    this.free = free.length;
    this.claimedLocks = claimed;
    const others = this.store.syncedLine().some((entry) => entry.token !== this.me.token);
    // A look may have seen this tip before the fetch did.
    const seen = this.watch.polledTip === tip ? this.watch.movedAt : this.clock.now();
    this.watch.observe(tip, free, others, seen);
  }

  /**
   * Whether this put may take a free lock now, and which: undefined for the pool's own random
   * pick (nobody is in line, or the remote refused the line), an index into the free locks, or
   * 'wait' while the puts ahead of it take them all (or, once a tip, while the puts ahead served
   * with it claim first). Decides on the line fetched with the tip, after taking out the puts
   * ahead that are gone when that frees a lock for this one.
   */
  async turn(tip: string): Promise<number | 'wait' | undefined> {
    const present = this.watch.present(this.store.syncedLine());
    let ahead = entriesAhead(present, this.me);
    // Only the server's line shows who is gone (see LineWatch.infersLine).
    const gone = this.store.lineInferred ? [] : await this.watch.goneAhead(ahead);
    // Taken out only when that serves this put: the puts ahead of them judge them for themselves.
    if (gone.length > 0 && this.servedAfter(lockDemand(ahead) - lockDemand(gone))) {
      await this.takeOut(gone);
      ahead = ahead.filter((entry) => !gone.includes(entry));
    }
    this.see(ahead);
    if (this.servedAfter(lockDemand(ahead))) {
      if (present.length === 0) return undefined;
      // Puts ahead are served at this tip too: of the claims pushed on it, all but the first to
      // land lose their race (a push, and a connection, for nothing). A put that waits already
      // lets theirs land first, once a tip: at the next (their claim, most often) it decides again.
      if (lockDemand(ahead) > 0 && this.joined && this.waitingFor && this.deferredAt !== tip) {
        this.deferredAt = tip;
        return 'wait';
      }
      // The same spread for every put at this tip, a different one at the next.
      const offset = Number.parseInt(tip.slice(0, 8), 16) || 0;
      return (lockDemand(ahead) + offset) % this.free;
    }
    if (!(await this.takePlace(tip, true))) return undefined;
    await this.showLife(tip);
    return 'wait';
  }

  /**
   * Waits in line until this put's turn may have come; returns the tip it fetched last if it
   * fetched one (the next attempt starts from it). Near the front, and far back where a look
   * costs what a fetch does, each poll is a fetch (looksAreCheap: a look, then a fetch once the
   * tip moved). Further back it looks, and fetches the tip it saw (syncTo) only once the free
   * locks could reach it or the line ahead stood still for a poll (a lock nobody ahead takes).
   * A poll that sees no tip move with no lock free costs nothing (tipNow); one that does fetches
   * on the same session, the line told by the claims fetched (LineWatch.infersLine; first in
   * line, by none). In a stall it wakes when it has something to do.
   */
  async waitInLine(tip: string, wait: LineWait): Promise<string | undefined> {
    const quietAfterMs = QUIET_AFTER_DELAYS * pollMs(this.options.retryDelayMs);
    let presynced: string | undefined;
    let newest = tip;
    let lastSeen = this.store.syncedLine(); // as the last look or fetch found it
    // The attempt read the line with this put in it: the place is known, the first poll watches.
    if (this.readInLine) this.sayPlaceInSyncedLine();
    for (;;) {
      await wait.report(newest);
      const busy = this.clock.now() - this.watch.movedAt < quietAfterMs;
      const front = busy && this.ahead !== undefined && this.toFront() <= 0;
      // Far back where a look costs what a fetch does, each poll is a fetch (farPollMs).
      const far = !front && !this.store.looksAreCheap && this.toFront() >= FAR_BACK_LOCKS;
      // Beyond the first KEPT_SESSIONS in line (puts ahead only leave, so it does not flip back
      // and forth), by the line fetched before its first look: no session held open
      // (LockStore.unwatch).
      const known =
        this.ahead ?? entriesAhead(this.watch.present(this.store.syncedLine()), this.me);
      const sessionLetGo = known.length >= KEPT_SESSIONS;
      if (sessionLetGo) this.store.unwatch();
      const wake = earliest(await this.wakeAt(), wait.wakeAt);
      let interval = front ? await this.frontPollInterval(tip) : await this.backPollInterval(far);
      if (wake !== undefined) interval = Math.min(interval, wake - this.clock.now());
      await wait.pause(interval);
      const watched = this.placeSaid && !sessionLetGo ? await this.store.tipNow() : undefined;
      this.watching = watched !== undefined;
      const first = front && this.ahead?.length === 0;
      // The branch still at the tip: nobody can have been served while no lock is free, and a
      // lock free for a put ahead may still be on its way to it (LineWatch.infersLine).
      if (watched === tip && (this.free === 0 || (!first && this.watch.infersLine()))) {
        if (wake !== undefined && this.clock.now() >= wake) return undefined;
        continue;
      }
      let remote: string | undefined;
      let seen: WaitingEntry[];
      // First in line (nobody ahead to leave it), or the branch moved and the line can be told
      // without the server: the tip watched, fetched on the same session.
      const inferred = watched !== tip && this.watch.infersLine(far);
      const kept = watched !== undefined && (first || inferred);
      // Only the line read on the server shows that this put is still in it.
      const fresh = !kept;
      if (kept && watched === presynced) {
        // Fetched at the last poll, by a put further back that waited on: nothing new since.
        [remote, seen] = [watched, lastSeen];
      } else if (kept) {
        // First in line, nobody ahead whose claim would change its turn: no claims read.
        const since = first ? undefined : (presynced ?? tip);
        remote = await this.store.syncTo({ tip: watched, line: lastSeen, since });
        seen = this.store.syncedLine();
        presynced = remote;
      } else if ((front || far) && !this.store.looksAreCheap) {
        remote = await this.store.sync();
        seen = this.store.syncedLine();
        presynced = remote;
      } else {
        ({ tip: remote, line: seen } = await this.store.look());
        presynced = undefined;
        // On a kept connection a look is one request: the front fetches once the tip has moved,
        // the tip it saw (syncTo).
        if (front && remote !== undefined && remote !== tip) {
          remote = await this.store.syncTo({ tip: remote, line: seen });
          seen = this.store.syncedLine();
          presynced = remote;
        }
      }
      lastSeen = seen;
      if (fresh && this.joined) this.watch.readLine();
      this.watch.polled(remote);
      newest = remote ?? newest;
      const present = this.watch.present(seen);
      // Taken out by a put that thought this one gone, or a join whose answer was lost.
      if (fresh && this.joined && !present.some((entry) => entry.token === this.me.token)) {
        this.joined = false;
        if (!(await this.takePlace(presynced ?? tip))) return presynced;
      }
      const ahead = this.see(entriesAhead(present, this.me));
      this.sayPlace(ahead);
      if (wake !== undefined && this.clock.now() >= wake) return presynced;
      if (remote !== tip) {
        // A branch gone (undefined) is the next sync's to report.
        if (front || far || remote === undefined) return presynced;
        // The next attempt starts from the tip this look saw (fetched already on the session).
        const fetchSeen = async () => presynced ?? this.store.syncTo({ tip: remote, line: seen });
        if (this.servedAfter(lockDemand(ahead) - 1)) return fetchSeen();
        // The tip moved, and for a whole poll nobody ahead has left the line: a lock may be free
        // that nobody ahead takes (with locks changing hands, a still tip would never come).
        const sights = ahead.map(sightKey).join(' ');
        if (this.unfetched === sights) return fetchSeen();
        this.unfetched = sights;
        continue;
      }
      this.unfetched = undefined;
      if (this.servedAfter(lockDemand(ahead))) return presynced;
    }
  }

  /** How long a put near the front waits before its next poll at `tip` (ReleaseForecast). */
  private frontPollInterval(tip: string): Promise<number> {
    // How many locks must be released before this put is served.
    const needed = lockDemand(this.ahead ?? []) - this.free + (this.me.count ?? 1);
    // A poll on the kept session that finds the branch where it was is one request on a
    // connection open already: while the branch moves, the front polls at the floor.
    const watchedBusy = this.watching && this.clock.now() - this.watch.movedAt < WATCHED_BUSY_MS;
    const fast = watchedBusy ? POLL_FLOOR_MS : undefined;
    return this.forecast.pollInterval(tip, needed, this.claimedLocks, fast);
  }

  /** How long a put further back waits before its next poll (backPollMs; `far`: a fetch). */
  private async backPollInterval(far: boolean): Promise<number> {
    const retryDelayMs = this.options.retryDelayMs;
    if (this.ahead === undefined) return pollMs(retryDelayMs);
    const seen = await this.pace.seen(this.watch.watchingSince, far);
    return backPollMs(retryDelayMs, this.toFront(), seen, far);
  }

  /** Locks the puts ahead take before this put is near the front (see FRONT_SPARE). */
  private toFront(): number {
    return lockDemand(this.ahead ?? []) - this.free - FRONT_SPARE + 1;
  }

  /** Notes the entries ahead now, counting those that left since the last look. */
  private see(ahead: WaitingEntry[]): WaitingEntry[] {
    if (this.ahead) {
      const still = new Set(ahead.map((entry) => entry.token));
      this.pace.departedAhead(lockDemand(this.ahead.filter((entry) => !still.has(entry.token))));
    }
    this.ahead = ahead;
    return ahead;
  }

  /**
   * Takes this put out of the line after it failed, timed out or was stopped (best effort): within
   * LEAVE_AFTER_STOP_MS once `runSignal` fired, LEAVE_MS otherwise.
   */
  async leave(runSignal: AbortSignal): Promise<void> {
    if (!this.joined) return;
    this.joined = false;
    const signal = runSignal.aborted
      ? AbortSignal.timeout(LEAVE_AFTER_STOP_MS)
      : AbortSignal.any([runSignal, AbortSignal.timeout(LEAVE_MS)]);
    try {
      await this.store.leave([this.me], signal);
    } catch (error) {
      this.options.say(
        `could not take this put out of the waiting line (${describeError(error)}): the puts behind it will, after ${formatMs(goneAfterMs(this.me, this.options.retryDelayMs))}`,
      );
    }
  }

  /** Takes out of the line, in one push, entries whose puts are gone. */
  private async takeOut(gone: readonly WaitingEntry[]): Promise<void> {
    this.watch.takeForGone(gone);
    const count = gone.length;
    const waited = this.clock.now() - ((await this.watch.view())?.since ?? this.clock.now());
    this.options.say(
      `${count === 1 ? 'the put' : `${count} puts`} ahead in line left a free lock untaken for ${formatMs(waited)}: taking ${count === 1 ? 'it' : 'them'} out of the line`,
    );
    await this.store.leave(gone);
  }

  /**
   * In a stall older than showLifeAfterMs, moves this put's entry to the tip, so the puts behind
   * do not take it for gone (an entry of a put that is gone stays where it was).
   */
  private async showLife(tip: string): Promise<void> {
    const stall = await this.watch.view();
    if (!stall || !this.joined) return;
    if (this.me.at !== undefined && stall.tips.has(this.me.at)) return;
    if (this.clock.now() - stall.since < showLifeAfterMs(this.options.retryDelayMs)) return;
    // Once per tip, whatever the answer: a refused move is not tried again at every poll.
    await this.store.join(this.me);
    this.me = { ...this.me, at: tip };
  }

  /** When a put waiting in a stall has something to do (LineWatch.wakeAt). */
  private async wakeAt(): Promise<number | undefined> {
    if (!this.ahead || !this.joined) return undefined;
    const served = (demand: number) => this.servedAfter(demand);
    return this.watch.wakeAt(this.ahead, this.me.at, served, this.free > 0);
  }

  /** Says where this put stands in the line as the store last synced it, once. */
  private sayPlaceInSyncedLine(): void {
    this.sayPlace(this.see(entriesAhead(this.watch.present(this.store.syncedLine()), this.me)));
  }

  /** Says where this put stands in line, once. */
  private sayPlace(ahead: readonly WaitingEntry[]): void {
    if (this.placeSaid || !this.joined) return;
    this.placeSaid = true;
    const n = ahead.length;
    const place = n === 0 ? 'first' : `${n} ${n === 1 ? 'put' : 'puts'} ahead`;
    this.options.say(`waiting in line for pool "${this.options.pool}": ${place}`);
  }

  /** Whether the free locks serve this put once the puts ahead have taken `demand` of them. */
  private servedAfter(demand: number): boolean {
    return demand + (this.me.count ?? 1) <= this.free;
  }

  /**
   * Joins the line unless in it; false when the remote refuses it (then no line this run). `read`:
   * the line was read with the tip it joins at (not inferred), and the place is said now.
   */
  private async takePlace(tip: string, read = false): Promise<boolean> {
    if (this.refused) return false;
    if (this.joined) return true;
    if (await this.store.join(this.me)) {
      this.joined = true;
      this.me = { ...this.me, at: tip };
      const fresh = read && !this.store.lineInferred;
      this.watch.joined(fresh);
      if (fresh) this.sayPlaceInSyncedLine();
      return true;
    }
    this.refused = true;
    this.options.say(
      "the lock repository refused the waiting line's ref (refs/pool-resource/waiting/…): waiting without a place in line",
    );
    return false;
  }
}
