// What each `out` operation does to a pool, as a pure decision over the pool's state: commit a
// change, report what it observed, wait, or fail. No git, no clocks: table-tested on its own.
import { describeFilter, type LockFilter } from '../base/lock-match.js';
import { expiredClaims, reclaimStep, renewStep, type Leases, type Reclaim } from './leases.js';
import type { Change, PoolState } from './pool-state.js';

/**
 * `token`: the claim a release, update or renew comes from (the step folder's `claim_token`,
 * SPEC §10): the operation acts only while that claim holds the lock. `reclaimExpired`: an
 * acquire that finds no unclaimed lock takes an expired one. `reap`: reclaims every expired lock
 * (`olderThanMs`: claims without a lease older than that too), or only lists them (`dryRun`).
 */
export type ResolvedOperation =
  /**
   * `count` distinct locks, all or none (default 1); only among those `filter` lets through;
   * `reclaimExpired`: expired ones count as free when too few are unclaimed (SPEC §10).
   */
  | { kind: 'acquire'; count?: number; filter?: LockFilter; reclaimExpired?: boolean }
  /** `names`: every lock of a set got together (SPEC §11), `name` its first: all renewed. */
  | { kind: 'renew'; name: string; names?: readonly string[]; token?: string; leaseMs: number }
  | { kind: 'reap'; dryRun?: boolean; olderThanMs?: number }
  /**
   * `names`, when given, is the whole set (more than one lock, `name` its first): claimed all or
   * none, released all in one push.
   */
  | { kind: 'claim' | 'release'; name: string; names?: readonly string[]; token?: string }
  | { kind: 'remove' | 'check' | 'check_unclaimed'; name: string }
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
    // Fewer unclaimed locks than asked for: expired ones count as free (SPEC §10).
    const reclaimable =
      operation.reclaimExpired && leases && freeLocks(pool).length < (operation.count ?? 1)
        ? expiredClaims(pool, leases)
        : [];
    return decideAcquire(operation, pool, poolName, random, reclaimable, leases?.reclaimedBy);
  }
  if ((operation.kind === 'claim' || operation.kind === 'release') && operation.names)
    return decideSet(operation.kind, operation.names, pool, poolName);

  const { name } = operation;
  const broken = brokenLock(name, pool, poolName);
  if (broken) return broken;
  const claimed = pool.claimed.has(name);
  const unclaimed = pool.unclaimed.has(name);
  const exists = claimed || unclaimed;

  switch (operation.kind) {
    case 'claim':
      if (unclaimed) return claimSet([name]);
      return {
        kind: 'wait',
        reason: claimed
          ? `lock "${name}" in pool "${poolName}" is claimed ${counts(pool)}`
          : `lock "${name}" does not exist in pool "${poolName}" ${counts(pool)}`,
        wanted: [name],
      };
    case 'renew': {
      const names = operation.names ?? [name];
      for (const each of names) {
        const broken = brokenLock(each, pool, poolName);
        if (broken) return broken;
        if (!pool.claimed.has(each))
          return notClaimed(each, poolName, pool.unclaimed.has(each), 'renew');
      }
      const claim = leases?.claims.get(name);
      const token = operation.token ?? claim?.token;
      if (token === undefined || leases === undefined)
        return {
          kind: 'fail',
          message: `cannot renew lock "${name}": its claim has no Claim-Token (made by the reference or by hand), so no lease can name it`,
        };
      const expires = new Date(leases.now + operation.leaseMs);
      return {
        kind: 'commit',
        commits: names.map((each) => renewStep(each, token, expires)),
        // A set's version is the last of its claiming commits.
        answer: leases.claims.get(names.at(-1)!)?.commit,
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
          reason: `lock "${name}" in pool "${poolName}" is claimed ${counts(pool)}`,
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
        reason: `lock "${name}" in pool "${poolName}" is ${claimed ? 'claimed' : 'unclaimed'} ${counts(pool)}`,
        wanted: [name],
      };
    }
  }
}

/** How many locks `pool` holds, claimed and unclaimed (a name in both counts once). */
function locksIn(pool: PoolState): number {
  return new Set([...pool.claimed, ...pool.unclaimed]).size;
}

/**
 * How many locks of `pool` are claimed and unclaimed, as every waiting line says (SPEC §8): the
 * unclaimed ones a claim could take (freeLocks).
 */
function counts(pool: PoolState): string {
  return `(${pool.claimed.size} claimed, ${freeLocks(pool).length} unclaimed)`;
}

/**
 * `count` locks, chosen by `random` among the free ones, or a wait until that many are free. An
 * acquire of one lock (`count: 1` as without a count) waits on an empty pool, as the reference
 * does (locks may be added); one for more locks than the pool holds fails at once.
 */
