// What a commit did to a pool's locks (SPEC §13), told apart by the paths it changed: a lock that
// left unclaimed/ for claimed/ was claimed, one that went back was released (reclaimed when the
// commit carries the reclaim trailer), a new file was added, a deleted one removed, a file changed
// in place updated. Pure: `check` reads the changes with one `git log` (git-output.ts).
import { globMatcher } from '../base/glob.js';
import { POOL_EVENTS, type PoolEvent } from '../base/pool-event.js';
import type { LockState } from '../lock/pool-state.js';
import { lockAtPath, type ChangeLogRecord } from './git-output.js';

/** One thing a commit did to one lock. */
export interface LockEvent {
  event: PoolEvent;
  name: string;
}

/** Which commits `check` reports: those with an event of a listed kind about a listed lock. */
export interface CheckFilter {
  events: readonly PoolEvent[];
  /** Globs on lock names; undefined for every lock. */
  locks?: readonly string[];
}

/** The events of a commit, from its changes under `pool/` (paths elsewhere, dotfiles: none). */
export function commitEvents(
  pool: string,
  record: Pick<ChangeLogRecord, 'reclaim' | 'changes'>,
): LockEvent[] {
  // Without rename detection a move is a delete in one folder and an add in the other.
  const byLock = new Map<string, Partial<Record<LockState, string>>>();
  for (const { status, path } of record.changes) {
    const lock = lockAtPath(pool, path);
    if (!lock) continue;
    const statuses = byLock.get(lock.name) ?? {};
    statuses[lock.state] = status;
    byLock.set(lock.name, statuses);
  }
  const events: LockEvent[] = [];
  for (const [name, { claimed, unclaimed }] of byLock) {
    if (unclaimed === 'D' && claimed === 'A') events.push({ event: 'claimed', name });
    else if (claimed === 'D' && unclaimed === 'A')
      events.push({ event: record.reclaim ? 'reclaimed' : 'released', name });
    else {
      for (const status of [claimed, unclaimed]) {
        const event = inPlace(status);
        if (event) events.push({ event, name });
      }
    }
  }
  return events;
}

function inPlace(status: string | undefined): PoolEvent | undefined {
  if (status === 'A') return 'added';
  if (status === 'D') return 'removed';
  if (status === 'M' || status === 'T') return 'updated';
  return undefined;
}

/**
 * A test for the commits `filter` lets through: one event of theirs must be of a listed kind and
 * about a listed lock. Undefined when the filter lets every commit of the pool through (the
 * default, and every kind listed with no `check_locks`): then `check` answers as §4 has it, commits
 * touching only the pool's other files included.
 */
export function commitFilter(
  pool: string,
  filter: CheckFilter,
): ((record: Pick<ChangeLogRecord, 'reclaim' | 'changes'>) => boolean) | undefined {
  const events = new Set(filter.events);
  if (filter.locks === undefined && POOL_EVENTS.every((event) => events.has(event)))
    return undefined;
  const names = (filter.locks ?? ['*']).map(globMatcher);
  return (record) =>
    commitEvents(pool, record).some(
      ({ event, name }) => events.has(event) && names.some((matches) => matches(name)),
    );
}
