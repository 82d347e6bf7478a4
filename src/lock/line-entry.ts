// The line of puts waiting to acquire a lock: refs on the remote beside the branch, one per
// waiting put, named for when it started waiting. Puts take free locks in that order, so a put
// that has waited longest is served first instead of whoever happens to poll first after a
// release. Pure: the entries' ref names and their order; LockRepository reads and writes the refs,
// LockPool keeps the order, waiting-line.ts says how often a put in line polls.
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
  /** How many locks the put waits for, when more than one (`count`). */
  count?: number;
  /** Who waits, for people to read (`team/pipeline/job #build`, an operator): see WHO_MAX. */
  who?: string;
  /**
   * The commit the entry's ref points at: the branch tip its put last saw when it joined or
   * showed it was alive (see Stall), as read from the remote.
   */
  at?: string;
}

const LINE_ROOT = 'refs/pool-resource/waiting';

/** The folder of refs holding one pool's line on one branch. */
export function linePrefix(branch: string, pool: string): string {
  return `${LINE_ROOT}/${refComponent(branch)}/${refComponent(pool)}/`;
}

export function entryRef(prefix: string, entry: WaitingEntry): string {
  const count = (entry.count ?? 1) > 1 ? `-${entry.count}` : '';
  const encoded = entry.who ? encodeWho(entry.who) : '';
  const who = encoded ? `.${encoded}` : '';
  return `${prefix}${entry.since}-${entry.retryDelayMs}-${entry.token}${count}${who}`;
}

/** The entry a ref under `prefix` names; undefined for anything else found there. */
export function parseEntryRef(prefix: string, ref: string): WaitingEntry | undefined {
  if (!ref.startsWith(prefix)) return undefined;
  const match =
    /^(\d{1,15})-(\d{1,15})-([0-9a-z]{1,64})(?:-([1-9]\d{0,3}))?(?:\.([0-9A-Za-z_%-]{1,200}))?$/.exec(
      ref.slice(prefix.length),
    );
  if (!match) return undefined;
  const entry: WaitingEntry = {
    since: Number(match[1]),
    retryDelayMs: Number(match[2]),
    token: match[3]!,
  };
  if (match[4] !== undefined && Number(match[4]) > 1) entry.count = Number(match[4]);
  if (match[5] !== undefined) {
    // Only as entryRef writes it: the put that takes a gone entry out names its ref again.
    const who = decodeWho(match[5]);
    if (who === undefined || encodeWho(who) !== match[5]) return undefined;
    entry.who = who;
  }
  return entry;
}

/**
 * The most bytes `who` takes in a ref name, encoded: a ref's last part is a file name on the
 * server (255 bytes at most), beside the time, retry_delay, token and count (about 70).
 */
export const WHO_MAX = 150;

/**
 * `who` as a part of a ref name: every byte but letters, digits, `_` and `-` as `%XX`, so none of
 * git's forbidden characters (space, `:`, `~`, `..`, a trailing `.lock`) nor `/` can appear; cut,
 * ending in `…`, to fit WHO_MAX.
 */
export function encodeWho(who: string): string {
  const chars = [...who];
  // A character takes a byte at least: more than WHO_MAX of them never fit.
  for (let keep = Math.min(chars.length, WHO_MAX); keep > 0; keep--) {
    const encoded = refComponent(keep === chars.length ? who : `${chars.slice(0, keep).join('')}…`);
    if (encoded.length <= WHO_MAX) return encoded;
  }
  return '';
}

function decodeWho(encoded: string): string | undefined {
  try {
    return decodeURIComponent(encoded);
  } catch {
    return undefined;
  }
}

/** How many locks these entries wait for, together. */
export function lockDemand(entries: readonly WaitingEntry[]): number {
  return entries.reduce((sum, entry) => sum + (entry.count ?? 1), 0);
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
