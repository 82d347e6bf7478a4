// What each `out` operation does to a pool, as a pure decision over the pool's state: commit a
// change, report what it observed, wait, or fail. No git, no clocks: table-tested on its own.
import { expiredClaims, reclaimStep, renewStep, type Leases, type Reclaim } from './leases.js';
import type { Change, ClaimFacts, PoolState, ReclaimFacts } from './pool-state.js';

/**
 * `token`: the claim a release, update or renew comes from (the step folder's `claim_token`,
 * SPEC §10): the operation acts only while that claim holds the lock. `reclaimExpired`: an
 * acquire that finds no unclaimed lock takes an expired one. `reap`: reclaims every expired lock
 * (`olderThanMs`: claims without a lease older than that too), or only lists them (`dryRun`).
 */
export type ResolvedOperation =
  | { kind: 'acquire'; reclaimExpired?: boolean }
  | { kind: 'renew'; name: string; token?: string; leaseMs: number }
  | { kind: 'reap'; dryRun?: boolean; olderThanMs?: number }
  | {
      kind: 'claim' | 'release' | 'remove' | 'check' | 'check_unclaimed';
      name: string;
      token?: string;
    }
  | { kind: 'add' | 'add_claimed' | 'update'; name: string; metadata: Buffer; token?: string };

/** One commit of a decision: the change it makes, its subject and its trailers. */
export interface CommitStep {
  name: string;
  change: Change;
  subject: string;
  /** Takes the lock: the commit gets the claim trailers, and a stop looks for it to release. */
  claiming: boolean;
  /** Trailers beyond the build's and the claim's, in order (a reclaim's, a set's). */
  trailers?: readonly (readonly [string, string])[];
}

/**
 * `reclaimed`: the expired claims a decision reclaims (or, observed, would reclaim); `answer`: the
 * version to answer with instead of the last commit (a renewal answers with the claim's).
 */
export type Decision =
  /** Commits, in order, that go out in one push: all of them land or none. */
  | { kind: 'commit'; commits: CommitStep[]; reclaimed?: Reclaim[]; answer?: string }
  | { kind: 'observed'; name: string; reclaimed?: Reclaim[] }
  | { kind: 'wait'; reason: string; wanted: string[] }
  | { kind: 'fail'; message: string };

