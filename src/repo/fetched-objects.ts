// The commits and trees a put fetched itself, on its kept git:// session or its kept HTTP(S) or SSH
// connection (BranchCopy writes them from the pack it read, pack-objects.ts), kept parsed: a put
// waiting in line reads the pool's locks, its tip's commit time and the claims since its last tip
// at every move it fetches, and commits its claim on the last (moved-commits.ts), a git process
// each (ls-tree, show, log, fast-import) that waits its turn for the CPU on a busy worker. What
// these lack (a tip git fetched, a folder no such fetch brought) git reads and writes as before,
// and the folders it lists are kept too. An object's id names its bytes: nothing kept here is ever
// stale.
import type { PackedObject } from '../git/pack-objects.js';
import type { HolderLogRecord, TreeEntry } from './git-output.js';

/** One entry of a tree: what `ls-tree` prints of it, with its name for its path. */
export interface TreeChild {
  mode: string;
  type: string;
  id: string;
  name: string;
}

interface ParsedCommit {
  parents: string[];
  tree: string;
  /** The committer time, in ms (to the second, as `%ct`). */
  committedAt: number;
  /** The `Claim-Token` trailers' values; undefined where git's own reading is needed. */
  claimTokens: string[] | undefined;
  /** What the holder log (git-output.ts) reads of it; undefined where git's reading is needed. */
  record: Omit<HolderLogRecord, 'commit' | 'paths'> | undefined;
}

/**
 * How many of each are kept: the newest, by when they came. A put reads the tip it fetched last
 * and the commits since the one before; a pool of a thousand locks has folders of a thousand
 * entries each.
 */
const KEPT_COMMITS = 256;
const KEPT_TREES = 64;

/** Lock files are small: the newest of them are kept whole, for `in` to write out. */
const KEPT_BLOBS = 64;
const KEPT_BLOB_BYTES = 64 * 1024;

/**
 * A walk of the commits between two tips, or down a window (fetched-log.ts), goes no further: git
 * reads a longer one. Less than the progress looks back (lock-holders.ts's PROGRESS_MAX_DEPTH),
 * which ClaimReader.heldInWindow counts on.
 */
export const WALK_LIMIT = 1024;

export class FetchedObjects {
  private readonly commits = new Map<string, ParsedCommit>();
  private readonly trees = new Map<string, TreeChild[]>();
  /**
   * The root folders of the commits kept, as many as those: a walk of the history (the holds it
   * shows, fetched-log.ts) reads each one's entry for the pool, which the other folders of newer
   * commits would soon push out of `trees`. A root holds a few entries, seldom many.
   */
  private readonly roots = new Map<string, TreeChild[]>();
  private readonly blobs = new Map<string, Buffer>();
  /** Folders above the pool that ls-tree listed: the one entry on the way to it, by their id. */
  private readonly onTheWay = new Map<string, TreeChild>();

  /** Keeps the commits and trees among `objects` (a pack fetched on the session). */
  learn(objects: readonly PackedObject[]): void {
    const roots = new Set<string>();
    for (const object of objects) {
      if (object.type !== 'commit') continue;
      const commit = parseCommit(object.data);
      if (!commit) continue;
      keep(this.commits, object.id, commit, KEPT_COMMITS);
      roots.add(commit.tree);
    }
    for (const object of objects) {
      if (object.type === 'tree') {
        const children = parseTreeObject(object.data);
        if (!children) continue;
        if (roots.has(object.id)) keep(this.roots, object.id, children, KEPT_COMMITS);
        else keep(this.trees, object.id, children, KEPT_TREES);
      } else if (object.type === 'blob' && object.data.length <= KEPT_BLOB_BYTES) {
        keep(this.blobs, object.id, object.data, KEPT_BLOBS);
      }
    }
  }

