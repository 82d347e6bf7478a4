// The error for a pool folder that is not on the branch, said the same way by every reader of the
// branch: which pools the branch does have (a misspelled pool is the usual cause) and how to make
// the missing one. Looked up only on this error path, never on the way to a lock.
import { OperationError } from '../base/errors.js';
import { poolNameProblem } from '../base/lock-name.js';

/** Runs a git command on the copy that holds `ref`, returning its stdout. */
export type ListTree = (args: readonly string[]) => Promise<string>;

/** The pools on the branch at `ref`: top-level folders with both `claimed/` and `unclaimed/`. */
export async function poolsAt(list: ListTree, ref: string): Promise<string[]> {
  const top = (await list(['ls-tree', '-d', '-z', '--name-only', ref]))
    .split('\0')
    .filter((name) => name !== '' && poolNameProblem(name) === undefined);
  if (top.length === 0) return [];
  const inside = await list([
    'ls-tree',
    '-d',
    '-z',
    '--name-only',
    ref,
    '--',
    ...top.map((name) => `${name}/`),
  ]);
  const folders = new Set(inside.split('\0'));
  return top.filter((name) => folders.has(`${name}/claimed`) && folders.has(`${name}/unclaimed`));
}

/** The error for `pool` missing from `branch` at `ref`, naming the pools that are there. */
export async function missingPoolError(
  list: ListTree,
  ref: string,
  pool: string,
  branch: string,
): Promise<OperationError> {
  const existing = await poolsAt(list, ref).catch(() => undefined);
  return new OperationError(
    `pool "${pool}" does not exist on branch "${branch}" (expected folders ${pool}/claimed/ and ${pool}/unclaimed/)` +
      (existing ? `; ${describePools(existing)}` : '') +
      `; create it with: pool init --uri URI --branch ${branch} --pool ${pool} --lock NAME`,
  );
}

function describePools(pools: readonly string[]): string {
  if (pools.length === 0) return 'the branch has no pools yet';
  const named = pools.slice(0, MAX_POOLS_NAMED).map((name) => `"${name}"`);
  const more = pools.length - named.length;
  return `pools on the branch: ${named.join(', ')}${more > 0 ? ` and ${more} more` : ''}`;
}

/** A branch with hundreds of pools must not make this a screenful. */
const MAX_POOLS_NAMED = 10;
