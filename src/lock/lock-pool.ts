// The lock policy: one retry loop over one attempt per operation. It decides when to try again,
// when to wait and when to give up; it never touches git itself (LockStore does).
import {
  CancelledError,
  ConfigurationError,
  GaveUpError,
  GitTimeoutError,
  OperationError,
  WaitTimeoutError,
  describeError,
  formatMs,
} from '../base/errors.js';
import { LEAVE_AFTER_STOP_MS, PUSH_GRACE_MS } from '../base/stop-budget.js';
import { decide, freeLocks, type ResolvedOperation } from './lock-operation.js';
import type { Change, LockState, PoolState } from './pool-state.js';
import {
  FRONT_SPARE,
  POLL_FLOOR_MS,
  entriesAhead,
  frontPollMs,
  goneAfterMs,
  goneAt,
  pollMs,
  showLifeAfterMs,
  sightKey,
  type Stall,
  type WaitingEntry,
} from './waiting-line.js';

/**
 * What a push did: landed, lost a race (the branch moved), or changed nothing. The store reads it
 * from git (git/push-outcome.ts); the policy knows only these words.
 */
export type PushOutcome = 'pushed' | 'rejected' | 'up-to-date';

/** The git mechanism, in lock vocabulary. */
export interface LockStore {
  /** Fetches the branch tip into the working copy; returns its commit id. */
  sync(): Promise<string>;
  /** The pool's waiting line as the last sync found it (an acquire's store fetches it). */
  syncedLine(): WaitingEntry[];
  /** The remote branch tip and the pool's waiting line, without fetching (cheap polling). */
  look(): Promise<{ tip: string | undefined; line: WaitingEntry[] }>;
  /** When the synced tip was committed (ms, to the second; its committer's clock), if known. */
  tipTime(): Promise<number | undefined>;
  /**
   * Puts an entry in the waiting line at the synced tip, or moves it there; false when the
   * remote refuses the line's refs.
   */
  join(entry: WaitingEntry): Promise<boolean>;
  /** Takes entries out of the line: this put's own, or those of puts that are gone. */
  leave(entries: readonly WaitingEntry[], signal?: AbortSignal): Promise<void>;
  pool(): Promise<PoolState>;
  apply(change: Change): Promise<void>;
  hasStagedChanges(): Promise<boolean>;
  commit(message: string): Promise<string>;
  /**
   * `signal` replaces the store's own cancellation for this push (see PUSH_GRACE_MS); `leaving`
   * takes that entry out of the line in the same, atomic, push.
   */
  push(signal?: AbortSignal, leaving?: WaitingEntry): Promise<PushOutcome>;
  /** The newest commit that touched this lock's file (answer of an update that changed nothing). */
  lastCommitOf(state: LockState, name: string): Promise<string>;
  /**
   * Whether the synced tip still carries this claim (its commit, and no later change to the
   * lock). With the tip the claim was made on (`parent`), history older than that need not be
   * fetched to tell.
   */
  holds(claim: Claim & { parent?: string }): Promise<boolean>;
}

export interface Clock {
  now(): number;
  /** Resolves after `ms`, rejects with CancelledError when `signal` aborts. */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
  random(): number;
}

export interface PoolReporter {
  /**
   * Called on every poll while waiting; the reporter decides what is worth a line (and may look
   * up who holds the wanted locks before writing it).
   */
  waiting(reason: string, wanted: readonly string[], waitedMs: number): void | Promise<void>;
  /** A rejected or no-op push: the pool moved under us. */
  conflict(name: string): void;
  transient(error: unknown, attempt: number, delayMs: number): void;
  /** Something about the waiting line worth a line on stderr (refused, left behind). */
  line(message: string): void;
}

export interface Claim {
  name: string;
  commit: string;
}

/** A claiming commit pushed without a definite answer, and the tip it was committed on. */
export interface PendingClaim extends Claim {
  parent: string;
  /**
   * Its push ended with no answer from the server (timed out, connection lost, stopped after
   * PUSH_GRACE_MS): the server may still be applying it.
   */
  unanswered?: boolean;
}

