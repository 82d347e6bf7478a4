// What LockHolders' two logs print of a window of history the run fetched itself, read from the
// commits and folders FetchedObjects keeps instead of by a git process each: the commits that
// added each lock's file (who holds it, since when) and the renewals of the claims since. A put
// from a get's folder asks both before it releases or renews (fencing, SPEC §10). Where anything
// on the way is not kept, or git might read a commit otherwise, the answer is undefined and git
// is asked as before.
import { inRenewalLog } from './claim-trailers.js';
import { entryAt } from './commit-diff.js';
import type { FetchedObjects } from './fetched-objects.js';
import type { HolderLogRecord } from './git-output.js';

/** A window reaching further back than this is read by git. */
const WALK_LIMIT = 1024;

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
 * What parseHolderLog reads of `git log` with renewalLogArgs over `head`: the commits of the
 * window whose message renewals and claims are told by, the newest first. Undefined where a
 * commit of the window is not kept or its message is one git might read otherwise.
 */
export function renewalLog(
  fetched: FetchedObjects,
  head: string,
  shallow: ReadonlySet<string>,
): HolderLogRecord[] | undefined {
  const log: HolderLogRecord[] = [];
  for (const step of walk(fetched, head, shallow)) {
    const record = step && fetched.holderRecord(step.commit);
    if (!record) return undefined;
    if (inRenewalLog(record.body)) log.push(record);
  }
  return log;
}

/**
 * Whether `commit` has a file (anything but a folder) at `path`; undefined where a folder on the
 * way is not kept.
 */
function fileAt(fetched: FetchedObjects, commit: string, path: string): boolean | undefined {
  const entry = entryAt(fetched, fetched.rootOf(commit), path);
  return entry === undefined ? undefined : entry !== null && entry.type !== 'tree';
}
