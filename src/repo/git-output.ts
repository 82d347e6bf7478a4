// What git prints about a copy of the branch, read into values, the one stream written to it
// (fast-import) and the id git gives a blob: pure functions, tested on recorded git 2.39 output, so every reader of the branch
// reads it the same way, lock-name rules included.
import { objectId } from '../git/pack-objects.js';
import { lockNameProblem } from '../base/lock-name.js';
import { lockPath, type Change, type LockState } from '../lock/pool-state.js';

/** One `ls-tree` row. */
export interface TreeEntry {
  mode: string;
  type: string;
  id: string;
  path: string;
}

/** `git ls-tree -z` output (with or without -r/-t): one entry per NUL-terminated row. */
export function parseTree(out: string): TreeEntry[] {
  const entries: TreeEntry[] = [];
  for (const row of out.split('\0')) {
    if (!row) continue;
    const tab = row.indexOf('\t');
    const [mode = '', type = '', id = ''] = row.slice(0, tab).split(' ');
    entries.push({ mode, type, id, path: row.slice(tab + 1) });
  }
  return entries;
}

/** A regular file: a symlink or a folder is not a lock file (its "content" is never written). */
export function isRegularFile(entry: Pick<TreeEntry, 'mode' | 'type'>): boolean {
  return entry.type === 'blob' && entry.mode !== '120000';
}

/**
 * The lock a path names: `<pool>/claimed/<name>` or `<pool>/unclaimed/<name>`, dotfiles (the
 * folders' .gitkeep) excepted. The name is not checked against the lock-name rules here.
 */
export function lockAtPath(
  pool: string,
  path: string,
): { state: LockState; name: string } | undefined {
  if (!path.startsWith(`${pool}/`)) return undefined;
  const match = /^(claimed|unclaimed)\/([^/]+)$/.exec(path.slice(pool.length + 1));
  if (!match) return undefined;
  const [, state, name] = match as unknown as [string, LockState, string];
  return name.startsWith('.') ? undefined : { state, name };
}

/** Why a file in a lock folder whose name breaks the lock-name rules is not a lock. */
export const NOT_A_LOCK_NAME = 'not a valid lock name';

/** A pool as the tree at one commit holds it. */
export interface PoolEntries {
  claimed: Set<string>;
  unclaimed: Set<string>;
  /** Files in a lock folder that are not locks: `state/name` and why (shown, never moved). */
  irregular: Map<string, string>;
  /** Both `<pool>/claimed` and `<pool>/unclaimed` are folders: the pool exists. */
  exists: boolean;
  /** Every entry listed, by path (a write keeps the file's mode and skips identical bytes). */
  byPath: Map<string, TreeEntry>;
}

/** `git ls-tree -r -t -z <commit> -- <pool>/` read as the pool's locks. */
export function poolEntries(out: string, pool: string): PoolEntries {
  return poolEntriesOf(parseTree(out), pool);
}

/** The same, from its rows read already (`parseTree`, or FetchedObjects.poolTree). */
export function poolEntriesOf(entries: readonly TreeEntry[], pool: string): PoolEntries {
  const claimed = new Set<string>();
  const unclaimed = new Set<string>();
  const irregular = new Map<string, string>();
  const folders = new Set<string>();
  const byPath = new Map<string, TreeEntry>();
  for (const entry of entries) {
    byPath.set(entry.path, entry);
    if (entry.path === `${pool}/claimed` || entry.path === `${pool}/unclaimed`) {
      if (entry.type === 'tree') folders.add(entry.path);
      continue;
    }
    const lock = lockAtPath(pool, entry.path);
    if (!lock) continue;
    const { state, name } = lock;
    // A name the resource refuses (a tab, a newline) could be acquired but never released.
    if (lockNameProblem(name)) {
      irregular.set(`${state}/${name}`, NOT_A_LOCK_NAME);
      continue;
    }
    if (!isRegularFile(entry)) {
      irregular.set(`${state}/${name}`, entry.type === 'tree' ? 'a directory' : 'a symlink');
      continue;
    }
    (state === 'claimed' ? claimed : unclaimed).add(name);
  }
  const exists = folders.has(`${pool}/claimed`) && folders.has(`${pool}/unclaimed`);
  return { claimed, unclaimed, irregular, exists, byPath };
}

/** One ref as `ls-remote` or FETCH_HEAD names it. */
export interface RemoteRef {
  id: string;
  ref: string;
}

/** `git ls-remote` output: `<id>\t<ref>` rows. */
export function parseLsRemote(out: string): RemoteRef[] {
  const refs: RemoteRef[] = [];
  for (const row of out.split('\n')) {
    const [id, ref] = row.split('\t');
    if (id && ref) refs.push({ id, ref });
  }
  return refs;
}