/** How often a release looks again for a claim whose push the server may still be applying. */
const LATE_CLAIM_POLL_MS = 500;
/**
 * A pool whose tip this put has not seen move for this many retry_delays is quiet: the locks are
 * held for long, and the front of the line polls at retry_delay again (a release is then seen as
 * soon as the reference would see it) rather than at frontPollMs for hours.
 */
const QUIET_AFTER_DELAYS = 10;
/** How long a put that failed or timed out tries to take itself out of the line. */
const LEAVE_MS = 10_000;

/** An acquire's place in the waiting line, and what it last saw of the line and the pool. */
interface LineState {
  me: WaitingEntry;
  /** Whether the entry is on the remote, as far as this put knows. */
  joined: boolean;
  /** The remote refused the line's refs: this run waits without a place. */
  refused: boolean;
  /** Whether the place in line has been said on stderr. */
  placeSaid: boolean;
  /** What the put last waited for when no lock was free (see attempt). */
  waitingFor: { reason: string; wanted: string[] } | undefined;
  /** Entries taken to be gone (sightKey), left out of the order. */
  gone: Set<string>;
  /** Entries ahead of this put at the last look (undefined before the first). */
  ahead: WaitingEntry[] | undefined;
  /** Free locks at the last sync. */
  free: number;
  /** Each lock free at the last sync, and since when it is known to be free. */
  freeSince: Map<string, number>;
  /** When, and at which tip, the free locks were last read. */
  syncedAt: number | undefined;
  syncedTip: string | undefined;
  /** Locks free while others stand in line, as this put has seen it (see waiting-line.ts). */
  stall: { since: number; tips: Set<string> } | undefined;
  /** When this put first saw each entry pointing where it points now (by sightKey). */
  sightings: Map<string, number>;
  /** When this put first looked at the line. */
  watchingSince: number | undefined;
  /**
   * The entries ahead at a look that found a tip this put has not fetched (see waitInLine).
   */
  unfetched: string | undefined;
  /** The tip at the last poll, and when this put last saw it move (see frontPollMs). */
  lastTip: string | undefined;
  movedAt: number;
}

export interface LockPoolOptions {
  pool: string;
  retryDelayMs: number;
  waitTimeoutMs?: number;
  /**
   * This put's token (letters and digits) for its place in the waiting line; without it an
   * acquire waits as the reference does: whoever polls first after a release takes the lock.
   */
  lineToken?: string;
  /** Builds the commit message for a decision; `claiming` marks commits that take a lock. */
  message(subject: string, claiming: boolean): string;
}

export interface Outcome {
  ref: string;
  name: string;
}

/** How often a transient failure (network, server) is retried before giving up. */
export const TRANSIENT_RETRIES = 4;
/** How often a command that timed out is tried again. */
export const TIMEOUT_RETRIES = 1;
const BACKOFF_MS = [500, 1000, 2000, 4000];
/** Jitter after a lost race, so racing writers don't collide again in lockstep. */
const CONFLICT_JITTER_MS = 200;
export class LockPool {
  /**
   * Claiming commits that may be on the remote: each is added before its push and dropped when
   * the remote rejects it or can no longer take it. After cancellation or failure these are what
   * the compensating release looks for; after success, the claim that is held.
   *
   * More than one only after pushes whose answer was lost (a timeout, a dropped connection): the
   * server may still be applying such a push when the next attempt syncs, and land it later. A
   * push moves the branch only from the tip its commit was made on, so a claim stays possible
   * while the branch is still at that tip, and at most one of them can ever land.
   */
  pendingClaims: PendingClaim[] = [];
  /** Whether this run has polled while waiting (see waitForChange). */
  private polled = false;
  /** The acquire's place in the waiting line (undefined for other operations). */
  private line: LineState | undefined;
  /** A tip the wait already synced to, which the next attempt starts from. */
  private presynced: string | undefined;

  constructor(
    private readonly store: LockStore,
    private readonly clock: Clock,
    private readonly reporter: PoolReporter,
    private readonly options: LockPoolOptions,
    private readonly signal: AbortSignal,
  ) {}

