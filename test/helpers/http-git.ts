// The HTTP server lives in http-git.mjs, which the bench (plain Node) shares.
import { onTestFinished } from 'vitest';
import { startHttpGit, type HttpGitOptions, type HttpGitServer } from './http-git.mjs';
import { createLockRepo, type LockRepo, type PoolSeed } from './lock-repo.js';

export { startHttpGit, type HttpGitServer, type HttpGitOptions } from './http-git.mjs';

/** The login `servedOverHttp`'s server asks for. */
export const HTTP_USER = 'locksmith';
export const HTTP_PASSWORD = 'pass word';

/**
 * A lock repository seeded with pool "pool", served by `git http-backend` behind basic auth
 * (HTTP_USER, HTTP_PASSWORD), for the test that calls it: both go when it ends.
 */
export async function servedOverHttp(
  seed: PoolSeed,
  options: Partial<HttpGitOptions> = {},
): Promise<{ repo: LockRepo; server: HttpGitServer; uri: string }> {
  const repo = await createLockRepo({ pool: seed });
  onTestFinished(() => repo.cleanup());
  const server = await startHttpGit({
    projectRoot: repo.root,
    username: HTTP_USER,
    password: HTTP_PASSWORD,
    ...options,
  });
  onTestFinished(() => server.stop());
  return { repo, server, uri: server.url(repo.bare) };
}
