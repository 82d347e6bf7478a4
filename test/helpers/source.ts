// The `source` a test sends: the pool "pool" on the lock repository's branch, retrying every
// 100 ms instead of the default 10 s. A test adds or overrides fields with `extra`; transport
// tests pass the server's URL for the repository instead of the repository itself.
import type { LockRepo } from './lock-repo.js';

/**
 * `uri` under another name (`localhost` for `127.0.0.1`) with the git_config whose
 * url.<base>.insteadOf turns it back: git reaches the same server, while the run must leave its
 * connections to git, since such a rewrite may send git elsewhere.
 */
export function renamed(uri: string): {
  uri: string;
  git_config: { name: string; value: string }[];
} {
  const other = uri.replace('127.0.0.1', 'localhost');
  return { uri: other, git_config: [{ name: `url.${uri}.insteadOf`, value: other }] };
}

export function source<Extra extends Record<string, unknown>>(
  at: LockRepo | string,
  extra?: Extra,
): { uri: string; branch: string; pool: string; retry_delay: string } & Extra {
  const [uri, branch] = typeof at === 'string' ? [at, 'master'] : [at.bare, at.branch];
  return { uri, branch, pool: 'pool', retry_delay: '100ms', ...(extra as Extra) };
}