  async run(operation: ResolvedOperation): Promise<Outcome> {
    const started = this.clock.now();
    const { lineToken } = this.options;
    if (operation.kind === 'acquire' && lineToken !== undefined) {
      this.line = {
        me: { since: started, retryDelayMs: this.options.retryDelayMs, token: lineToken },
        joined: false,
        refused: false,
        placeSaid: false,
        waitingFor: undefined,
        gone: new Set(),
        ahead: undefined,
        free: 0,
        freeSince: new Map(),
        syncedAt: undefined,
        syncedTip: undefined,
        stall: undefined,
        sightings: new Map(),
        watchingSince: undefined,
        unfetched: undefined,
        lastTip: undefined,
        movedAt: started,
      };
    }
    try {
      return await this.retry(operation, started);
    } catch (error) {
      await this.leaveLine();
      throw error;
    }
  }

  private async retry(operation: ResolvedOperation, started: number): Promise<Outcome> {
    let failures = 0;
    let timeouts = 0;
    for (;;) {
      this.throwIfCancelled();
      try {
        const result = await this.attempt(operation, started);
        if (result.kind === 'done') return result.outcome;
        failures = 0;
        if (result.kind === 'conflict') {
          this.reporter.conflict(result.name);
          // A put in line races no other put in line (they take different locks): the jitter
          // would only hold up the hand-over it is entitled to.
          if (!this.line?.joined)
            await this.clock.sleep(
              Math.floor(this.clock.random() * CONFLICT_JITTER_MS),
              this.signal,
            );
        }
      } catch (error) {
        if (!isTransient(error)) throw error;
        // A command that outlived git_timeout (default 5m) gets one more try, not four: five
        // attempts at a silent server would hold the step for half an hour.
        if (error instanceof GitTimeoutError) timeouts++;
        if (failures >= TRANSIENT_RETRIES || timeouts > TIMEOUT_RETRIES)
          throw new GaveUpError(`gave up after ${failures + 1} attempts`, error);
        const delay = BACKOFF_MS[Math.min(failures, BACKOFF_MS.length - 1)]!;
        failures++;
        this.reporter.transient(error, failures, delay);
        await this.clock.sleep(delay, this.signal);
      }
    }
  }

  private async attempt(
    operation: ResolvedOperation,
    started: number,
  ): Promise<
    { kind: 'done'; outcome: Outcome } | { kind: 'conflict'; name: string } | { kind: 'waited' }
  > {
    const tip = this.presynced ?? (await this.store.sync());
    this.presynced = undefined;
    // A push whose result we never saw (connection dropped, timed out) may have landed.
    for (const claim of this.pendingClaims) {
      if (await this.store.holds(claim)) {
        this.pendingClaims = [claim];
        return { kind: 'done', outcome: { ref: claim.commit, name: claim.name } };
      }
    }
    // One committed on a tip the branch has moved on from can no longer land; one committed on
    // this tip still can, and excludes any claim made on it now (only one push from a tip wins).
    this.pendingClaims = this.pendingClaims.filter((claim) => claim.parent === tip);
    const state = await this.store.pool();
    const line = this.line && !this.line.refused ? this.line : undefined;
    let pick = () => this.clock.random();
    if (line) {
      const free = freeLocks(state);
      line.free = free.length;
      await this.observePool(line, tip, free);
      if (free.length > 0) {
        const turn = await this.turnInLine(line, tip);
        if (turn === 'wait') {
          // A lock freed for the put ahead is a passing state: near the front it comes and goes
          // with every hand-over, and each new reason is a line on stderr and a holder lookup
          // (a fetch). A put that already waits keeps saying what it waits for.
          const { reason, wanted } = line.waitingFor ?? {
            reason: `the unclaimed ${free.length === 1 ? 'lock' : 'locks'} in pool "${this.options.pool}" ${free.length === 1 ? 'goes' : 'go'} to puts that have waited longer (${state.claimed.size} claimed, ${free.length} unclaimed)`,
            // After those, this put waits for a claimed one: its holders are worth naming.
            wanted: [...state.claimed].sort(),
          };
          await this.waitInLine(line, tip, reason, wanted, started);
          return { kind: 'waited' };
        }
        if (turn !== undefined) pick = () => (turn + 0.5) / free.length;
      }
    }
    const decision = decide(operation, state, this.options.pool, pick);
    switch (decision.kind) {
      case 'fail':
        throw new OperationError(decision.message);
      case 'observed':
        return { kind: 'done', outcome: { ref: tip, name: decision.name } };
      case 'wait':
        if (line && operation.kind === 'acquire' && (await this.takePlace(line, tip))) {
          line.waitingFor = decision;
          await this.waitInLine(line, tip, decision.reason, decision.wanted, started);
        } else {
          await this.waitForChange(tip, decision.reason, decision.wanted, started);
        }
        return { kind: 'waited' };
      case 'commit': {
        await this.store.apply(decision.change);
        if (!(await this.store.hasStagedChanges())) {
          // An update with the metadata the lock already has: nothing to commit.
          const ref = await this.store.lastCommitOf('unclaimed', decision.name);
          return { kind: 'done', outcome: { ref, name: decision.name } };
        }
        const ref = await this.store.commit(
          this.options.message(decision.subject, decision.claiming),
        );
        const claim: PendingClaim = { name: decision.name, commit: ref, parent: tip };
        if (decision.claiming) this.pendingClaims.push(claim);
        this.throwIfCancelled();
        let pushed: PushOutcome;
        try {
          const leaving = decision.claiming && line?.joined ? line.me : undefined;
          pushed = decision.claiming ? await this.pushWithGrace(leaving) : await this.store.push();
        } catch (error) {
          // Refused by the remote is an answer; anything else leaves the server's side unknown.
          if (!(error instanceof OperationError)) claim.unanswered = true;
          throw error;
        }
        if (pushed === 'pushed') {
          if (decision.claiming) this.pendingClaims = [claim];
          if (decision.claiming && line) line.joined = false;
          return { kind: 'done', outcome: { ref, name: decision.name } };
        }
        this.pendingClaims = this.pendingClaims.filter((pending) => pending !== claim);
        return { kind: 'conflict', name: decision.name };
      }
    }
  }