  /**
   * Keeps the folders `ls-tree -r -t <commit> -- <pool>/` listed (`entries`): the pool's and each
   * below it, whole; of each folder above it, the entry on the way (ls-tree lists no other).
   */
  learnListing(entries: readonly TreeEntry[], pool: string): void {
    const listed = new Map<string, TreeChild[]>();
    const above = new Map<string, string>();
    for (const entry of entries) {
      if (entry.type !== 'tree') continue;
      if (entry.path === pool || entry.path.startsWith(`${pool}/`)) listed.set(entry.path, []);
      else above.set(entry.path, entry.id);
    }
    for (const entry of entries) {
      const slash = entry.path.lastIndexOf('/');
      if (slash < 0) continue;
      const child = { ...entry, name: entry.path.slice(slash + 1) };
      const parent = entry.path.slice(0, slash);
      listed.get(parent)?.push(child);
      const parentId = above.get(parent);
      if (parentId) keep(this.onTheWay, parentId, child, KEPT_TREES);
    }
    for (const entry of entries) {
      const children = listed.get(entry.path);
      if (children && entry.type === 'tree') keep(this.trees, entry.id, children, KEPT_TREES);
    }
  }

  /**
   * What `ls-tree -r -t -z <tip> -- <pool>/` prints, read into entries, where every tree on the
   * way is kept here; undefined otherwise (and where the pool is not a folder at `tip`).
   */
  poolTree(tip: string, pool: string): TreeEntry[] | undefined {
    const commit = this.commits.get(tip);
    if (!commit) return undefined;
    const entries: TreeEntry[] = [];
    let id = commit.tree;
    let path = '';
    for (const name of pool.split('/')) {
      const way = this.onTheWay.get(id);
      const child =
        this.folder(id)?.find((entry) => entry.name === name) ??
        (way?.name === name ? way : undefined);
      if (child?.type !== 'tree') return undefined;
      path = path === '' ? name : `${path}/${name}`;
      entries.push({ mode: child.mode, type: child.type, id: child.id, path });
      id = child.id;
    }
    return this.listBelow(id, path, entries) ? entries : undefined;
  }

  /**
   * Adds every entry below the tree `id` at `path` to `entries`, each folder before what it
   * holds; false where a folder is not kept.
   */
  private listBelow(id: string, path: string, entries: TreeEntry[]): boolean {
    const children = this.folder(id);
    if (!children) return false;
    for (const child of children) {
      const below = `${path}/${child.name}`;
      entries.push({ mode: child.mode, type: child.type, id: child.id, path: below });
      if (child.type === 'tree' && !this.listBelow(child.id, below, entries)) return false;
    }
    return true;
  }

  /** The root folder's id of a kept commit. */
  rootOf(commit: string): string | undefined {
    return this.commits.get(commit)?.tree;
  }

  /** The parents of a kept commit. */
  parentsOf(commit: string): readonly string[] | undefined {
    return this.commits.get(commit)?.parents;
  }

  /**
   * What `git log --format=HOLDER_LOG_FORMAT` prints of a kept commit (no paths), where its
   * message is read as git reads it; undefined otherwise.
   */
  holderRecord(commit: string): HolderLogRecord | undefined {
    const record = this.commits.get(commit)?.record;
    return record && { commit, ...record, paths: [] };
  }

  /** A kept file's bytes. */
  blob(id: string): Buffer | undefined {
    return this.blobs.get(id);
  }

  /** The entries of a kept folder, whole, in its order; undefined where it is not kept whole. */
  folder(tree: string): readonly TreeChild[] | undefined {
    return this.trees.get(tree) ?? this.roots.get(tree);
  }

  /** When `commit` was committed (`%ct`, in ms), where it is kept. */
  commitTime(commit: string): number | undefined {
    return this.commits.get(commit)?.committedAt;
  }

  /**
   * The `Claim-Token` values of the newest `count` commits down from `tip`, as far as the claim
   * walk goes (see claimWalk).
   */
  newestClaimTokens(tip: string, count: number): string[] {
    const tokens: string[] = [];
    for (const [, claims] of this.claimWalk(tip, count)) {
      if (!claims) break;
      tokens.push(...claims);
    }
    return tokens;
  }

