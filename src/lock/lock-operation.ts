// What each `out` operation does to a pool, as a pure decision over the pool's state: commit a
// change, report what it observed, wait, or fail. No git, no clocks: table-tested on its own.
import type { LockFilter } from '../base/lock-match.js';
import type { Change, PoolState } from './pool-state.js';

export type ResolvedOperation =
  | { kind: 'acquire'; filter?: LockFilter }
  | { kind: 'claim' | 'release' | 'remove' | 'check' | 'check_unclaimed'; name: string }
  | { kind: 'add' | 'add_claimed' | 'update'; name: string; metadata: Buffer };

export type Decision =
  | { kind: 'commit'; name: string; change: Change; subject: string; claiming: boolean }
  | { kind: 'observed'; name: string }
  | { kind: 'wait'; reason: string; wanted: string[] }
  | { kind: 'fail'; message: string };

export function decide(
  operation: ResolvedOperation,
  pool: PoolState,
  poolName: string,
  random: () => number,
): Decision {
  if (operation.kind === 'acquire') {
    const free = freeLocks(pool);
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
    case 'release':
      if (!claimed) return notClaimed(name, poolName, unclaimed, 'release');
      return {
        kind: 'commit',
        name,
        change: { kind: 'move', name, from: 'claimed', to: 'unclaimed' },
        subject: `unclaiming: ${name}`,
        claiming: false,
      };
    case 'remove':
      if (!claimed) return notClaimed(name, poolName, unclaimed, 'remove');
      return {
        kind: 'commit',
        name,
        change: { kind: 'delete', name, state: 'claimed' },
        subject: `removing: ${name}`,
        claiming: false,
      };
    case 'add':
    case 'add_claimed': {
      if (exists) {
        return {
          kind: 'fail',
          message: `lock "${name}" already exists in pool "${poolName}" (${claimed ? 'claimed' : 'unclaimed'})`,
        };
      }
      const state = operation.kind === 'add' ? 'unclaimed' : 'claimed';
      return {
        kind: 'commit',
        name,
        change: { kind: 'write', name, state, content: operation.metadata },
        subject: `adding ${state}: ${name}`,
        claiming: state === 'claimed',
      };
    }
    case 'update':
      if (claimed)
        return {
          kind: 'wait',
          reason: `lock "${name}" in pool "${poolName}" is claimed`,
          wanted: [name],
        };
      return {
        kind: 'commit',
        name,
        change: { kind: 'write', name, state: 'unclaimed', content: operation.metadata },
        subject: unclaimed ? `updating: ${name}` : `adding unclaimed: ${name}`,
        claiming: false,
      };
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
  return {
    kind: 'commit',
    name,
    change: { kind: 'move', name, from: 'unclaimed', to: 'claimed' },
    subject: `claiming: ${name}`,
    claiming: true,
  };
}

function notClaimed(name: string, poolName: string, unclaimed: boolean, verb: string): Decision {
  return {
    kind: 'fail',
    message: unclaimed
      ? `cannot ${verb} lock "${name}": it is not claimed in pool "${poolName}" (it is unclaimed)`
      : `cannot ${verb} lock "${name}": it does not exist in pool "${poolName}"`,
  };
}