  /**
   * Sleeps `retry_delay` at a time until the remote tip moves (polled without fetching). The
   * first sleep of a run is a random part of `retry_delay`: puts that started together (a
   * pipeline's jobs, a retried build) would otherwise poll in lockstep, all notice a release at
   * the same moment and race for it, while a release right after their poll went unseen for a
   * whole `retry_delay`. Spread out, some waiter polls soon after any release.
   */
  private async waitForChange(
    tip: string,
    reason: string,
    wanted: string[],
    started: number,
  ): Promise<void> {
    for (;;) {
      await this.reporter.waiting(reason, wanted, this.clock.now() - started);
      await this.pause(undefined, reason, started);
      if ((await this.store.look()).tip !== tip) return;
    }
  }

  /**
   * One sleep between polls: `intervalMs` (retry_delay unless given), the first of a run a random
   * part of it (see waitForChange); ends the wait once params.wait_timeout has passed.
   */
  private async pause(intervalMs: number | undefined, reason: string, started: number) {
    const waited = this.clock.now() - started;
    const { waitTimeoutMs } = this.options;
    const interval = Math.max(POLL_FLOOR_MS, intervalMs ?? pollMs(this.options.retryDelayMs));
    const delay = this.polled ? interval : Math.ceil(this.clock.random() * interval);
    this.polled = true;
    const timedOut = () =>
      new WaitTimeoutError(
        `timed out after ${formatMs(waitTimeoutMs ?? 0)} (params.wait_timeout) waiting: ${reason}`,
      );
    if (waitTimeoutMs === undefined) {
      await this.clock.sleep(delay, this.signal);
      return;
    }
    const left = waitTimeoutMs - waited;
    if (left <= 0) throw timedOut();
    await this.clock.sleep(Math.min(delay, left), this.signal);
    if (this.clock.now() - started >= waitTimeoutMs) throw timedOut();
  }

  /** Takes this put out of the line after it failed, timed out or was stopped (best effort). */
  private async leaveLine(): Promise<void> {
    const line = this.line;
    if (!line?.joined) return;
    line.joined = false;
    const signal = this.signal.aborted
      ? AbortSignal.timeout(LEAVE_AFTER_STOP_MS)
      : AbortSignal.any([this.signal, AbortSignal.timeout(LEAVE_MS)]);
    try {
      await this.store.leave([line.me], signal);
    } catch (error) {
      this.reporter.line(
        `could not take this put out of the waiting line (${describeError(error)}): the puts behind it will, after ${formatMs(goneAfterMs(line.me, this.options.retryDelayMs))}`,
      );
    }
  }

