// A claim's commits written by the run, on a tip whose folders FetchedObjects keeps read (one the
// run fetched itself): the trees and commit objects fast-import would write for the same moves,
// byte for byte, without its process between a release seen and the claim pushed
// (LockRepository.commit; git still pushes them). Anything else goes through fast-import.
import { objectId, type PackedObject } from '../git/pack-objects.js';
import { lockPath, type Change } from '../lock/pool-state.js';
import type { FetchedObjects, TreeChild } from './fetched-objects.js';

/**
 * The moves of `changes` (a lock file each, between the pool's folders; a change that moves
 * nothing, none) with the message of the same place; undefined where a change writes or removes
 * a file, which fast-import does.
 */
export function movesOf(
  pool: string,
  changes: readonly Change[],
  messages: readonly string[],
): MovesCommit[] | undefined {
  const commits: MovesCommit[] = [];
  for (const [index, change] of changes.entries()) {
    if (change.kind !== 'move' && change.kind !== 'none') return undefined;
    const moves: [string, string][] =
      change.kind === 'move'
        ? [[lockPath(pool, change.from, change.name), lockPath(pool, change.to, change.name)]]
        : [];
    commits.push({ moves, message: messages[index]! });
  }
  return commits;
}

/** A date as a commit object writes it: seconds since the epoch and the local zone's offset. */
export function gitDate(date: Date): string {
  const offset = -date.getTimezoneOffset();
  const minutes = Math.abs(offset);
  const two = (value: number) => String(value).padStart(2, '0');
  const zone = `${offset < 0 ? '-' : '+'}${two(Math.floor(minutes / 60))}${two(minutes % 60)}`;
  return `${Math.floor(date.getTime() / 1000)} ${zone}`;
}

/**
 * A folder being changed for a commit (commitsOfMoves): its entries, and the folders below it
 * opened on the way to a change.
 */
interface OpenFolder {
  children: Map<string, TreeChild>;
  opened: Map<string, OpenFolder>;
}

/** One commit of a batch: the files it moves (from a path to another), and its message. */
export interface MovesCommit {
  moves: readonly (readonly [from: string, to: string])[];
  message: string;
}

/** Who and when, as a commit object names them (`Name <email>`, and `seconds ±hhmm`). */
export interface CommitIdentity {
  author: string;
  committer: string;
  when: string;
}

/**
 * The objects of `commits` in a row on top of `parent`, each moving files as fast-import's `R`
 * does (a file's mode and content kept, whatever was at its new path replaced), the last one's
 * id last; undefined where a folder on the way is not kept whole, a file to move is missing, or
 * a move would need a folder that is not there (fast-import says why then).
 */
export function commitsOfMoves(
  fetched: FetchedObjects,
  parent: string,
  commits: readonly MovesCommit[],
  identity: CommitIdentity,
): PackedObject[] | undefined {
  let root = fetched.rootOf(parent);
  if (root === undefined) return undefined;
  let parentId = parent;
  const objects: PackedObject[] = [];
  for (const { moves, message } of commits) {
    const written = objects.length;
    const top = open(fetched, root);
    if (!top) return undefined;
    for (const [from, to] of moves) {
      const moved = takeAt(fetched, top, from.split('/'));
      if (!moved || !putAt(fetched, top, to.split('/'), moved)) return undefined;
    }
    root = writeFolder(top, objects);
    const body = message.endsWith('\n') ? message : `${message}\n`;
    const text =
      `tree ${root}\nparent ${parentId}\n` +
      `author ${identity.author} ${identity.when}\n` +
      `committer ${identity.committer} ${identity.when}\n\n${body}`;
    const commit = packed('commit', Buffer.from(text, 'utf8'));
    objects.push(commit);
    parentId = commit.id;
    // The next commit of the batch opens the folders this one wrote.
    fetched.learn(objects.slice(written));
  }
  return objects;
}

/** The folder at `path` below `top`, opened (read from what is kept); undefined where it is not. */
function folderAt(
  fetched: FetchedObjects,
  top: OpenFolder,
  path: readonly string[],
): OpenFolder | undefined {
  let folder = top;
  for (const name of path) {
    let below = folder.opened.get(name);
    if (!below) {
      const child = folder.children.get(name);
      if (child?.type !== 'tree') return undefined;
      below = open(fetched, child.id);
      if (!below) return undefined;
      folder.opened.set(name, below);
    }
    folder = below;
  }
  return folder;
}

/**
 * Takes the file at `path` out of its folder; undefined where there is none, or where that
 * leaves the folder empty (fast-import drops such a folder, and the folders it empties in turn).
 */
function takeAt(fetched: FetchedObjects, top: OpenFolder, path: readonly string[]) {
  const folder = folderAt(fetched, top, path.slice(0, -1));
  const name = path.at(-1)!;
  const child = folder?.children.get(name);
  if (!folder || !child || child.type === 'tree' || folder.children.size === 1) return undefined;
  folder.children.delete(name);
  return child;
}

/** Puts `child` at `path`, in place of what was there; false where its folder is not there. */
function putAt(
  fetched: FetchedObjects,
  top: OpenFolder,
  path: readonly string[],
  child: TreeChild,
): boolean {
  const folder = folderAt(fetched, top, path.slice(0, -1));
  const name = path.at(-1)!;
  if (!folder || folder.children.get(name)?.type === 'tree') return false;
  folder.children.set(name, { ...child, name });
  return true;
}

/** Writes `folder` and the folders opened below it as tree objects (into `objects`); its id. */
function writeFolder(folder: OpenFolder, objects: PackedObject[]): string {
  for (const [name, below] of folder.opened) {
    const child = folder.children.get(name)!;
    folder.children.set(name, { ...child, id: writeFolder(below, objects) });
  }
  const sorted = [...folder.children.values()].sort(treeOrder);
  const data = Buffer.concat(
    sorted.flatMap(({ mode, name, id }) => [
      Buffer.from(`${mode.replace(/^0+/, '')} ${name}\0`, 'utf8'),
      Buffer.from(id, 'hex'),
    ]),
  );
  const tree = packed('tree', data);
  objects.push(tree);
  return tree.id;
}

/** git's order of a tree's entries: by name's bytes, a folder's name as if it ended in "/". */
function treeOrder(a: TreeChild, b: TreeChild): number {
  const key = ({ name, type }: TreeChild) => Buffer.from(type === 'tree' ? `${name}/` : name);
  return Buffer.compare(key(a), key(b));
}

function packed(type: 'tree' | 'commit', data: Buffer): PackedObject {
  return { id: objectId(type, data), type, data };
}

/** A kept folder, whole, to change; undefined where it is not kept whole. */
function open(fetched: FetchedObjects, tree: string): OpenFolder | undefined {
  const children = fetched.folder(tree);
  // A name whose bytes are not UTF-8 was read with U+FFFD in their place: not written back.
  if (!children || children.some(({ name }) => name.includes('\uFFFD'))) return undefined;
  return { children: new Map(children.map((child) => [child.name, child])), opened: new Map() };
}
