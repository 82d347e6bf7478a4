// The bare copy of a branch that `check` keeps in TMPDIR between runs: Concourse reuses the
// check container, so each check fetches only what is new. One check at a time uses a copy
// (a lock folder: mkdir is atomic); a check that finds it busy works in a private copy instead
// of waiting, and a copy that a failed run may have left half-written is thrown away.
import { chmod, lstat, mkdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nodeCrypto } from '../base/lazy-builtins.js';

/** A lock older than this was left by a run that was killed (check runs are short). */
const STALE_LOCK_MS = 15 * 60_000;

export interface CachedCopy {
  /** The bare repository's folder (may not exist yet). */
  dir: string;
  /** Drops the copy (after a failure, so the next check starts clean). */
  discard(): Promise<void>;
  /** Lets the next check use the copy. */
  release(): Promise<void>;
}

/** Takes the cached copy for `uri` + `branch`, or `undefined` when another check holds it. */
export async function takeCachedCopy(
  tmp: string | undefined,
  uri: string,
  branch: string,
  now: () => number,
): Promise<CachedCopy | undefined> {
  const root = join(tmp || tmpdir(), 'pool-resource-check');
  // Hashed: the URI may carry credentials, and must never become a path.
  const key = nodeCrypto()
    .createHash('sha256')
    .update(`${uri}\n${branch}`)
    .digest('hex')
    .slice(0, 32);
  const dir = join(root, key);
  const lock = `${dir}.lock`;
  if (!(await privateFolder(root))) return undefined;
  if (!(await tryLock(lock))) {
    const since = await stat(lock).then(
      (info) => now() - info.mtimeMs,
      () => 0,
    );
    if (since < STALE_LOCK_MS) return undefined;
    await rm(lock, { recursive: true, force: true });
    if (!(await tryLock(lock))) return undefined;
  }
  let released = false;
  const release = async () => {
    if (released) return;
    released = true;
    await rm(lock, { recursive: true, force: true });
  };
  return {
    dir,
    discard: () => rm(dir, { recursive: true, force: true }),
    release,
  };
}

/**
 * Creates `root` readable by us alone (0700), or makes it so. TMPDIR may be shared (/tmp): a
 * folder that is a symlink or someone else's could hand them our copy, or their copy to us, so
 * it is not used (the check then works in its private folder).
 */
async function privateFolder(root: string): Promise<boolean> {
  await mkdir(root, { recursive: true, mode: 0o700 });
  const info = await lstat(root);
  if (!info.isDirectory() || info.uid !== process.getuid?.()) return false;
  // A folder an earlier version created 0755.
  if ((info.mode & 0o777) !== 0o700) await chmod(root, 0o700);
  return true;
}

async function tryLock(lock: string): Promise<boolean> {
  try {
    await mkdir(lock);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  }
}