  /**
   * Whether this put may take a free lock now, and which: undefined for the pool's own random
   * pick (nobody is in line, or the remote refused the line), an index into the free locks, or
   * 'wait' while the puts ahead of it take them all. Decides on the line fetched with the tip,
   * after taking out the puts ahead that are gone when that frees a lock for this one.
   */
  private async turnInLine(line: LineState, tip: string): Promise<number | 'wait' | undefined> {
    const present = this.present(line, this.store.syncedLine());
    let ahead = entriesAhead(present, line.me);
    const gone = this.goneAhead(line, ahead);
    // Taken out only when that serves this put: the puts ahead of them judge them for themselves.
    if (gone.length > 0 && ahead.length - gone.length < line.free) {
      await this.takeOut(line, gone);
      ahead = ahead.filter((entry) => !gone.includes(entry));
    }
    line.ahead = ahead;
    if (ahead.length < line.free) {
      if (present.length === 0) return undefined;
      // The same spread for every put at this tip, a different one at the next.
      const offset = Number.parseInt(tip.slice(0, 8), 16) || 0;
      return (ahead.length + offset) % line.free;
    }
    if (!(await this.takePlace(line, tip))) return undefined;
    await this.showLife(line, tip);
    return 'wait';
  }

  /** The line as seen now, without the entries taken to be gone; notes when each was first seen. */
  private present(line: LineState, seen: readonly WaitingEntry[]): WaitingEntry[] {
    const now = this.clock.now();
    line.watchingSince ??= now;
    const sightings = new Map<string, number>();
    for (const entry of seen) {
      const key = sightKey(entry);
      sightings.set(key, line.sightings.get(key) ?? now);
    }
    line.sightings = sightings;
    return seen.filter((entry) => !line.gone.has(sightKey(entry)));
  }

  /**
   * Keeps track of since when the free locks have been free. A lock seen free at the previous
   * read, at the same tip or a poll or two ago, has been free since then; any other since the
   * tip was committed (by its committer's clock, to the second), or since this put first saw
   * the tip if that is earlier. The stall dates from the lock freed first: with other locks
   * changing hands meanwhile, dating it from the last would put off judging the puts that left
   * the first untaken for as long as the others keep moving (live puts ahead show it, see
   * showLife).
   */
  private async observePool(line: LineState, tip: string, free: readonly string[]): Promise<void> {
    const now = this.clock.now();
    const others = this.store.syncedLine().some((entry) => entry.token !== line.me.token);
    const previous = { at: line.syncedAt, tip: line.syncedTip };
    line.syncedAt = now;
    line.syncedTip = tip;
    if (free.length === 0 || !others) {
      line.freeSince = new Map();
      line.stall = undefined;
      return;
    }
    const recent =
      previous.tip === tip ||
      (previous.at !== undefined && now - previous.at <= 2 * pollMs(this.options.retryDelayMs));
    // A look may have seen this tip before the fetch did.
    const seen = line.lastTip === tip ? line.movedAt : now;
    let committed: number | undefined;
    const since = new Map<string, number>();
    for (const name of free) {
      let at = recent ? line.freeSince.get(name) : undefined;
      if (at === undefined) {
        committed ??= (await this.store.tipTime()) ?? now;
        at = Math.min(seen, committed + 1_000);
      }
      since.set(name, at);
    }
    line.freeSince = since;
    const stallSince = Math.min(...since.values());
    if (line.stall === undefined) line.stall = { since: stallSince, tips: new Set([tip]) };
    else {
      line.stall.since = stallSince;
      line.stall.tips.add(tip);
    }
  }

  /** The stall as goneAt judges it, with what this put has seen of the line. */
  private stallView(line: LineState): Stall | undefined {
    if (!line.stall) return undefined;
    return {
      ...line.stall,
      sightings: line.sightings,
      watchingSince: line.watchingSince ?? this.clock.now(),
    };
  }

