// How long the pool's locks are held, read from the newest commits a copy of the branch holds:
// their subjects (SPEC §6: `claiming: NAME`, `unclaiming: NAME`, …) and committer times. A put at
// the front of the waiting line polls fast only once a release is plausible (lock/line-member.ts);
// one further back polls at the pace the claims tell (lock/line-pace.ts).
import type { HoldHistory } from '../lock/pool-state.js';

/** The newest commits read: several holds of each lock of a busy pool, in one short log. */
export const HOLD_HISTORY_COMMITS = 64;

/**
 * `git log` of the newest commits up to `tip` that touch `pool`, oldest first: `<committer time>
 * <subject>`. Subjects name the lock, not its pool: another pool on the branch may have a lock of
 * the same name, and locks held for other lengths.
 */
export function holdHistoryArgs(tip: string, pool: string): string[] {
  return [
    'log',
    '-z',
    '--first-parent',
    `--max-count=${HOLD_HISTORY_COMMITS}`,
    '--reverse',
    '--format=%ct %s',
    tip,
    '--',
    `${pool}/`,
  ];
}

/**
 * The holds that tell how long locks are held these days: the newest few, and none that ended more
 * than a day before the newest commit read (a pool's jobs change; a history made by hand or a
 * pool left idle for months says little of the holds to come).
 */
const RECENT_HOLDS = 8;
const RECENT_MS = 24 * 60 * 60 * 1_000;

/** Subjects that take a lock (`adding claimed` adds one held) or give it back (or remove it). */
const SUBJECT = /^(claiming|adding claimed|unclaiming|removing): (.+)$/;

/**
 * The holds in `holdHistoryArgs` output: each lock still claimed at the end with the time of its
 * claim, the length of the recent holds that began and ended within the commits read, and when
 * each lock was claimed (the waiting line's pace, lock/line-pace.ts).
 */
export function parseHoldHistory(out: string): HoldHistory {
  const claimedAt = new Map<string, number>();
  const ended: { at: number; lasted: number }[] = [];
  const claims: number[] = [];
  let newest = -Infinity;
  for (const record of out.split('\0')) {
    const match = /^(\d+) (.*)$/.exec(record.replace(/^\n+|\n+$/g, ''));
    if (!match) continue;
    const at = Number(match[1]) * 1_000;
    newest = Math.max(newest, at);
    const subject = SUBJECT.exec(match[2]!);
    if (!subject) continue;
    const [, verb, name = ''] = subject;
    if (verb === 'claiming' || verb === 'adding claimed') {
      if (verb === 'claiming') claims.push(at);
      claimedAt.set(name, at);
      continue;
    }
    const since = claimedAt.get(name);
    if (since !== undefined) ended.push({ at, lasted: at - since });
    claimedAt.delete(name);
  }
  const holds = ended
    .filter((hold) => hold.at >= newest - RECENT_MS)
    .slice(-RECENT_HOLDS)
    .map((hold) => hold.lasted);
  return { claimedAt, holds, claims };
}
