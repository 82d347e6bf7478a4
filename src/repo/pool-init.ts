// `pool init`: creates a pool's folders (each with a .gitkeep) and unclaimed locks on the branch,
// creating the branch when the repository has none by that name, and pushes. Optimistic like
// every other change: a rejected push starts again from the new tip, under the lock policy's one
// retry policy (lock/retry.ts), which also tries again after a failure the network may get over.
import { lstat, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { GitCommandError, OperationError } from '../base/errors.js';
import type { Git } from '../git/git.js';
import { classifyPush } from '../git/push-outcome.js';
import { displayUri } from '../base/logger.js';
import { lockPath } from '../lock/pool-state.js';
import { retry, type Attempt, type RetryOptions } from '../lock/retry.js';
import { BranchCopy } from './branch-copy.js';

export interface InitOptions {
  uri: string;
  branch: string;
  pool: string;
  locks: readonly string[];
  workdir: string;
  message: string;
}

export type InitResult =
  | { kind: 'pushed'; ref: string; createdBranch: boolean; added: string[] }
  | { kind: 'unchanged'; ref: string };

/** Lost races in a row before giving up (someone else keeps changing the branch). */
const ATTEMPTS = 5;

/** How init waits between attempts and says so (the run's clock, signal and logger). */
export type InitRetry = Pick<RetryOptions, 'clock' | 'signal' | 'onTransient'>;

export async function initPool(
  git: Git,
  options: InitOptions,
  policy: InitRetry,
): Promise<InitResult> {
  const { workdir, branch, pool } = options;
  const run = (args: readonly string[]) => git.run(args, { cwd: workdir });
  const branchRef = `refs/heads/${branch}`;
  await mkdir(workdir, { recursive: true });
  await run(['init', '--quiet']);
  await run(['remote', 'add', 'origin', options.uri]);
  // The branch copy lives in the working copy's repository; the checkout is built from its tip.
  const copy = new BranchCopy(git, { uri: options.uri, branch, gitDir: join(workdir, '.git') });

  const attempt = async (): Promise<Attempt<InitResult>> => {
    const exists = (await copy.remoteRefs([branchRef])).some(({ ref }) => ref === branchRef);
    if (exists) {
      await copy.fetch(1);
      await run(['checkout', '--quiet', '--force', '-B', branch, copy.tip]);
      await run(['clean', '--quiet', '-ffdx']);
    } else {
      // A new branch holds only pools: it starts from nothing, not from another branch.
      await run(['symbolic-ref', 'HEAD', branchRef]);
      // An earlier attempt's commit, if its push was refused, must not become this one's parent.
      await run(['update-ref', '-d', branchRef]);
      await run(['rm', '-r', '--quiet', '--cached', '--ignore-unmatch', '--', '.']);
      await run(['clean', '--quiet', '-ffdx']);
    }

    const paths: string[] = [];
    for (const state of ['claimed', 'unclaimed'] as const) {
      await ensureFolder(join(workdir, pool), `${pool}/`);
      await ensureFolder(join(workdir, pool, state), `${pool}/${state}/`);
      const keep = lockPath(pool, state, '.gitkeep');
      // Whatever the branch holds there (a file, or a symlink to anywhere) already keeps the
      // folder: it is never written to.
      if (!(await pathExists(join(workdir, keep)))) {
        await createEmptyFile(join(workdir, keep));
        paths.push(keep);
      }
    }
    for (const name of options.locks) {
      for (const state of ['claimed', 'unclaimed'] as const) {
        if (await pathExists(join(workdir, lockPath(pool, state, name))))
          throw new OperationError(`lock "${name}" already exists in pool "${pool}" (${state})`);
      }
      const path = lockPath(pool, 'unclaimed', name);
      await createEmptyFile(join(workdir, path));
      paths.push(path);
    }
    if (paths.length === 0) {
      const ref = (await run(['rev-parse', 'HEAD'])).trim();
      return { kind: 'done', value: { kind: 'unchanged', ref } };
    }
    await run(['add', '--', ...paths]);
    await run(['commit', '--quiet', '--no-verify', '--cleanup=verbatim', '-m', options.message]);
    const ref = (await run(['rev-parse', 'HEAD'])).trim();
    let out: string;
    try {
      out = await run(['push', '--porcelain', 'origin', `HEAD:${branchRef}`]);
    } catch (error) {
      if (!(error instanceof GitCommandError)) throw error;
      out = error.stdout;
      if (classifyPush(out, branchRef) === undefined) throw error;
    }
    const outcome = classifyPush(out, branchRef);
    if (outcome === 'pushed') {
      const added = options.locks.filter((name) =>
        paths.includes(lockPath(pool, 'unclaimed', name)),
      );
      return { kind: 'done', value: { kind: 'pushed', ref, createdBranch: !exists, added } };
    }
    return { kind: 'conflict', name: pool };
  };
  return retry(attempt, {
    ...policy,
    maxConflicts: {
      attempts: ATTEMPTS,
      reason: () => `branch "${branch}" of ${displayUri(options.uri)} kept changing under us`,
    },
  });
}

async function ensureFolder(path: string, display: string): Promise<void> {
  try {
    const info = await lstat(path);
    if (!info.isDirectory())
      throw new OperationError(`cannot create pool: ${display} exists and is not a folder`);
  } catch (error) {
    if (error instanceof OperationError) throw error;
    await mkdir(path);
  }
}

/**
 * A new, empty regular file: `wx` (O_CREAT | O_EXCL) fails on anything already there, a symlink
 * included, so nothing the repository holds is ever written through.
 */
async function createEmptyFile(path: string): Promise<void> {
  await writeFile(path, '', { flag: 'wx' });
}

async function pathExists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch {
    return false;
  }
}