  /** The entries ahead that count as gone now (see goneAt). */
  private goneAhead(line: LineState, ahead: readonly WaitingEntry[]): WaitingEntry[] {
    const stall = this.stallView(line);
    if (!stall) return [];
    const now = this.clock.now();
    return ahead.filter((entry) => goneAt(entry, stall, this.options.retryDelayMs) <= now);
  }

  /** Takes out of the line, in one push, entries whose puts are gone. */
  private async takeOut(line: LineState, gone: readonly WaitingEntry[]): Promise<void> {
    for (const entry of gone) line.gone.add(sightKey(entry));
    const count = gone.length;
    const waited = this.clock.now() - (line.stall?.since ?? this.clock.now());
    this.reporter.line(
      `${count === 1 ? 'the put' : `${count} puts`} ahead in line left a free lock untaken for ${formatMs(waited)}: taking ${count === 1 ? 'it' : 'them'} out of the line`,
    );
    await this.store.leave(gone);
  }

  /**
   * In a stall older than showLifeAfterMs, moves this put's entry to the tip, so the puts behind
   * do not take it for gone (an entry of a put that is gone stays where it was).
   */
  private async showLife(line: LineState, tip: string): Promise<void> {
    const stall = line.stall;
    if (!stall || !line.joined) return;
    if (line.me.at !== undefined && stall.tips.has(line.me.at)) return;
    if (this.clock.now() - stall.since < showLifeAfterMs(this.options.retryDelayMs)) return;
    // Once per tip, whatever the answer: a refused move is not tried again at every poll.
    await this.store.join(line.me);
    line.me = { ...line.me, at: tip };
  }

  /**
   * When a put waiting in a stall has something to do: show it is alive, or take out the puts
   * ahead whose grace ends first, as many as it takes to free a lock for it.
   */
  private wakeAt(line: LineState): number | undefined {
    const stall = this.stallView(line);
    const ahead = line.ahead;
    if (!stall || !ahead || !line.joined) return undefined;
    const rd = this.options.retryDelayMs;
    const times: number[] = [];
    if (line.me.at === undefined || !stall.tips.has(line.me.at))
      times.push(stall.since + showLifeAfterMs(rd));
    const deadlines = ahead.map((entry) => goneAt(entry, stall, rd)).sort((a, b) => a - b);
    const needed = deadlines[ahead.length - line.free];
    if (line.free > 0 && needed !== undefined) times.push(needed);
    return times.length > 0 ? Math.min(...times) : undefined;
  }

  /** Joins the line unless in it; false when the remote refuses it (then no line this run). */
  private async takePlace(line: LineState, tip: string): Promise<boolean> {
    if (line.refused) return false;
    if (line.joined) return true;
    if (await this.store.join(line.me)) {
      line.joined = true;
      line.me = { ...line.me, at: tip };
      return true;
    }
    line.refused = true;
    this.reporter.line(
      "the lock repository refused the waiting line's ref (refs/pool-resource/waiting/…): waiting without a place in line",
    );
    return false;
  }