  /**
   * The `Claim-Token` values of the commits after `from` up to `to`, where `to` reaches `from`
   * through the claim walk (see claimWalk); undefined otherwise (git's log reads them).
   */
  claimTokens(from: string, to: string): string[] | undefined {
    const tokens: string[] = [];
    // WALK_LIMIT commits after `from`, and `from` itself.
    for (const [id, claims] of this.claimWalk(to, WALK_LIMIT + 1)) {
      if (id === from) return tokens;
      if (!claims) return undefined;
      tokens.push(...claims);
    }
    return undefined;
  }

  /**
   * The commits down from `tip` through one parent each, at most `limit`, newest first, each with
   * its `Claim-Token` values: undefined for a commit not kept, a merge, or a message git might read
   * otherwise, where the walk ends.
   */
  private *claimWalk(tip: string, limit: number): Generator<[string, string[] | undefined]> {
    let id = tip;
    for (let walked = 0; walked < limit; walked++) {
      const commit = this.commits.get(id);
      const claims = commit?.parents.length === 1 ? commit.claimTokens : undefined;
      yield [id, claims];
      if (!claims) return;
      id = commit!.parents[0]!;
    }
  }
}

/** Sets `key`, the newest, and lets the oldest go beyond `limit`. */
function keep<T>(map: Map<string, T>, key: string, value: T, limit: number): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > limit) map.delete(map.keys().next().value!);
}

/**
 * A tree object (git's Documentation/gitformat-index.txt has the entry layout): per entry its
 * mode in octal, a space, its name, a NUL and its id's bytes. Undefined where it is cut short.
 */
function parseTreeObject(data: Buffer): TreeChild[] | undefined {
  const children: TreeChild[] = [];
  let at = 0;
  while (at < data.length) {
    const space = data.indexOf(0x20, at);
    const nul = data.indexOf(0, space + 1);
    if (space < 0 || nul < 0 || nul + 21 > data.length) return undefined;
    const mode = data.toString('latin1', at, space).padStart(6, '0');
    children.push({
      mode,
      type: mode === '040000' ? 'tree' : mode === '160000' ? 'commit' : 'blob',
      id: data.toString('hex', nul + 1, nul + 21),
      name: data.toString('utf8', space + 1, nul),
    });
    at = nul + 21;
  }
  return children;
}

/** A commit object's parents, tree, committer time and Claim-Token trailers. */
function parseCommit(data: Buffer): ParsedCommit | undefined {
  const text = data.toString('utf8');
  const end = text.indexOf('\n\n');
  const headers = (end < 0 ? text : text.slice(0, end)).split('\n');
  const parents: string[] = [];
  let tree: string | undefined;
  let committedAt: number | undefined;
  let author: { who: string; time: number } | undefined;
  let encoded = false;
  for (const header of headers) {
    if (header.startsWith('tree ')) tree = header.slice(5);
    else if (header.startsWith('parent ')) parents.push(header.slice(7));
    else if (header.startsWith('encoding ')) encoded = true;
    else if (header.startsWith('committer ')) {
      const seconds = Number(header.split(' ').at(-2));
      if (Number.isSafeInteger(seconds) && seconds > 0) committedAt = seconds * 1000;
    } else if (header.startsWith('author ')) author = identity(header.slice(7));
  }
  if (!tree || committedAt === undefined) return undefined;
  // git re-encodes a message in another encoding: its log reads those.
  const message = end < 0 ? '' : text.slice(end + 2);
  if (encoded) return { parents, tree, committedAt, claimTokens: undefined, record: undefined };
  const trailers = trailerLines(message);
  const record =
    author && trailers !== undefined
      ? { time: author.time, author: author.who, trailers, body: message }
      : undefined;
  return { parents, tree, committedAt, claimTokens: claimTokens(message), record };
}

/** `Name <email>` and the time, in seconds, of an author header; undefined where unusual. */
function identity(value: string): { who: string; time: number } | undefined {
  const match = /^(.*) <([^<>]*)> (\d+) [+-]\d{4}$/.exec(value);
  if (!match) return undefined;
  const time = Number(match[3]);
  return Number.isSafeInteger(time) ? { who: `${match[1]} <${match[2]}>`, time } : undefined;
}

