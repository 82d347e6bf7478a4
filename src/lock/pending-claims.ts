// The claims a run may have left on the remote, and how one is released after the run was
// stopped or failed. LockPool keeps the list while it runs; run/abandoned-claim.ts takes it over
// when the run ends without the claim being the run's result, and releases from a copy of its own.
import { CancelledError, OperationError } from '../base/errors.js';
import type { Clock } from './retry.js';
import type { Claim, LockStore } from './lock-store.js';

/**
 * The claiming commits of one push (one lock, or a set taken at once: they land together or not
 * at all), and the tip they were committed on.
 */
export interface PendingClaim {
  locks: readonly Claim[];
  parent: string;
  /**
   * Its push ended with no answer from the server (timed out, connection lost, stopped after
   * PUSH_GRACE_MS): the server may still be applying it.
   */
  unanswered?: boolean;
}

/**
 * Claiming commits that may be on the remote: each is added before its push and dropped when the
 * remote rejects it or can no longer take it. After cancellation or failure these are what the
 * compensating release looks for; after success, the claim that is held.
 *
 * More than one only after pushes whose answer was lost (a timeout, a dropped connection): the
 * server may still be applying such a push when the next attempt syncs, and land it later. A push
 * moves the branch only from the tip its commit was made on, so a claim stays possible while the
 * branch is still at that tip, and at most one of them can ever land.
 */
export class PendingClaims {
  private claims: PendingClaim[] = [];

  /** Before its push: from now on the claim may be on the remote. */
  add(claim: PendingClaim): void {
    this.claims.push(claim);
  }

  /** The push landed: this is the claim the run holds. */
  landed(claim: PendingClaim): void {
    this.claims = [claim];
  }

  /** The remote answered no: the claim is not there. */
  rejected(claim: PendingClaim): void {
    this.claims = this.claims.filter((pending) => pending !== claim);
  }

  /** Its push ended without an answer: the server may still apply it. */
  unanswered(claim: PendingClaim): void {
    claim.unanswered = true;
  }

  /**
   * After a sync to `tip`: the claim that landed meanwhile, if one did (then it is the one held).
   * Otherwise drops those committed on a tip the branch has moved on from, which can no longer
   * land; one committed on this tip still can, and excludes any claim made on it now (only one
   * push from a tip wins).
   */
  async landedBy(store: LockStore, tip: string): Promise<PendingClaim | undefined> {
    for (const claim of this.claims) {
      if (await holdsAny(store, claim)) {
        this.claims = [claim];
        return claim;
      }
    }
    this.claims = this.claims.filter((claim) => claim.parent === tip);
    return undefined;
  }

  /** The claims as they stand, to name them (at most one of them can be on the remote). */
  list(): readonly PendingClaim[] {
    return this.claims;
  }

  /** Hands the claims over for releasing: this list no longer has them. */
  takeAll(): PendingClaim[] {
    const claims = this.claims;
    this.claims = [];
    return claims;
  }
}

/**
 * Whether the synced tip carries the claim: a push lands all its commits or none, so one lock
 * still held by its commit shows that it landed.
 */
async function holdsAny(store: LockStore, claim: PendingClaim): Promise<boolean> {
  for (const lock of claim.locks) {
    if (await store.holds({ ...lock, parent: claim.parent })) return true;
  }
  return false;
}

/** How often a release looks again for a claim whose push the server may still be applying. */
const LATE_CLAIM_POLL_MS = 500;

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
  /** The release commit's message for each lock. */
  message: (name: string) => string,
  signal: AbortSignal,
  clock: Pick<Clock, 'sleep'>,
): Promise<AbandonedClaimResult> {
  for (;;) {
    if (signal.aborted) throw new CancelledError(signal.reason);
    const tip = await store.sync();
    // Of a set, the locks still held by this claim (another may have been released by hand).
    const held: Claim[] = [];
    for (const lock of claim.locks) {
      if (await store.holds({ ...lock, parent: claim.parent })) held.push(lock);
    }
    if (held.length === 0) {
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
    for (const { name } of held)
      await store.apply({ kind: 'move', name, from: 'claimed', to: 'unclaimed' });
    await store.commit(held.map(({ name }) => message(name)));
    if ((await store.push()) === 'pushed') return 'released';
  }
}
