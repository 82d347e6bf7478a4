// The lock policy: what one attempt at an operation does, under the one retry policy (retry.ts).
// It decides what to change, when to wait and when to give up; it never touches git itself
// (LockStore does), and an acquire's place in the waiting line is its LineMember's to keep.
import { CancelledError, OperationError, WaitTimeoutError, formatMs } from '../base/errors.js';
import { PUSH_GRACE_MS } from '../base/stop-budget.js';
import { LineMember } from './line-member.js';
import { fence } from './fencing.js';
import { decide, freeLocks, type CommitStep, type ResolvedOperation } from './lock-operation.js';
import { expiredClaims, nextExpiry, type Leases, type Reclaim } from './leases.js';
import type { PoolState } from './pool-state.js';
import type { Claim, LockStore, PushOutcome } from './lock-store.js';
import { matchingPool, matchingWaitReason } from './matching-locks.js';
import { PendingClaims, type PendingClaim } from './pending-claims.js';
import { retry, type Attempt, type Clock } from './retry.js';
import { POLL_FLOOR_MS, pollMs } from './waiting-line.js';
import { type WaitingEntry } from './line-entry.js';

export interface PoolReporter {
  /**
   * Called on every poll while waiting; the reporter decides what is worth a line (and may look
   * up who holds the wanted locks before writing it).
   */
  waiting(
    reason: string,
    wanted: readonly string[],
    waitedMs: number,
    /** The newest branch tip the put has seen: who holds the wanted locks is read there. */
    tip?: string,
  ): void | Promise<void>;
  /** A rejected or no-op push: the pool moved under us. */
  conflict(name: string): void;
  transient(error: unknown, attempt: number, delayMs: number): void;
  /** Something about the waiting line worth a line on stderr (refused, left behind). */
  line(message: string): void;
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
  /** Who this put is, in its place in line for people to read (WaitingEntry.who). */
  lineWho?: string;
  /**
   * What the caller calls its wait timeout, for the message when it runs out (default
   * `params.wait_timeout`, the put's parameter; the pool command's flag is `--wait-timeout`).
   */
  waitTimeoutSetting?: string;
  /** Builds the message of one commit of a decision. */
  message(step: CommitStep): string;
  /** How long after its lease a claim still counts as held (SPEC §10 `lease_grace`). */
  leaseGraceMs?: number;
  /** Who reclaims expired claims, for `Reclaimed-By`: the build URL or the operator. */
  reclaimedBy?: string;
}

/** SPEC §10's default `lease_grace`. */
const DEFAULT_LEASE_GRACE_MS = 5 * 60_000;

export interface Outcome {
  /** The last commit the operation pushed (or the one it observed). */
  ref: string;
  /** The lock it is about: the first of `names`. */
  name: string;
  /** Every lock it took or changed, in the order of its commits. */
  names: string[];
  /** The expired claims it reclaimed (a reap's dry run: would reclaim). */
  reclaimed?: Reclaim[];
}

export class LockPool {
  /** The claims this run may have pushed (see PendingClaims). */
  private readonly claims = new PendingClaims();
  /** Whether this run has polled while waiting (see waitForChange). */
  private polled = false;
  /** The acquire's place in the waiting line (undefined for other operations). */
  private line: LineMember | undefined;
  /** A tip the wait already synced to, which the next attempt starts from. */
  private presynced: string | undefined;

  constructor(
    private readonly store: LockStore,
    private readonly clock: Clock,
    private readonly reporter: PoolReporter,
    private readonly options: LockPoolOptions,
    private readonly signal: AbortSignal,
  ) {}

  /**
   * The claims this run may have left on the remote: after success, the one it holds; after a
   * stop or a failure, what the compensating release looks for.
   */
  pendingClaims(): readonly PendingClaim[] {
    return this.claims.list();
  }

  /** Hands the pending claims over to the compensating release (run/abandoned-claim.ts). */
  takePendingClaims(): PendingClaim[] {
    return this.claims.takeAll();
  }

  async run(operation: ResolvedOperation): Promise<Outcome> {
    const started = this.clock.now();
    const { lineToken, lineWho, pool, retryDelayMs } = this.options;
    // A put that wants only some locks stays out of the line: in it, it would hold back the
    // locks it does not want from the puts behind it (it polls, as the reference does).
    if (operation.kind === 'acquire' && lineToken !== undefined && !operation.filter) {
      this.line = new LineMember(this.store, this.clock, {
        pool,
        retryDelayMs,
        token: lineToken,
        started,
        count: operation.count,
        who: lineWho,
        say: (message) => this.reporter.line(message),
      });
    }
    try {
      return await retry(() => this.attempt(operation, started), {
        clock: this.clock,
        signal: this.signal,
        onConflict: (name) => this.reporter.conflict(name),
        // The jitter keeps writers after the same locks out of lockstep (acquires and claims out
        // of line). A put in line races only the others the same free locks serve, each push
        // landing on the one before, and a release (or any change that takes nothing) lands on
        // whatever it lost to: a jitter would only hold up the hand-over on whose way they are.
        jitterAfterConflict: () =>
          (operation.kind === 'acquire' || operation.kind === 'claim') && !this.line?.leavingEntry,
        onTransient: (error, attempt, delayMs) => this.reporter.transient(error, attempt, delayMs),
      });
    } catch (error) {
      await this.line?.leave(this.signal);
      throw error;
    }
  }