/** A trailer line: a key of letters, digits and dashes, then its colon (git's trailer.c). */
const TRAILER = /^[A-Za-z0-9-]+[ \t]*:/;
/** Lines git counts as trailers whatever their shape (trailer.c's git_generated_prefixes). */
const GIT_GENERATED = ['Signed-off-by: ', '(cherry picked from commit '];
const CLAIM_TOKEN = /^claim-token[ \t]*:/i;

/**
 * What `%(trailers:only,unfold)` prints for `message` (`Key: value` lines, each ending in a
 * newline): see lastParagraph, whose every line here must be a trailer with a value or continue
 * one. Undefined where git's reading may differ (paragraphsOf's cases, a key followed by blanks,
 * an empty value); '' for a message of a subject alone, and for one whose last paragraph has no
 * line git could take for a trailer (the `Build URL:` line of a release: a key with a blank in it
 * is none), which git reads as no trailer block.
 */
export function trailerLines(message: string): string | undefined {
  const paragraphs = paragraphsOf(message);
  if (paragraphs?.length === 1 && !paragraphs[0]!.includes('\n')) return '';
  const last = lastParagraph(paragraphs);
  if (last === undefined) return undefined;
  const mayBeTrailer = (line: string) =>
    TRAILER.test(line) || GIT_GENERATED.some((prefix) => line.startsWith(prefix));
  if (!last.split('\n').some(mayBeTrailer)) return '';
  const trailers: [key: string, value: string[]][] = [];
  for (const [index, line] of last.split('\n').entries()) {
    if (/^[ \t]/.test(line)) {
      if (index === 0) return undefined;
      trailers.at(-1)![1].push(line.trim());
      continue;
    }
    const match = /^([A-Za-z0-9-]+):(.*)$/.exec(line);
    if (!match) return undefined;
    trailers.push([match[1]!, [match[2]!.trim()]]);
  }
  const lines = trailers.map(([key, parts]) => [key, parts.filter(Boolean).join(' ')] as const);
  if (lines.some(([, value]) => value === '')) return undefined;
  return lines.map(([key, value]) => `${key}: ${value}\n`).join('');
}

/**
 * The paragraphs of `message`; undefined where git's trailer reading may differ from what is read
 * here (a patch or comment line, a carriage return).
 */
function paragraphsOf(message: string): string[] | undefined {
  if (message.includes('\r') || /^(---|#)/m.test(message)) return undefined;
  return message
    .split(/\n[ \t]*\n/)
    .map((paragraph) => paragraph.replace(/^\n+|\s+$/g, ''))
    .filter((paragraph) => paragraph !== '');
}

/** The last of `paragraphs` (paragraphsOf) past the subject, where git reads trailers there. */
function lastParagraph(paragraphs: readonly string[] | undefined): string | undefined {
  return paragraphs && paragraphs.length >= 2 ? paragraphs.at(-1) : undefined;
}

/**
 * The values `%(trailers:key=Claim-Token,valueonly,unfold)` prints for `message`: from its last
 * paragraph past the subject, where every line of it is a trailer or continues one. Undefined
 * where git's reading may differ from that (a paragraph of other lines too, which git may still
 * take for trailers, a patch or comment line, a carriage return): git's log reads those.
 */
export function claimTokens(message: string): string[] | undefined {
  if (!/claim-token/i.test(message)) return [];
  const last = lastParagraph(paragraphsOf(message));
  if (last === undefined) return undefined;
  const tokens: string[] = [];
  /** The Claim-Token being read, its continuation lines too (unfolded with a space). */
  let current: string[] | undefined;
  for (const [index, line] of last.split('\n').entries()) {
    if (/^[ \t]/.test(line)) {
      // A first line that continues nothing is no trailer.
      if (index === 0) return undefined;
      current?.push(line.trim());
      continue;
    }
    if (!TRAILER.test(line)) return undefined;
    if (current) tokens.push(current.join(' '));
    current = CLAIM_TOKEN.test(line) ? [line.slice(line.indexOf(':') + 1).trim()] : undefined;
  }
  if (current) tokens.push(current.join(' '));
  return tokens;
}
