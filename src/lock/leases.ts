// Leases as the lock policy sees them (SPEC §10): which claims have expired, and the commits
// that reclaim one or renew one. Pure: the claims come from the store, the time from the clock.
import { formatGoDuration } from '../base/duration.js';
import type { CommitStep } from './lock-operation.js';
import type { ClaimFacts, PoolState } from './pool-state.js';

/** What a decision about leases needs: the current claims of the claimed locks, and the time. */
export interface Leases {
  claims: ReadonlyMap<string, ClaimFacts>;
  now: number;
  /** How long after its lease a claim still counts as held: room for clocks that disagree. */
  graceMs: number;
  /** Who reclaims, for `Reclaimed-By`: the build URL, or the operator of the pool command. */
  reclaimedBy: string;
}

/** A claim to reclaim: whose it was and why it goes. */
export interface Reclaim {
  name: string;
  /** The expired claim's `Claim-Token` (undefined for a claim made without one). */
  token?: string;
  /** `lease expired at …`, or why a claim without a lease goes (`pool reap --older-than`). */
  reason: string;
  /** Who held it, as the claiming commit says. */
  by?: string;
}

/**
 * The claimed locks whose claim is expired (now > lease + grace), sorted by name. A claim without
 * a lease never expires; with `olderThanMs` (asked for by a person), one older than that goes
 * too. A claim whose claiming commit was not found is never reclaimed: nothing says it expired.
 */
export function expiredClaims(state: PoolState, leases: Leases, olderThanMs?: number): Reclaim[] {
  const expired: Reclaim[] = [];
  for (const name of [...state.claimed].sort()) {
    if (state.unclaimed.has(name)) continue;
    const claim = leases.claims.get(name);
    if (!claim) continue;
    const { token, by, leaseExpires, since } = claim;
    if (leaseExpires) {
      if (leases.now > leaseExpires.getTime() + leases.graceMs)
        expired.push({ name, token, by, reason: `lease expired at ${rfc3339(leaseExpires)}` });
    } else if (olderThanMs !== undefined && since && leases.now - since.getTime() > olderThanMs) {
      expired.push({
        name,
        token,
        by,
        reason: `claimed at ${rfc3339(since)} without a lease, older than ${formatGoDuration(olderThanMs)}`,
      });
    }
  }
  return expired;
}

/** When the next lease among the claims runs out, grace included: a waiting acquire looks again then. */
export function nextExpiry(leases: Leases): number | undefined {
  let next: number | undefined;
  for (const { leaseExpires } of leases.claims.values()) {
    if (!leaseExpires) continue;
    const at = leaseExpires.getTime() + leases.graceMs + 1;
    if (at > leases.now && (next === undefined || at < next)) next = at;
  }
  return next;
}

/** The commit that reclaims an expired claim: `unclaiming: NAME` with the reclaim trailers. */
export function reclaimStep(reclaim: Reclaim, reclaimedBy: string): CommitStep {
  const { name } = reclaim;
  return {
    name,
    change: { kind: 'move', name, from: 'claimed', to: 'unclaimed' },
    subject: `unclaiming: ${name}`,
    claiming: false,
    trailers: [
      // Always there, so a reclaim is told apart from a release by this one trailer.
      ['Reclaimed-Token', reclaim.token ?? 'none'],
      ['Reclaim-Reason', reclaim.reason],
      ['Reclaimed-By', reclaimedBy],
    ],
  };
}

/** The empty commit that extends a claim's lease: same token, new `Lease-Expires`. */
export function renewStep(name: string, token: string, leaseExpires: Date): CommitStep {
  return {
    name,
    change: { kind: 'none', name },
    subject: `renewing: ${name}`,
    claiming: false,
    trailers: [
      ['Claim-Token', token],
      ['Lease-Expires', rfc3339(leaseExpires)],
    ],
  };
}

export function rfc3339(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
