// `pool status` output: a table for people, or JSON for scripts, from the locks' records.
import { formatMs } from '../../base/errors.js';
import { describeLease, formatInstant, type LockRecord } from '../../repo/lock-holders.js';
import { showable } from '../../base/lock-name.js';
import { compareEntries, type WaitingEntry } from '../../lock/line-entry.js';
import { fit, shortHolder } from './holder.js';

/** The terminal the table is made for: rows no wider, unless --wide asks for whole URLs. */
export const TABLE_WIDTH = 100;
const LOCK_WIDTH = 24;

export interface StatusEntry {
  name: string;
  state: 'claimed' | 'unclaimed';
  /** Who holds it, short: `team/pipeline/job #build` (claimed locks only). */
  holder: string | null;
  /** Who holds it: the build URL or operator (claimed locks only). */
  claimed_by: string | null;
  /** When it was claimed (claimed locks only). */
  claimed_at: string | null;
  /** When it entered its current state (claimed, released or added). */
  since: string | null;
  /** When the claim's lease runs out (claimed locks with a lease only, SPEC §10). */
  lease_expires?: string;
  /** Only for a file `out` does not take as a lock: why (its name breaks the lock-name rules). */
  problem?: string;
}

export function statusEntries(records: readonly LockRecord[]): StatusEntry[] {
  return records.map((record) => {
    const since = record.since ? formatInstant(record.since) : null;
    const claimed = record.state === 'claimed';
    return {
      name: record.name,
      state: record.state,
      holder: claimed && record.by ? shortHolder(record.by) : null,
      claimed_by: claimed ? (record.by ?? null) : null,
      claimed_at: claimed ? since : null,
      since,
      ...(claimed && record.leaseExpires
        ? { lease_expires: formatInstant(record.leaseExpires) }
        : {}),
      ...(record.problem ? { problem: record.problem } : {}),
    };
  });
}

/**
 * Left-aligned columns, two spaces apart; `-` where there is nothing to say, `?` if unknown. Names
 * and holders come from the repository: shown through the display filter, like every stderr line.
 */
export function statusTable(entries: readonly StatusEntry[], now: number, wide = false): string {
  // A NOTE column only when there is something to note: `out` will not take a lock listed.
  const noted = entries.some((entry) => entry.problem);
  // A LEASE column only in a pool that uses leases (SPEC §10).
  const leased = entries.some((entry) => entry.lease_expires);
  const rows = [
    [
      'LOCK',
      'STATE',
      'HOLDER',
      'SINCE',
      'FOR',
      ...(leased ? ['LEASE'] : []),
      ...(noted ? ['NOTE'] : []),
    ],
    ...entries.map((entry) => [
      wide ? showable(entry.name) : fit(showable(entry.name), LOCK_WIDTH),
      entry.state,
      entry.state === 'claimed' ? showable((wide ? entry.claimed_by : entry.holder) ?? '?') : '-',
      entry.since ?? '?',
      entry.since ? formatMs(Math.max(0, now - Date.parse(entry.since))) : '?',
      ...(leased
        ? [
            entry.lease_expires
              ? (describeLease({ leaseExpires: new Date(entry.lease_expires) }, now) ?? '-')
              : '-',
          ]
        : []),
      // out's words for it (lock-operation.ts), so both say the same thing about it.
      ...(noted
        ? [entry.problem ? `${entry.problem}, not a lock file: fix the lock repository` : '']
        : []),
    ]),
  ];
  if (!wide) {
    // The holder column takes what the others leave of the terminal's width.
    const others = [0, 1, 3, 4, ...(leased ? [5] : [])].reduce(
      (sum, column) => sum + Math.max(...rows.map((row) => row[column]!.length)) + 2,
      0,
    );
    const room = Math.max(12, TABLE_WIDTH - others);
    for (const row of rows) row[2] = fit(row[2]!, room);
  }
  return columns(rows);
}

/** How wide the waiting line's WHO column gets unless --wide asks for it whole. */
const WHO_WIDTH = 40;

/**
 * The pool's waiting line, first come first: who waits (`?` for a put that does not say, as
 * older versions do not), for how many locks, since when and for how long, and the ones taken
 * for gone (a put killed while it waited, see goneAtRest), which the next put through the line
 * takes out.
 */
export function lineTable(
  line: readonly WaitingEntry[],
  gone: readonly WaitingEntry[],
  now: number,
  wide = false,
): string {
  const rows = [
    ['WAITING', 'WHO', 'LOCKS', 'SINCE', 'FOR', 'STATE'],
    ...[...line].sort(compareEntries).map((entry, index) => {
      const who = showable(entry.who ?? '?');
      return [
        String(index + 1),
        wide ? who : fit(who, WHO_WIDTH),
        String(entry.count ?? 1),
        formatInstant(new Date(entry.since)),
        formatMs(Math.max(0, now - entry.since)),
        gone.includes(entry) ? 'gone (left a free lock untaken)' : 'waiting',
      ];
    }),
  ];
  return columns(rows);
}

/** Left-aligned columns, two spaces apart, one row a line. */
function columns(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return rows
    .map((row) =>
      row
        .map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')
    .concat('\n');
}