/** `leases`: the claims and the time, for the operations that need them (see LockPool). */
export function decide(
  operation: ResolvedOperation,
  pool: PoolState,
  poolName: string,
  random: () => number,
  leases?: Leases,
): Decision {
  if (operation.kind === 'reap') {
    const expired = leases ? expiredClaims(pool, leases, operation.olderThanMs) : [];
    if (expired.length === 0 || operation.dryRun)
      return { kind: 'observed', name: expired[0]?.name ?? '', reclaimed: expired };
    return {
      kind: 'commit',
      commits: expired.map((reclaim) => reclaimStep(reclaim, leases!.reclaimedBy)),
      reclaimed: expired,
    };
  }
  if (operation.kind === 'acquire') {
    const free = freeLocks(pool);
    // When no lock is unclaimed, an expired one counts as free: reclaimed and claimed in one push.
    const expired =
      free.length === 0 && operation.reclaimExpired && leases ? expiredClaims(pool, leases) : [];
    if (expired.length > 0) {
      const reclaim = expired[Math.min(expired.length - 1, Math.floor(random() * expired.length))]!;
      return {
        kind: 'commit',
        commits: [reclaimStep(reclaim, leases!.reclaimedBy), claimStep(reclaim.name)],
        reclaimed: [reclaim],
      };
    }
    if (free.length === 0) {
      return {
        kind: 'wait',
        reason: `no unclaimed lock in pool "${poolName}" (${pool.claimed.size} claimed, 0 unclaimed)`,
        wanted: [...pool.claimed].sort(),
      };
    }
    const name = free[Math.min(free.length - 1, Math.floor(random() * free.length))]!;
    return claimDecision(name);
  }

  const { name } = operation;
  const irregular =
    pool.irregular.get(`claimed/${name}`) ?? pool.irregular.get(`unclaimed/${name}`);
  if (irregular) {
    return {
      kind: 'fail',
      message: `lock "${name}" in pool "${poolName}" is ${irregular}, not a lock file: fix the lock repository`,
    };
  }
  const claimed = pool.claimed.has(name);
  const unclaimed = pool.unclaimed.has(name);
  if (claimed && unclaimed) {
    return {
      kind: 'fail',
      message: `lock "${name}" is both claimed and unclaimed in pool "${poolName}": fix the lock repository`,
    };
  }
  const exists = claimed || unclaimed;

  switch (operation.kind) {
    case 'claim':
      if (unclaimed) return claimDecision(name);
      return {
        kind: 'wait',
        reason: claimed
          ? `lock "${name}" in pool "${poolName}" is claimed`
          : `lock "${name}" does not exist in pool "${poolName}"`,
        wanted: [name],
      };
    case 'renew': {
      if (!claimed) return notClaimed(name, poolName, unclaimed, 'renew');
      const claim = leases?.claims.get(name);
      const token = operation.token ?? claim?.token;
      if (token === undefined || leases === undefined)
        return {
          kind: 'fail',
          message: `cannot renew lock "${name}": its claim has no Claim-Token (made by the reference or by hand), so no lease can name it`,
        };
      return {
        kind: 'commit',
        commits: [renewStep(name, token, new Date(leases.now + operation.leaseMs))],
        answer: claim?.commit,
      };
    }
    case 'release':
      if (!claimed) return notClaimed(name, poolName, unclaimed, 'release');
      return commitOne({
        name,
        change: { kind: 'move', name, from: 'claimed', to: 'unclaimed' },
        subject: `unclaiming: ${name}`,
        claiming: false,
      });
    case 'remove':
      if (!claimed) return notClaimed(name, poolName, unclaimed, 'remove');
      return commitOne({
        name,
        change: { kind: 'delete', name, state: 'claimed' },
        subject: `removing: ${name}`,
        claiming: false,
      });
    case 'add':
    case 'add_claimed': {
      if (exists) {
        return {
          kind: 'fail',
          message: `lock "${name}" already exists in pool "${poolName}" (${claimed ? 'claimed' : 'unclaimed'})`,
        };
      }
      const state = operation.kind === 'add' ? 'unclaimed' : 'claimed';
      return commitOne({
        name,
        change: { kind: 'write', name, state, content: operation.metadata },
        subject: `adding ${state}: ${name}`,
        claiming: state === 'claimed',
      });
    }
    case 'update':
      if (claimed)
        return {
          kind: 'wait',
          reason: `lock "${name}" in pool "${poolName}" is claimed`,
          wanted: [name],
        };
      return commitOne({
        name,
        change: { kind: 'write', name, state: 'unclaimed', content: operation.metadata },
        subject: unclaimed ? `updating: ${name}` : `adding unclaimed: ${name}`,
        claiming: false,
      });
    case 'check':
    case 'check_unclaimed': {
      if (!exists)
        return { kind: 'fail', message: `lock "${name}" does not exist in pool "${poolName}"` };
      const waitWhile = operation.kind === 'check' ? claimed : unclaimed;
      if (!waitWhile) return { kind: 'observed', name };
      return {
        kind: 'wait',
        reason: `lock "${name}" in pool "${poolName}" is ${claimed ? 'claimed' : 'unclaimed'}`,
        wanted: [name],
      };
    }
  }
}

/** The locks an acquire can take, sorted. */
export function freeLocks(pool: PoolState): string[] {
  // A name that is also in claimed/ (a broken pool) cannot be moved there: `git mv` would fail
  // or, onto a directory, nest the lock inside it.
  return [...pool.unclaimed]
    .filter((name) => !pool.claimed.has(name) && !pool.irregular.has(`claimed/${name}`))
    .sort();
}

function claimDecision(name: string): Decision {
  return commitOne(claimStep(name));
}

/** The commit that takes one lock. */
export function claimStep(name: string): CommitStep {
  return {
    name,
    change: { kind: 'move', name, from: 'unclaimed', to: 'claimed' },
    subject: `claiming: ${name}`,
    claiming: true,
  };
}

function commitOne(step: CommitStep): Decision {
  return { kind: 'commit', commits: [step] };
}

function notClaimed(name: string, poolName: string, unclaimed: boolean, verb: string): Decision {
  return {
    kind: 'fail',
    message: unclaimed
      ? `cannot ${verb} lock "${name}": it is not claimed in pool "${poolName}" (it is unclaimed)`
      : `cannot ${verb} lock "${name}": it does not exist in pool "${poolName}"`,
  };
}

/**
 * Why a step folder's claim may no longer act on its lock (fencing, SPEC §10): reclaimed, or
 * released and claimed again by someone else.
 */
export function noLongerHeld(name: string, reclaim?: ReclaimFacts, claim?: ClaimFacts): string {
  const why = reclaim
    ? `reclaimed at ${rfc3339(reclaim.at)}: ${reclaim.reason}`
    : `claimed since ${claim?.since ? rfc3339(claim.since) : 'an unknown time'} by ${claim?.by ?? 'an unknown holder'}`;
  return `lock ${name} is no longer held by this claim (${why})`;
}

function rfc3339(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