/**
 * FETCH_HEAD, which lists every ref a fetch matched: `<id>\t[not-for-merge]\tbranch '<name>' of
 * <uri>` for a branch, `<id>\t[not-for-merge]\t'<ref>' of <uri>` for any other ref. The branch
 * fetched is the first branch row; `refs` holds the other rows.
 */
export function parseFetchHead(text: string): { tip: string | undefined; refs: RemoteRef[] } {
  let tip: string | undefined;
  const refs: RemoteRef[] = [];
  for (const row of text.split('\n')) {
    const match = /^([0-9a-f]{40,64})\t[^\t]*\t(branch )?'([^']*)' of /.exec(row);
    if (!match) continue;
    const [, id = '', branch, ref = ''] = match;
    if (branch) tip ??= id;
    else refs.push({ id, ref });
  }
  return { tip, refs };
}

/** The `shallow` file: the commits whose parents were cut off (none once the history is whole). */
export function parseShallow(text: string): Set<string> {
  return new Set(text.split('\n').filter(Boolean));
}

/** One path a commit changed, as `git log --raw` tells it. */
export interface RawChange {
  /** `A` added, `D` deleted, `M` modified, `T` its type changed. */
  status: string;
  /** The path's mode and object after the commit (zeros when deleted). */
  mode: string;
  id: string;
  path: string;
}

/**
 * `git log -z --raw --no-renames --no-abbrev --format=%x01%H`: each commit with the paths it
 * changed, and what each holds after it.
 */
export function parseRawLog(out: string): { commit: string; changes: RawChange[] }[] {
  return out
    .split('\x01')
    .slice(1)
    .map((record) => {
      const [header = '', ...parts] = record.split('\0');
      const changes: RawChange[] = [];
      // `:oldmode newmode oldid newid status`, then the path: a NUL after each.
      for (let index = 0; index + 1 < parts.length; index += 2) {
        const [, mode = '', , id = '', status = ''] = parts[index]!.trim().slice(1).split(' ');
        changes.push({ status, mode, id, path: parts[index + 1]! });
      }
      return { commit: header.trim(), changes };
    });
}

/** The kind of object a tree entry of `mode` names, as ls-tree says it. */
export function objectType(mode: string): string {
  return mode === '040000' ? 'tree' : mode === '160000' ? 'commit' : 'blob';
}

const RECORD = '\x1e';
const FIELD = '\x1f';

/**
 * The `--format` that `parseChangeLog` reads (with `-z --no-renames --name-status`): the commit
 * and its `Reclaimed-Token` trailer, which tells a reclaim from a release (SPEC §10).
 */
export const CHANGE_LOG_FORMAT = `${RECORD}%H%x00%(trailers:key=Reclaimed-Token,valueonly)`;

/** One path a commit changed: `A` added, `D` deleted, `M` modified, `T` its type changed. */
export interface PathChange {
  status: string;
  path: string;
}

/** What a commit in the change log did. */
export interface ChangeLogRecord {
  commit: string;
  /** The commit carries a `Reclaimed-Token:` trailer. */
  reclaim: boolean;
  changes: PathChange[];
}

/**
 * `git log -z --no-renames --name-status --format=CHANGE_LOG_FORMAT`: `<RS><id>\0<trailer>\0`,
 * then (after a newline) `<status>\0<path>\0` per changed path. Read token by token, not split
 * on separators: a path may hold any byte but NUL, while one under the pool never starts with
 * RS nor is a lone capital letter.
 */
export function parseChangeLog(out: string): ChangeLogRecord[] {
  const records: ChangeLogRecord[] = [];
  const tokens = out.split('\0');
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!.replace(/^\n/, '');
    if (token.startsWith(RECORD)) {
      const trailer = tokens[++i] ?? '';
      records.push({ commit: token.slice(1).trim(), reclaim: trailer.trim() !== '', changes: [] });
      continue;
    }
    const path = tokens[i + 1];
    const record = records.at(-1);
    if (record && /^[A-Z]$/.test(token) && path !== undefined) {
      record.changes.push({ status: token, path });
      i++;
    }
  }
  return records;
}

/** The `--format` that `parseHolderLog` reads (with `-z --name-only`). */
export const HOLDER_LOG_FORMAT = [
  `${RECORD}%H`,
  '%at',
  '%an <%ae>',
  '%(trailers:only,unfold)',
  '%B',
  '',
].join(FIELD);

/** What a commit in the holder log says about itself. */
export interface HolderLogRecord {
  commit: string;
  /** Author time, in seconds. */
  time: number;
  author: string;
  trailers: string;
  body: string;
  paths: string[];
}

/** `git log -z --name-only --format=HOLDER_LOG_FORMAT`. */
export function parseHolderLog(out: string): HolderLogRecord[] {
  return out
    .split(RECORD)
    .slice(1)
    .map((entry) => {
      const [commit = '', time = '', author = '', trailers = '', body = '', names = ''] =
        entry.split(FIELD);
      const paths = names
        .split('\0')
        .map((raw) => raw.trim())
        .filter(Boolean);
      return { commit, time: Number(time), author, trailers, body, paths };
    });
}

