// The line of puts waiting to acquire a lock: refs on the remote beside the branch, one per
// waiting put, named for when it started waiting. Puts take free locks in that order, so a put
// that has waited longest is served first instead of whoever happens to poll first after a
// release. Pure: names, order and timings; LockRepository reads and writes the refs, LockPool
// keeps the order.
//
// Why refs outside the branch: `check` reports every commit that touches the pool, so an entry
// committed to the branch would trigger jobs; and a ref costs the server no objects (it points at
// a commit the branch already has).

/** One waiting put. */
export interface WaitingEntry {
  /** When the put started (ms since the epoch, the put's own clock): its place in line. */
  since: number;
  /** The put's retry_delay: how soon another may decide it is gone (see goneAfterMs). */
  retryDelayMs: number;
  /** Tells puts that started in the same millisecond apart; the put's claim token. */
  token: string;
}

const LINE_ROOT = 'refs/pool-resource/waiting';

/** The folder of refs holding one pool's line on one branch. */
export function linePrefix(branch: string, pool: string): string {
  return `${LINE_ROOT}/${refComponent(branch)}/${refComponent(pool)}/`;
}

export function entryRef(prefix: string, entry: WaitingEntry): string {
  return `${prefix}${entry.since}-${entry.retryDelayMs}-${entry.token}`;
}

/** The entry a ref under `prefix` names; undefined for anything else found there. */
export function parseEntryRef(prefix: string, ref: string): WaitingEntry | undefined {
  if (!ref.startsWith(prefix)) return undefined;
  const match = /^(\d{1,15})-(\d{1,15})-([0-9a-z]{1,64})$/.exec(ref.slice(prefix.length));
  if (!match) return undefined;
  return { since: Number(match[1]), retryDelayMs: Number(match[2]), token: match[3]! };
}

/** Earlier first; the token breaks ties, so every put sees the same order. */
export function compareEntries(a: WaitingEntry, b: WaitingEntry): number {
  return a.since - b.since || (a.token < b.token ? -1 : a.token > b.token ? 1 : 0);
}

/** The entries before `me` (all of them when `me` is not in line), in order. */
export function entriesAhead(line: readonly WaitingEntry[], me: WaitingEntry): WaitingEntry[] {
  return line
    .filter((entry) => entry.token !== me.token && compareEntries(entry, me) < 0)
    .sort(compareEntries);
}

/**
 * How often a put near the front of the line polls. Wherever else it stands a put waits out
 * retry_delay between polls; at the front, a release noticed a whole retry_delay late would leave
 * the lock free all that time, since the puts behind no longer take it. A fifth of retry_delay,
 * never under 100 ms: the puts that free locks or the next hand-overs can reach (FRONT_SPARE)
 * poll this fast, and each such poll is the fetch itself (one connection, as an ls-remote is),
 * so a release costs them no second round trip. Only while the pool is busy: where the tip has
 * not moved for ten retry_delays (lock-pool.ts, QUIET_AFTER_DELAYS), locks are held for long and
 * the front polls at retry_delay again. Measured with `npm run bench` (README).
 */
export function frontPollMs(retryDelayMs: number): number {
  return Math.min(retryDelayMs, Math.max(100, Math.round(retryDelayMs / 5)));
}

/**
 * How many puts beyond those the free locks serve poll at frontPollMs: the next to be served, and
 * the one after it, who is next once the first takes its lock (a put further back learns that
 * only at its next retry_delay poll, often after the following release).
 */
export const FRONT_SPARE = 2;

/**
 * How long a put entitled to a free lock may leave it untaken before the puts behind it take it
 * out of the line: it polls at least every retry_delay, so twice that and a margin for a slow
 * fetch or a transient retry means it is gone (SIGKILL, a lost worker) rather than slow. A put
 * taken out by mistake finds its entry gone at its next poll and puts it back, in its place.
 */
export function goneAfterMs(entry: WaitingEntry): number {
  return 2 * entry.retryDelayMs + 2_000;
}

/**
 * A ref name component for any branch or pool name: letters, digits, `-` and `_` as they are,
 * every other byte as %XX (so no `/`, `.`, `..`, `@{` or space reaches the ref name).
 */
function refComponent(name: string): string {
  let out = '';
  for (const byte of Buffer.from(name, 'utf8')) {
    const char = String.fromCharCode(byte);
    out += /[A-Za-z0-9_-]/.test(char)
      ? char
      : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}
