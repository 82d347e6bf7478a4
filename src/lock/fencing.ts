// Fencing (SPEC §10): an operation from a step folder that carries a claim token acts on a lock
// only while that claim still holds it, checked at the tip it would commit on. LockPool asks
// before each attempt's decision.
import type { ResolvedOperation } from './lock-operation.js';
import type { ClaimFacts, PoolState, ReclaimFacts } from './pool-state.js';
import type { LockStore } from './lock-store.js';

/**
 * Why the operation may not act (a message), 'moved' when the branch moved while the claims were
 * read, or undefined when it may. A release of a lock that is not claimed fails as it always did,
 * naming the reclaim when there was one; an update waits as before while its own claim holds the
 * lock, and fails at once when another one does.
 */
export async function fence(
  store: LockStore,
  operation: ResolvedOperation,
  state: PoolState,
): Promise<string | 'moved' | undefined> {
  if (!('token' in operation) || operation.token === undefined) return undefined;
  const { token } = operation;
  const names = 'names' in operation && operation.names ? operation.names : [operation.name];
  const claimed = names.filter((name) => state.claimed.has(name));
  for (const name of names) {
    if (claimed.includes(name) || operation.kind === 'update') continue;
    const reclaim = await store.reclaimOf(name, token);
    if (reclaim) return noLongerHeld(name, reclaim);
  }
  if (claimed.length === 0) return undefined;
  const claims = await store.claims(claimed);
  if (!claims) return 'moved';
  for (const name of claimed) {
    const claim = claims.get(name);
    if (claim?.token !== token)
      return noLongerHeld(name, await store.reclaimOf(name, token), claim);
  }
  return undefined;
}

/**
 * Why a step folder's claim may no longer act on its lock: reclaimed, or released and claimed
 * again by someone else.
 */
export function noLongerHeld(name: string, reclaim?: ReclaimFacts, claim?: ClaimFacts): string {
  const why = reclaim
    ? `reclaimed at ${rfc3339(reclaim.at)}: ${reclaim.reason}`
    : `claimed since ${claim?.since ? rfc3339(claim.since) : 'an unknown time'} by ${claim?.by ?? 'an unknown holder'}`;
  return `lock ${name} is no longer held by this claim (${why})`;
}

function rfc3339(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