/** One change to the pool, as a fast-import file command. */
export type FastImportChange =
  | { kind: 'rename'; from: string; to: string }
  | { kind: 'modify'; mode: string; path: string; content: Buffer }
  | { kind: 'delete'; path: string };

/**
 * A lock change in `pool` as the file change that makes it; a lock file written where one is
 * keeps that file's mode (`modeOf`, undefined for a new file).
 */
export function lockFileChange(
  pool: string,
  change: Change,
  modeOf: (path: string) => string | undefined,
): FastImportChange | undefined {
  switch (change.kind) {
    case 'move':
      return {
        kind: 'rename',
        from: lockPath(pool, change.from, change.name),
        to: lockPath(pool, change.to, change.name),
      };
    case 'write': {
      const path = lockPath(pool, change.state, change.name);
      return { kind: 'modify', mode: modeOf(path) ?? '100644', path, content: change.content };
    }
    case 'delete':
      return { kind: 'delete', path: lockPath(pool, change.state, change.name) };
    case 'none':
      return undefined;
  }
}

/**
 * A fast-import stream that writes one commit on top of `from` to `ref` and prints its id
 * (`get-mark`). Dates are `now` (run fast-import with --date-format=now).
 */
export function fastImportCommit(commit: {
  ref: string;
  author: string;
  committer: string;
  message: string;
  from: string;
  /** None: a commit with the tree of `from`. */
  change: FastImportChange | undefined;
}): Buffer {
  const { message, change, ...rest } = commit;
  return fastImportCommits({ ...rest, commits: [{ message, change }] });
}

/**
 * Commits in a row, each on the one before (the first on `from`), in one fast-import stream that
 * prints their ids in order (see parseMarks).
 */
export function fastImportCommits(batch: {
  ref: string;
  author: string;
  committer: string;
  from: string;
  commits: readonly { message: string; change: FastImportChange | undefined }[];
}): Buffer {
  const parts: Buffer[] = [];
  batch.commits.forEach(({ message, change }, index) => {
    const body = Buffer.from(message.endsWith('\n') ? message : `${message}\n`);
    const from = index === 0 ? batch.from : `:${index}`;
    parts.push(
      Buffer.from(
        `commit ${batch.ref}\nmark :${index + 1}\n` +
          `author ${batch.author} now\ncommitter ${batch.committer} now\n` +
          `data ${body.length}\n`,
      ),
      body,
      Buffer.from(`\nfrom ${from}\n`),
    );
    switch (change?.kind) {
      case undefined:
        break;
      case 'rename':
        parts.push(Buffer.from(`R ${quotePath(change.from)} ${quotePath(change.to)}\n`));
        break;
      case 'modify':
        parts.push(
          Buffer.from(
            `M ${change.mode} inline ${quotePath(change.path)}\ndata ${change.content.length}\n`,
          ),
          change.content,
          Buffer.from('\n'),
        );
        break;
      case 'delete':
        parts.push(Buffer.from(`D ${quotePath(change.path)}\n`));
        break;
    }
    parts.push(Buffer.from('\n'));
  });
  const marks = batch.commits.map((_, index) => `get-mark :${index + 1}\n`).join('');
  parts.push(Buffer.from(`${marks}done\n`));
  return Buffer.concat(parts);
}

/** The commit id fast-import printed for `get-mark` (its last line), or undefined. */
export function parseMark(out: string): string | undefined {
  return parseMarks(out, 1)?.[0];
}

/** The `count` commit ids fast-import printed last, in order; undefined when it printed fewer. */
export function parseMarks(out: string, count: number): string[] | undefined {
  const ids = out.trim().split('\n').slice(-count);
  return ids.length === count && ids.every((id) => /^[0-9a-f]{40,64}$/.test(id)) ? ids : undefined;
}

/** A path as fast-import reads it: C-style quoted when it holds anything unusual. */
export function quotePath(path: string): string {
  if (/^[\x21-\x7e]*$/.test(path) && !path.startsWith('"')) return path;
  let quoted = '"';
  for (const byte of Buffer.from(path, 'utf8')) {
    if (byte === 0x22 || byte === 0x5c) quoted += `\\${String.fromCharCode(byte)}`;
    else if (byte === 0x0a) quoted += '\\n';
    else if (byte < 0x20 || byte >= 0x7f) quoted += `\\${byte.toString(8).padStart(3, '0')}`;
    else quoted += String.fromCharCode(byte);
  }
  return `${quoted}"`;
}

/** The object id git gives a blob with these bytes (SHA-1 or SHA-256, by the repository's ids). */
export function blobId(content: Buffer, idLength: number): string {
  return objectId('blob', content, idLength === 64 ? 'sha256' : 'sha1');
}
