// The `source` a test sends: the pool "pool" on the lock repository's branch, retrying every
// 100 ms instead of the default 10 s. A test adds or overrides fields with `extra`; transport
// tests pass the server's URL for the repository instead of the repository itself.
import type { LockRepo } from './lock-repo.js';

export function source<Extra extends Record<string, unknown>>(
  at: LockRepo | string,
  extra?: Extra,
): { uri: string; branch: string; pool: string; retry_delay: string } & Extra {
  const [uri, branch] = typeof at === 'string' ? [at, 'master'] : [at.bare, at.branch];
  return { uri, branch, pool: 'pool', retry_delay: '100ms', ...(extra as Extra) };
}