function decideAcquire(
  { count = 1, filter }: Extract<ResolvedOperation, { kind: 'acquire' }>,
  /** With a filter, only the locks it lets through (lock-pool.ts). */
  pool: PoolState,
  poolName: string,
  random: () => number,
  /** Expired claims that count as free (reclaim_expired), taken only for what is missing. */
  reclaimable: readonly Reclaim[] = [],
  reclaimedBy = 'unknown',
): Decision {
  const total = locksIn(pool);
  if (count > 1 && count > total) {
    return {
      kind: 'fail',
      message: `cannot acquire ${count} locks: pool "${poolName}" holds ${total}${filter ? ` that pass ${describeFilter(filter)}` : ''} (claimed and unclaimed)`,
    };
  }
  const free = freeLocks(pool);
  if (free.length < count && free.length + reclaimable.length >= count) {
    // The unclaimed ones first; then expired ones, each reclaimed in the same push as its claim.
    const left = [...reclaimable];
    const reclaimed: Reclaim[] = [];
    while (free.length + reclaimed.length < count) {
      const index = Math.min(left.length - 1, Math.floor(random() * left.length));
      reclaimed.push(...left.splice(index, 1));
    }
    const set = claimSet([...free, ...reclaimed.map(({ name }) => name)]);
    if (set.kind !== 'commit') return set;
    return {
      kind: 'commit',
      commits: [...reclaimed.map((reclaim) => reclaimStep(reclaim, reclaimedBy)), ...set.commits],
      reclaimed,
    };
  }
  if (free.length < count) {
    const wanted =
      count === 1 ? 'no unclaimed lock' : `${count} locks wanted, ${free.length} unclaimed`;
    return {
      kind: 'wait',
      reason: `${wanted} in pool "${poolName}" ${counts(pool)}`,
      wanted: [...pool.claimed].sort(),
    };
  }
  const names: string[] = [];
  const left = [...free];
  while (names.length < count) {
    const index = Math.min(left.length - 1, Math.floor(random() * left.length));
    names.push(...left.splice(index, 1));
  }
  return claimSet(names);
}

/** Claims or releases every lock of a set in one push, or none of them. */
function decideSet(
  kind: 'claim' | 'release',
  names: readonly string[],
  pool: PoolState,
  poolName: string,
): Decision {
  for (const name of names) {
    const broken = brokenLock(name, pool, poolName);
    if (broken) return broken;
  }
  if (kind === 'release') {
    const notClaimedName = names.find((name) => !pool.claimed.has(name));
    if (notClaimedName !== undefined)
      return notClaimed(notClaimedName, poolName, pool.unclaimed.has(notClaimedName), 'release');
    return {
      kind: 'commit',
      commits: names.map((name) => ({
        name,
        change: { kind: 'move', name, from: 'claimed', to: 'unclaimed' },
        subject: `unclaiming: ${name}`,
        claiming: false,
      })),
    };
  }
  const total = locksIn(pool);
  if (names.length > 1 && names.length > total)
    return {
      kind: 'fail',
      message: `cannot claim ${names.length} locks: pool "${poolName}" holds ${total} (claimed and unclaimed)`,
    };
  const taken = names.filter((name) => pool.claimed.has(name));
  const missing = names.filter((name) => !pool.claimed.has(name) && !pool.unclaimed.has(name));
  if (taken.length === 0 && missing.length === 0) return claimSet(names);
  const quoted = (list: readonly string[]) => list.map((name) => `"${name}"`).join(', ');
  const reasons = [
    ...(taken.length > 0 ? [`${quoted(taken)} claimed`] : []),
    ...(missing.length > 0 ? [`${quoted(missing)} not in the pool`] : []),
  ];
  return {
    kind: 'wait',
    reason: `the set ${quoted(names)} in pool "${poolName}" is not all unclaimed: ${reasons.join('; ')} ${counts(pool)}`,
    wanted: [...taken, ...missing],
  };
}

/**
 * One commit per lock, each touching one file so the reference's scripts read it as the claim
 * of that lock; a set's commits say which set they belong to.
 */
function claimSet(names: readonly string[]): Decision {
  const set: [string, string][] = names.length > 1 ? [['Claim-Set', names.join(', ')]] : [];
  return {
    kind: 'commit',
    commits: names.map((name) => ({ ...claimStep(name), trailers: set })),
  };
}

/** A failure when the lock's entries make it no lock at all (a directory, in both folders). */
function brokenLock(name: string, pool: PoolState, poolName: string): Decision | undefined {
  const irregular =
    pool.irregular.get(`claimed/${name}`) ?? pool.irregular.get(`unclaimed/${name}`);
  if (irregular) {
    return {
      kind: 'fail',
      message: `lock "${name}" in pool "${poolName}" is ${irregular}, not a lock file: fix the lock repository`,
    };
  }
  if (pool.claimed.has(name) && pool.unclaimed.has(name)) {
    return {
      kind: 'fail',
      message: `lock "${name}" is both claimed and unclaimed in pool "${poolName}": fix the lock repository`,
    };
  }
  return undefined;
}

/** The locks an acquire can take, sorted. */
export function freeLocks(pool: PoolState): string[] {
  // A name that is also in claimed/ (a broken pool) cannot be moved there: `git mv` would fail
  // or, onto a directory, nest the lock inside it.
  return [...pool.unclaimed]
    .filter((name) => !pool.claimed.has(name) && !pool.irregular.has(`claimed/${name}`))
    .sort();
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
