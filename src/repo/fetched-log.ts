// What LockHolders' two logs print of a window of history the run fetched itself, read from the
// commits and folders FetchedObjects keeps instead of by a git process each: the commits that
// added each lock's file (who holds it, since when) and the renewals of the claims since. A put
// from a get's folder asks both before it releases or renews (fencing, SPEC §10). Where anything
// on the way is not kept, or git might read a commit otherwise, the answer is undefined and git
// is asked as before.
import { inRenewalLog } from './claim-trailers.js';
import { entryAt, folderId } from './commit-diff.js';
import { WALK_LIMIT, type FetchedObjects } from './fetched-objects.js';
import type { HolderLogRecord } from './git-output.js';

/**
 * The commits `git log <head>` walks in a copy whose shallow commits are `shallow`, newest
 * first, each with its parent: from `head` through one parent each, to a shallow commit (git
 * takes it for a root) or a root, which come with none. Ends with undefined where a commit is not
 * kept or has several parents.
 */
function* walk(
  fetched: FetchedObjects,
  head: string,
  shallow: ReadonlySet<string>,
): Generator<{ commit: string; parent: string | undefined } | undefined> {
  for (let id: string | undefined = head, walked = 0; id !== undefined; walked++) {
    const parents = fetched.parentsOf(id);
    if (!parents || parents.length > 1 || walked >= WALK_LIMIT) {
      yield undefined;
      return;
    }
    const parent: string | undefined = shallow.has(id) ? undefined : parents[0];
    yield { commit: id, parent };
    id = parent;
  }
}

/**
 * Whether every commit `git log <tip>` walks in the copy is kept, down to its shallow commits or
 * its root (at most WALK_LIMIT of them).
 */
export function windowKept(
  fetched: FetchedObjects,
  tip: string,
  shallow: ReadonlySet<string>,
): boolean {
  for (const step of walk(fetched, tip, shallow)) if (!step) return false;
  return true;
}

/**
 * What parseHolderLog reads of `git log -z --no-renames --diff-filter=A --name-only
 * --format=HOLDER_LOG_FORMAT <head> -- <paths>`, as far as its reader needs it: each path at the
 * newest commit that added it (a file there, none in its parent), the newest first. A path first
 * seen at a shallow commit is left out: git lists every file of one as added, which proves
 * nothing (LockHolders skips those). Undefined where a commit's message or folder on the way is
 * not kept.
 */
export function addingLog(
  fetched: FetchedObjects,
  head: string,
  paths: readonly string[],
  shallow: ReadonlySet<string>,
): HolderLogRecord[] | undefined {
  const pending = new Set(paths);
  const log: HolderLogRecord[] = [];
  for (const step of walk(fetched, head, shallow)) {
    if (pending.size === 0) break;
    if (!step) return undefined;
    const { commit, parent } = step;
    if (shallow.has(commit)) break;
    const added: string[] = [];
    for (const path of pending) {
      const now = fileAt(fetched, commit, path);
      const before = parent === undefined ? null : fileAt(fetched, parent, path);
      if (now === undefined || before === undefined) return undefined;
      if (now && !before) added.push(path);
    }
    if (added.length === 0) continue;
    const record = fetched.holderRecord(commit);
    if (!record) return undefined;
    log.push({ ...record, paths: added });
    for (const path of added) pending.delete(path);
  }
  return log;
}

/**
 * What parseHolderLog reads of `git log` with renewalLogArgs over `head` (or over `head --not
 * last^@`: down to `last`): the commits of the window whose message renewals and claims are told
 * by, the newest first. Undefined where a commit of the window is not kept, its message is one
 * git might read otherwise, or the walk ends before `last`.
 */
export function renewalLog(
  fetched: FetchedObjects,
  head: string,
  shallow: ReadonlySet<string>,
  last?: string,
): HolderLogRecord[] | undefined {
  const log: HolderLogRecord[] = [];
  for (const step of walk(fetched, head, shallow)) {
    const record = step && fetched.holderRecord(step.commit);
    if (!record) return undefined;
    if (inRenewalLog(record.body)) log.push(record);
    if (record.commit === last) return log;
  }
  return last === undefined ? log : undefined;
}

/**
 * What `git log` with holdHistoryArgs (hold-history.ts) prints: `%ct %s` of the newest `max`
 * commits up to `tip` whose folder `pool` differs from their parent's, oldest first, each ending
 * in a NUL. Undefined where a commit of the walk is not kept, its message is one git might read
 * otherwise, or its subject runs over several lines (git joins them).
 */
export function holdLog(
  fetched: FetchedObjects,
  tip: string,
  pool: string,
  shallow: ReadonlySet<string>,
  max: number,
): string | undefined {
  const records: string[] = [];
  for (const step of walk(fetched, tip, shallow)) {
    if (records.length >= max) break;
    if (!step) return undefined;
    const { commit, parent } = step;
    const now = folderId(fetched, fetched.rootOf(commit), pool);
    const before = parent === undefined ? '' : folderId(fetched, fetched.rootOf(parent), pool);
    if (now === undefined || before === undefined) return undefined;
    if (now === before) continue;
    const subject = subjectOf(fetched.holderRecord(commit)?.body);
    const time = fetched.commitTime(commit);
    if (subject === undefined || time === undefined) return undefined;
    records.push(`${time / 1000} ${subject}\0`);
  }
  return records.reverse().join('');
}

/**
 * What `%s` prints of `message`: its first line, where the line after it is blank or there is
 * none; undefined otherwise (git joins a subject's lines, skips blank lines before it, trims it).
 */
function subjectOf(message: string | undefined): string | undefined {
  const [subject, next] = message?.split('\n', 2) ?? [];
  if (subject === undefined || subject === '' || subject.trim() !== subject) return undefined;
  return next === undefined || next.trim() === '' ? subject : undefined;
}

/**
 * Whether `commit` has a file (anything but a folder) at `path`; undefined where a folder on the
 * way is not kept.
 */
function fileAt(fetched: FetchedObjects, commit: string, path: string): boolean | undefined {
  const entry = entryAt(fetched, fetched.rootOf(commit), path);
  return entry === undefined ? undefined : entry !== null && entry.type !== 'tree';
}
