// What a commit the run fetched itself changed below a folder, read from the folders FetchedObjects
// keeps: the changes `git log --raw --no-renames -- <folder>/` prints for it (git-output.ts's
// RawChange), in git's order, without a git process. `in` asks it of the commit it fetches (the
// claim a put has just made) to tell which lock it is about.
import type { RawChange } from './git-output.js';
import type { FetchedObjects, TreeChild } from './fetched-objects.js';

const ZERO_MODE = '000000';
const ZERO_ID = '0'.repeat(40);

/**
 * The changes of `commit` against its one parent below `folder` (a path without slashes at
 * either end), as git's log prints them; undefined where that cannot be told from what is kept
 * (a commit of no parent or several, a folder on the way not kept whole).
 */
export function changesBelow(
  fetched: FetchedObjects,
  commit: string,
  folder: string,
): RawChange[] | undefined {
  const parents = fetched.parentsOf(commit);
  if (parents?.length !== 1) return undefined;
  const after = folderId(fetched, fetched.rootOf(commit), folder);
  const before = folderId(fetched, fetched.rootOf(parents[0]!), folder);
  if (after === undefined || before === undefined) return undefined;
  const changes: RawChange[] = [];
  return diff(fetched, before || undefined, after || undefined, folder, changes)
    ? changes
    : undefined;
}

/**
 * The id of the folder at `path` below the tree `root`: '' where there is none (no such entry, or
 * a file there), undefined where a folder on the way is not kept.
 */
export function folderId(
  fetched: FetchedObjects,
  root: string | undefined,
  path: string,
): string | undefined {
  const entry = entryAt(fetched, root, path);
  return entry === undefined ? undefined : entry?.type === 'tree' ? entry.id : '';
}

/**
 * The entry at `path` (a path without slashes at either end) below the tree `root`: null where
 * there is none (nor a folder on the way), undefined where a folder on the way is not kept.
 */
export function entryAt(
  fetched: FetchedObjects,
  root: string | undefined,
  path: string,
): TreeChild | null | undefined {
  let entry: TreeChild | undefined;
  for (const name of path.split('/')) {
    if (entry && entry.type !== 'tree') return null;
    const id = entry ? entry.id : root;
    const children = id === undefined ? undefined : fetched.folder(id);
    if (!children) return undefined;
    entry = children.find((child) => child.name === name);
    if (!entry) return null;
  }
  return entry ?? null;
}

/**
 * Adds the changes between the folders `before` and `after` (undefined: none there) at `path` to
 * `changes`, in git's order (its trees' order, a folder's name as if it ended in "/"); false where
 * a folder is not kept.
 */
function diff(
  fetched: FetchedObjects,
  before: string | undefined,
  after: string | undefined,
  path: string,
  changes: RawChange[],
): boolean {
  if (before === after) return true;
  const old = before === undefined ? [] : fetched.folder(before);
  const now = after === undefined ? [] : fetched.folder(after);
  if (!old || !now) return false;
  const entries = [
    ...old.map((entry) => ({ entry, side: 'old' as const })),
    ...now.map((entry) => ({ entry, side: 'new' as const })),
  ].sort((a, b) => compareEntries(a.entry, b.entry) || (a.side === 'old' ? -1 : 1));
  for (let index = 0; index < entries.length; index++) {
    const { entry, side } = entries[index]!;
    const next = entries[index + 1];
    const paired =
      side === 'old' && next?.side === 'new' && compareEntries(entry, next.entry) === 0;
    const [was, is] = paired
      ? [entry, next.entry]
      : side === 'old'
        ? [entry, undefined]
        : [undefined, entry];
    if (paired) index++;
    const at = `${path}/${(was ?? is)!.name}`;
    if (was?.type === 'tree' || is?.type === 'tree') {
      if (!diff(fetched, was?.id, is?.id, at, changes)) return false;
      continue;
    }
    if (was && is && was.id === is.id && was.mode === is.mode) continue;
    changes.push(
      is
        ? {
            status: was ? (typeOf(was.mode) === typeOf(is.mode) ? 'M' : 'T') : 'A',
            mode: is.mode,
            id: is.id,
            path: at,
          }
        : { status: 'D', mode: ZERO_MODE, id: ZERO_ID, path: at },
    );
  }
  return true;
}

/** git's order of a tree's entries: by name's bytes, a folder's name as if it ended in "/". */
function compareEntries(a: TreeChild, b: TreeChild): number {
  const key = ({ name, type }: TreeChild) => Buffer.from(type === 'tree' ? `${name}/` : name);
  return Buffer.compare(key(a), key(b));
}

/** A file's kind from its mode: a regular file (either mode), a symlink or a submodule. */
function typeOf(mode: string): string {
  return mode.startsWith('100') ? 'file' : mode;
}
