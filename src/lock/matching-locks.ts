// An acquire with `match` / `match_name` chooses only among the locks they let through: the pool
// the policy decides on is cut down to those first, so the random pick, the wait and a count of
// locks all work on the matching ones alone, and a filter nothing satisfies fails at once.
import { OperationError } from '../base/errors.js';
import {
  describeFilter,
  metadataMatches,
  nameMatches,
  type LockFilter,
  type LockMetadata,
} from '../base/lock-match.js';
import type { PoolState } from './pool-state.js';

/**
 * The pool with only the locks that pass `filter` (claimed and unclaimed alike); `read` gives the
 * parsed lock files, asked only for `match` and only for the names `match_name` lets through.
 * Fails when no lock of the pool passes: waiting could only end with a change of the pool's
 * locks or metadata, which is a person's job, not a release's.
 */
export async function matchingPool(
  pool: PoolState,
  filter: LockFilter,
  poolName: string,
  read: (names: readonly string[]) => Promise<ReadonlyMap<string, LockMetadata>>,
): Promise<PoolState> {
  const all = [...new Set([...pool.claimed, ...pool.unclaimed])];
  let matching = all.filter((name) => nameMatches(filter, name));
  let unreadable = 0;
  const { match } = filter;
  if (match !== undefined && matching.length > 0) {
    const metadata = await read(matching);
    matching = matching.filter((name) => {
      const file = metadata.get(name) ?? { kind: 'unreadable', why: 'not read' };
      if (file.kind === 'unreadable') unreadable++;
      return metadataMatches(match, file);
    });
  }
  if (matching.length === 0) {
    const looked = `looked at ${all.length} ${all.length === 1 ? 'lock' : 'locks'}`;
    const maps =
      unreadable === 0
        ? ''
        : `; ${unreadable} of them ${unreadable === 1 ? 'is' : 'are'} not a YAML or JSON map`;
    throw new OperationError(
      `no lock in pool "${poolName}" matches ${describeFilter(filter)} (${looked}${maps})`,
    );
  }
  const kept = new Set(matching);
  return {
    claimed: new Set([...pool.claimed].filter((name) => kept.has(name))),
    unclaimed: new Set([...pool.unclaimed].filter((name) => kept.has(name))),
    irregular: pool.irregular,
  };
}

/** What an acquire with a filter waits for, once every matching lock is claimed. */
export function matchingWaitReason(filter: LockFilter, pool: PoolState, poolName: string): string {
  const claimed = pool.claimed.size;
  return `every lock in pool "${poolName}" that matches ${describeFilter(filter)} is claimed (${claimed} matching ${claimed === 1 ? 'lock' : 'locks'})`;
}