  /**
   * Waits in line until this put's turn may have come. Near the front of the line it polls at
   * frontPollMs, and each poll is the fetch: a tip that moved is at hand for the next attempt
   * without a second round trip. Further back it polls the tip and the line every retry_delay
   * without fetching: a tip change matters only to a put the free locks could reach, so it waits
   * for the line to move, and fetches a new tip only when the line ahead of it stands still for a
   * poll (a lock may be free that nobody ahead takes). In a stall it also wakes when it has
   * something to do there (see wakeAt).
   */
  private async waitInLine(
    line: LineState,
    tip: string,
    reason: string,
    wanted: string[],
    started: number,
  ): Promise<void> {
    const retryDelayMs = this.options.retryDelayMs;
    for (;;) {
      await this.reporter.waiting(reason, wanted, this.clock.now() - started);
      const busy = this.clock.now() - line.movedAt < QUIET_AFTER_DELAYS * pollMs(retryDelayMs);
      const front = busy && line.ahead !== undefined && line.ahead.length < line.free + FRONT_SPARE;
      const wake = this.wakeAt(line);
      let interval = front ? frontPollMs(retryDelayMs) : pollMs(retryDelayMs);
      if (wake !== undefined) interval = Math.min(interval, wake - this.clock.now());
      await this.pause(interval, reason, started);
      let remote: string | undefined;
      let seen: WaitingEntry[];
      if (front) {
        remote = await this.store.sync();
        seen = this.store.syncedLine();
        this.presynced = remote;
      } else {
        ({ tip: remote, line: seen } = await this.store.look());
        this.presynced = undefined;
      }
      if (remote !== line.lastTip) {
        line.lastTip = remote;
        line.movedAt = this.clock.now();
      }
      if (line.stall && remote !== undefined) line.stall.tips.add(remote);
      const present = this.present(line, seen);
      // Taken out by a put that thought this one gone, or a join whose answer was lost.
      if (line.joined && !present.some((entry) => entry.token === line.me.token)) {
        line.joined = false;
        if (!(await this.takePlace(line, this.presynced ?? tip))) return;
      }
      line.ahead = entriesAhead(present, line.me);
      if (!line.placeSaid && line.joined) {
        line.placeSaid = true;
        const ahead = line.ahead.length;
        this.reporter.line(
          `waiting in line for pool "${this.options.pool}": ${ahead === 0 ? 'first' : `${ahead} ${ahead === 1 ? 'put' : 'puts'} ahead`}`,
        );
      }
      const now = this.clock.now();
      if (wake !== undefined && now >= wake) return;
      if (remote !== tip) {
        // A branch gone (undefined) is the next sync's to report.
        if (front || remote === undefined || line.ahead.length <= line.free) return;
        // The tip moved, and for a whole poll nobody ahead has left the line: a lock may be free
        // that nobody ahead takes. When locks change hands all the time, a tip that stands
        // still would never come.
        const ahead = line.ahead.map(sightKey).join(' ');
        if (line.unfetched === ahead) return;
        line.unfetched = ahead;
        continue;
      }
      line.unfetched = undefined;
      if (line.ahead.length < line.free) return;
    }
  }

  /** Pushes on a signal that fires PUSH_GRACE_MS after the run's (base/stop-budget.ts says why). */
  private async pushWithGrace(leaving?: WaitingEntry): Promise<PushOutcome> {
    const grace = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const startGrace = () => {
      timer = setTimeout(() => grace.abort(this.signal.reason), PUSH_GRACE_MS);
    };
    this.signal.addEventListener('abort', startGrace, { once: true });
    try {
      return await this.store.push(grace.signal, leaving);
    } finally {
      this.signal.removeEventListener('abort', startGrace);
      clearTimeout(timer);
    }
  }

  private throwIfCancelled(): void {
    if (this.signal.aborted) throw new CancelledError(this.signal.reason);
  }
}

function isTransient(error: unknown): boolean {
  return !(
    error instanceof OperationError ||
    error instanceof ConfigurationError ||
    error instanceof CancelledError ||
    error instanceof WaitTimeoutError
  );
}

export type AbandonedClaimResult = 'released' | 'not-held';

/**
 * After a cancelled or failed put: if our claim reached the remote, push the matching release.
 * Runs on its own short-lived signal (the run's signal has already fired) and retries lost races
 * until it fires. A claim whose push got no answer may still be applied by the server while the
 * branch stays at the tip it was made on: it is looked for again until then, or until `signal`.
 */
export async function releaseAbandonedClaim(
  store: LockStore,
  claim: PendingClaim,
  message: string,
  signal: AbortSignal,
  clock: Pick<Clock, 'sleep'>,
): Promise<AbandonedClaimResult> {
  for (;;) {
    if (signal.aborted) throw new CancelledError(signal.reason);
    const tip = await store.sync();
    if (!(await store.holds(claim))) {
      if (!claim.unanswered || claim.parent !== tip) return 'not-held';
      try {
        await clock.sleep(LATE_CLAIM_POLL_MS, signal);
      } catch {
        throw new OperationError(
          'its push got no answer and the branch has not moved since: the server may still apply it',
        );
      }
      continue;
    }
    await store.apply({ kind: 'move', name: claim.name, from: 'claimed', to: 'unclaimed' });
    await store.commit(message);
    if ((await store.push()) === 'pushed') return 'released';
  }
}
