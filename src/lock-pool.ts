// The lock policy: one retry loop over one attempt per operation. It decides when to try again,
// when to wait and when to give up; it never touches git itself (LockStore does).
import {
  CancelledError,
  ConfigurationError,
  GaveUpError,
  GitTimeoutError,
  OperationError,
  WaitTimeoutError,
  formatMs,
} from './errors.js';
import type { PushOutcome } from './git/push-outcome.js';
import { decide, type ResolvedOperation } from './lock-operation.js';
import type { Change, LockState, PoolState } from './pool-state.js';

/** The git mechanism, in lock vocabulary. */
export interface LockStore {
  /** Fetches the branch tip into the working copy; returns its commit id. */
  sync(): Promise<string>;
  /** The remote branch tip without fetching (cheap polling while waiting). */
  remoteTip(): Promise<string | undefined>;
  pool(): Promise<PoolState>;
  apply(change: Change): Promise<void>;
  hasStagedChanges(): Promise<boolean>;
  commit(message: string): Promise<string>;
  /** `signal` replaces the store's own cancellation for this push (see PUSH_GRACE_MS). */
  push(signal?: AbortSignal): Promise<PushOutcome>;
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

export interface LockPoolOptions {
  pool: string;
  retryDelayMs: number;
  waitTimeoutMs?: number;
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
/**
 * How long a claim's push already under way may go on after cancellation. A server that has the
 * pack moves the branch even if the client hangs up (git daemon with a slow pre-receive hook
 * does), so killing the push could land a claim after the compensating release looked for it.
 * Letting it finish tells us whether there is anything to release. src/main.ts waits this long.
 */
export const PUSH_GRACE_MS = 3_000;

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

  constructor(
    private readonly store: LockStore,
    private readonly clock: Clock,
    private readonly reporter: PoolReporter,
    private readonly options: LockPoolOptions,
    private readonly signal: AbortSignal,
  ) {}

  async run(operation: ResolvedOperation): Promise<Outcome> {
    const started = this.clock.now();
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
          await this.clock.sleep(Math.floor(this.clock.random() * CONFLICT_JITTER_MS), this.signal);
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
    const tip = await this.store.sync();
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
    const decision = decide(operation, await this.store.pool(), this.options.pool, () =>
      this.clock.random(),
    );
    switch (decision.kind) {
      case 'fail':
        throw new OperationError(decision.message);
      case 'observed':
        return { kind: 'done', outcome: { ref: tip, name: decision.name } };
      case 'wait':
        await this.waitForChange(tip, decision.reason, decision.wanted, started);
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
          pushed = decision.claiming ? await this.pushWithGrace() : await this.store.push();
        } catch (error) {
          // Refused by the remote is an answer; anything else leaves the server's side unknown.
          if (!(error instanceof OperationError)) claim.unanswered = true;
          throw error;
        }
        if (pushed === 'pushed') {
          if (decision.claiming) this.pendingClaims = [claim];
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
      const waited = this.clock.now() - started;
      const { waitTimeoutMs } = this.options;
      const delay = this.polled
        ? this.options.retryDelayMs
        : Math.ceil(this.clock.random() * this.options.retryDelayMs);
      this.polled = true;
      if (waitTimeoutMs !== undefined) {
        const left = waitTimeoutMs - waited;
        if (left <= 0) {
          throw new WaitTimeoutError(
            `timed out after ${formatMs(waitTimeoutMs)} (params.wait_timeout) waiting: ${reason}`,
          );
        }
        await this.clock.sleep(Math.min(delay, left), this.signal);
        if (this.clock.now() - started >= waitTimeoutMs) {
          throw new WaitTimeoutError(
            `timed out after ${formatMs(waitTimeoutMs)} (params.wait_timeout) waiting: ${reason}`,
          );
        }
      } else {
        await this.clock.sleep(delay, this.signal);
      }
      const remote = await this.store.remoteTip();
      if (remote !== tip) return;
    }
  }

  /** Pushes on a signal that fires PUSH_GRACE_MS after the run's (see there why). */
  private async pushWithGrace(): Promise<PushOutcome> {
    const grace = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const startGrace = () => {
      timer = setTimeout(() => grace.abort(this.signal.reason), PUSH_GRACE_MS);
    };
    this.signal.addEventListener('abort', startGrace, { once: true });
    try {
      return await this.store.push(grace.signal);
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
