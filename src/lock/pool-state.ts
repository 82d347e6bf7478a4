// The lock vocabulary shared by the policy and the git mechanism.

export type LockState = 'claimed' | 'unclaimed';

export interface PoolState {
  /** Lock names in `POOL/claimed/` and `POOL/unclaimed/` (regular files, no dotfiles). */
  claimed: ReadonlySet<string>;
  unclaimed: ReadonlySet<string>;
  /** Entries that look like locks but are not regular files (directories, symlinks). */
  irregular: ReadonlyMap<string, string>;
}

export type Change =
  | { kind: 'move'; name: string; from: LockState; to: LockState }
  | { kind: 'write'; name: string; state: LockState; content: Buffer }
  | { kind: 'delete'; name: string; state: LockState }
  /** No file changes: a commit that only records something about the lock (a renewal). */
  | { kind: 'none'; name: string };

export function lockPath(pool: string, state: LockState, name: string): string {
  return `${pool}/${state}/${name}`;
}

/** What the commit that claimed a lock says about that claim (SPEC §9, §10). */
export interface ClaimFacts {
  /** Its `Claim-Token`; undefined for a claim made by the reference, or not found. */
  token?: string;
  /** The claiming commit. */
  commit?: string;
  /** Who holds it: the build URL or operator. */
  by?: string;
  since?: Date;
  /** The latest `Lease-Expires` recorded for its token; undefined: it never expires. */
  leaseExpires?: Date;
}

/**
 * What the newest commits of the branch a copy holds tell of the pool's holds, from their
 * subjects and committer times (to the second).
 */
export interface HoldHistory {
  /** When each lock those commits leave claimed was claimed (ms since the epoch). */
  claimedAt: ReadonlyMap<string, number>;
  /** How long each hold that began and ended within them lasted, claim to release (ms). */
  holds: readonly number[];
  /** When each claim among them was committed (ms since the epoch), oldest first. */
  claims: readonly number[];
}

/** What the commit that reclaimed a claim says: when, and why. */
export interface ReclaimFacts {
  at: Date;
  reason: string;
}