  private async attempt(operation: ResolvedOperation, started: number): Promise<Attempt<Outcome>> {
    const presynced = this.presynced;
    this.presynced = undefined;
    const tip = presynced ?? (await this.store.sync());
    // A push whose result we never saw (connection dropped, timed out) may have landed.
    const landed = await this.claims.landedBy(this.store, tip);
    if (landed) {
      const names = landed.locks.map(({ name }) => name);
      return { kind: 'done', value: { ref: landed.locks.at(-1)!.commit, name: names[0]!, names } };
    }
    const filter = operation.kind === 'acquire' ? operation.filter : undefined;
    let state = await this.store.pool();
    const fenced = await fence(this.store, operation, state);
    if (fenced === 'moved')
      return { kind: 'conflict', name: 'name' in operation ? operation.name : '' };
    if (fenced !== undefined) throw new OperationError(fenced);
    if (filter)
      state = await matchingPool(state, filter, this.options.pool, (names) =>
        this.store.metadata(names),
      );
    // With a filter, only matching locks: an expired lock that does not match is not free either.
    const leases = await this.leases(operation, state);
    if (leases === 'moved')
      return { kind: 'conflict', name: 'name' in operation ? operation.name : '' };
    const line = this.line?.active ? this.line : undefined;
    let pick = () => this.clock.random();
    if (line) {
      // An expired lock counts as free for an acquire that may reclaim it, in line as out of it.
      const count = operation.kind === 'acquire' ? (operation.count ?? 1) : 1;
      const unclaimed = freeLocks(state);
      const free =
        unclaimed.length < count &&
        leases &&
        operation.kind === 'acquire' &&
        operation.reclaimExpired
          ? [...unclaimed, ...expiredClaims(state, leases).map(({ name }) => name)]
          : unclaimed;
      // A sync of its own read the line on the server; a wait's may have inferred it.
      line.observePool(tip, free, [...state.claimed], presynced === undefined);
      // Fewer free than this put takes: no turn to wait for yet (decide says what it waits for).
      if (free.length >= count) {
        const turn = await line.turn(tip);
        if (turn === 'wait') {
          // A lock freed for the put ahead is a passing state: near the front it comes and goes
          // with every hand-over, and each new reason is a line on stderr and a holder lookup
          // (a fetch). A put that already waits keeps saying what it waits for.
          const { reason, wanted } = line.lastWait() ?? {
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
    const decision = decide(operation, state, this.options.pool, pick, leases);
    switch (decision.kind) {
      case 'fail':
        throw new OperationError(decision.message);
      case 'observed': {
        const names = decision.name === '' ? [] : [decision.name];
        const { reclaimed } = decision;
        return { kind: 'done', value: { ref: tip, name: decision.name, names, reclaimed } };
      }
      case 'wait': {
        // A lease that runs out while waiting changes nothing on the branch: look again then.
        const until = leases ? nextExpiry(leases) : undefined;
        if (line && operation.kind === 'acquire' && (await line.waitFor(decision, tip))) {
          await this.waitInLine(line, tip, decision.reason, decision.wanted, started, until);
        } else {
          const reason = filter
            ? matchingWaitReason(filter, state, this.options.pool)
            : decision.reason;
          await this.waitForChange(tip, reason, decision.wanted, started, until);
        }
        return { kind: 'waited' };
      }
      case 'commit': {
        const done = await this.commitAndPush(decision.commits, tip, line);
        if (done.kind !== 'done') return done;
        const { answer, reclaimed } = decision;
        return { kind: 'done', value: { ...done.value, ref: answer ?? done.value.ref, reclaimed } };
      }
    }
  }

  /**
   * The current claims and the time, for the operations that decide by leases: a reap, a renew,
   * and an acquire that may reclaim when no lock is unclaimed. 'moved': the branch moved while
   * they were read.
   */
  private async leases(
    operation: ResolvedOperation,
    state: PoolState,
  ): Promise<Leases | 'moved' | undefined> {
    let names: string[];
    if (operation.kind === 'reap') names = [...state.claimed];
    else if (operation.kind === 'renew') names = [...(operation.names ?? [operation.name])];
    else if (
      operation.kind === 'acquire' &&
      operation.reclaimExpired &&
      freeLocks(state).length < (operation.count ?? 1)
    )
      names = [...state.claimed];
    else return undefined;
    const claims = names.length === 0 ? new Map() : await this.store.claims(names.sort());
    if (!claims) return 'moved';
    return {
      claims,
      now: this.clock.now(),
      graceMs: this.options.leaseGraceMs ?? DEFAULT_LEASE_GRACE_MS,
      reclaimedBy: this.options.reclaimedBy ?? 'unknown',
    };
  }

  /**
   * Commits the steps on the synced tip, in order, and pushes them at once: the claims among them
   * land together or not at all.
   */
  private async commitAndPush(
    steps: readonly CommitStep[],
    tip: string,
    line: LineMember | undefined,
  ): Promise<Attempt<Outcome>> {
    for (const step of steps) await this.store.apply(step.change);
    if (!(await this.store.hasStagedChanges())) {
      // An update with the metadata the lock already has: nothing to commit.
      const { name } = steps[0]!;
      const ref = await this.store.lastCommitOf('unclaimed', name);
      return { kind: 'done', value: { ref, name, names: [name] } };
    }
    const refs = await this.store.commit(steps.map((step) => this.options.message(step)));
    const ref = refs.at(-1)!;
    const claimed: Claim[] = steps.flatMap((step, index) =>
      step.claiming ? [{ name: step.name, commit: refs[index]! }] : [],
    );
    // What the operation is about: the locks it takes, else every lock it changes.
    const names = [...new Set((claimed.length > 0 ? claimed : steps).map(({ name }) => name))];
    const value: Outcome = { ref, name: names[0]!, names };
    const claim: PendingClaim | undefined =
      claimed.length > 0 ? { locks: claimed, parent: tip } : undefined;
    if (claim) this.claims.add(claim);
    this.throwIfCancelled();
    let pushed: PushOutcome;
    try {
      pushed = claim ? await this.pushWithGrace(line?.leavingEntry) : await this.store.push();
    } catch (error) {
      // Refused by the remote is an answer; anything else leaves the server's side unknown.
      if (claim && !(error instanceof OperationError)) this.claims.unanswered(claim);
      throw error;
    }
    if (pushed === 'pushed') {
      if (claim) {
        this.claims.landed(claim);
        line?.claimed();
      }
      return { kind: 'done', value };
    }
    if (claim) {
      this.claims.rejected(claim);
      // Puts that start together would all race again for the locks left, each race a fetch and
      // a push for every loser: in line, only the puts the free locks serve try for them.
      await line?.joinAfterLostRace(tip);
    }
    // The next attempt starts from the tip that won, where the store fetches it at no connection.
    this.presynced = await this.store.syncAfterLostRace(line?.infersLine ?? true);
    return { kind: 'conflict', name: value.name };
  }

  /** Waits in line (see LineMember.waitInLine), reporting and pausing as waitForChange does. */
  private async waitInLine(
    line: LineMember,
    tip: string,
    reason: string,
    wanted: string[],
    started: number,
    until?: number,
  ): Promise<void> {
    this.presynced = await line.waitInLine(tip, {
      report: (newest) => this.reporter.waiting(reason, wanted, this.clock.now() - started, newest),
      pause: (intervalMs) => this.pause(intervalMs, reason, started),
      wakeAt: until,
    });
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
    until?: number,
  ): Promise<void> {
    for (;;) {
      await this.reporter.waiting(reason, wanted, this.clock.now() - started, tip);
      const left = until === undefined ? undefined : until - this.clock.now();
      await this.pause(
        left === undefined ? undefined : Math.min(pollMs(this.options.retryDelayMs), left),
        reason,
        started,
      );
      if (until !== undefined && this.clock.now() >= until) return;
      if (((await this.store.tipNow()) ?? (await this.store.look()).tip) !== tip) return;
    }
  }

  /**
   * One sleep between polls: `intervalMs` (retry_delay unless given), the first of a run a random
   * part of it (see waitForChange); ends the wait once the wait timeout has passed.
   */
  private async pause(intervalMs: number | undefined, reason: string, started: number) {
    const waited = this.clock.now() - started;
    const { waitTimeoutMs } = this.options;
    const interval = Math.max(POLL_FLOOR_MS, intervalMs ?? pollMs(this.options.retryDelayMs));
    const delay = this.polled ? interval : Math.ceil(this.clock.random() * interval);
    this.polled = true;
    const timedOut = () =>
      new WaitTimeoutError(
        `timed out after ${formatMs(waitTimeoutMs ?? 0)} (${this.options.waitTimeoutSetting ?? 'params.wait_timeout'}) waiting: ${reason}`,
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
