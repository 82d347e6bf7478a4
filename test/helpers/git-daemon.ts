// The git daemon lives in git-daemon.mjs, which the bench (plain Node) shares.
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { startGitDaemon, type GitDaemon } from './git-daemon.mjs';
import { createLockRepo, type LockRepo, type PoolSeed } from './lock-repo.js';

export { startGitDaemon, type GitDaemon } from './git-daemon.mjs';

export interface ServedLockRepo {
  readonly repo: LockRepo;
  readonly daemon: GitDaemon;
  /** The repository's git:// URL. */
  readonly url: string;
}

/**
 * A lock repository with `pool` seeded, served by git daemon for the tests around the call (its
 * describe block, or the file), or a new one for each of them (`each`); read its fields inside
 * the tests.
 */
export function servedLockRepo(pool: PoolSeed, each = false): ServedLockRepo {
  let repo: LockRepo | undefined;
  let daemon: GitDaemon | undefined;
  (each ? beforeEach : beforeAll)(async () => {
    repo = await createLockRepo({ pool });
    daemon = await startGitDaemon(repo.root);
  });
  (each ? afterEach : afterAll)(async () => {
    await daemon?.stop();
    await repo?.cleanup();
  });
  const ready = () => {
    if (!repo || !daemon) throw new Error('the served lock repository is read before beforeAll');
    return { repo, daemon };
  };
  return {
    get repo() {
      return ready().repo;
    },
    get daemon() {
      return ready().daemon;
    },
    get url() {
      const served = ready();
      return served.daemon.url(served.repo.bare);
    },
  };
}
