// Who holds the locks a waiting put wants, for `out`'s progress lines (run/progress.ts): read from
// the window of history the put's own copy holds where it reaches the claims, else by a
// LockHolders in a copy of the lookup's own, within a time budget of its own.
import { join } from 'node:path';
import { CancelledError, formatMs } from '../base/errors.js';
import type { Git } from '../git/git.js';
import type { FetchById } from './branch-copy.js';
import {
  LockHolders,
  PROGRESS_MAX_DEPTH,
  type LockHoldersOptions,
  type LockRecord,
} from './lock-holders.js';

/**
 * Who holds the claimed locks among `wanted` at `tip` as the put's own copy tells without a
 * fetch (LockRepository.heldInWindow); undefined where it cannot.
 */
export type HeldInWindow = (
  tip: string,
  wanted: readonly string[],
  signal: AbortSignal,
) => Promise<LockRecord[] | undefined>;

/**
 * The holder lookup as `out`'s progress uses it: claimed locks only, bounded by its own time
 * budget so a slow server can delay a waiting line but never the wait itself by much.
 */
export class HolderLookup {
  constructor(
    private readonly holders: LockHolders,
    private readonly runSignal: AbortSignal,
    private readonly budgetMs: number,
    private readonly inWindow?: HeldInWindow,
  ) {}

  get searchedDepth(): number {
    return this.holders.searchedDepth;
  }

  /** Who holds the claimed locks among `wanted`, at `tip` (a branch tip the caller has seen). */
  async claimed(wanted: readonly string[], tip?: string): Promise<LockRecord[]> {
    const signal = AbortSignal.any([this.runSignal, AbortSignal.timeout(this.budgetMs)]);
    try {
      // The put's own copy usually holds every claim a waiting line is about, read without git;
      // the copy of the lookup's own is fetched (and deepened) only where it does not.
      const kept = tip === undefined ? undefined : await this.inWindow?.(tip, wanted, signal);
      if (kept) return kept;
      await this.holders.refresh(signal, tip);
      const names = new Set(wanted);
      const claimed = (await this.holders.locks(signal)).filter(
        (lock) => lock.state === 'claimed' && names.has(lock.name),
      );
      return await this.holders.records(claimed, signal);
    } catch (error) {
      if (this.runSignal.aborted) throw new CancelledError(this.runSignal.reason);
      if (signal.aborted) throw new Error(`it took longer than ${formatMs(this.budgetMs)}`);
      throw error;
    }
  }
}

/** A waiting line may be late by this much while the holders are looked up, never more. */
const LOOKUP_BUDGET_MS = 10_000;

/** The holder lookup of a waiting put, in its own folder of the run's private home. */
export function holderLookup(
  git: Git,
  source: { uri: string; branch: string; pool: string },
  home: string,
  signal: AbortSignal,
  waitTimeoutMs: number | undefined,
  fetchById: FetchById,
  local?: LockHoldersOptions['local'],
  poolAt?: LockHoldersOptions['poolAt'],
  inWindow?: HeldInWindow,
): HolderLookup {
  const holders = new LockHolders(git, {
    uri: source.uri,
    branch: source.branch,
    pool: source.pool,
    gitDir: join(home, 'holders.git'),
    maxDepth: PROGRESS_MAX_DEPTH,
    fetchById,
    local,
    poolAt,
    // In the run's private home: it goes with the run.
    scratch: true,
  });
  const budgetMs = Math.min(LOOKUP_BUDGET_MS, waitTimeoutMs ?? Infinity);
  return new HolderLookup(holders, signal, budgetMs, inWindow);
}
