// Who holds a lock now, as leases and fencing need it (SPEC §10): the current claim of each lock
// at the tip a decision is made on (its token, holder, time and lease, as last renewed), and the
// reclaim that ended a claim. Read first from the commits the put's working copy already holds,
// then, when the claim lies further back, in a copy of its own, deepened as far as the claiming
// commits lie (the whole history if need be: fencing must not guess), so the working copy stays
// as shallow as it is. A waiting put's progress asks the working copy's window too
// (heldInWindow), and looks elsewhere itself where that does not reach.
import type { Git } from '../git/git.js';
import type { ClaimFacts, LockState, ReclaimFacts } from '../lock/pool-state.js';
import type { BranchCopy } from './branch-copy.js';
import type { FetchedObjects } from './fetched-objects.js';
import { windowKept } from './fetched-log.js';
import { LockHolders, type LockRecord } from './lock-holders.js';

export interface ClaimReaderOptions {
  uri: string;
  branch: string;
  pool: string;
  /** The working copy's folder; the reader's own copy goes beside it. */
  workdir: string;
}

export class ClaimReader {
  /** The copy of its own, made when first needed. */
  private own: LockHolders | undefined;

  constructor(
    private readonly git: Git,
    private readonly options: ClaimReaderOptions,
    /** The put's working copy, as synced. */
    private readonly working: BranchCopy,
    /** What the working copy fetched itself, parsed (read instead of git's logs where it can). */
    private readonly fetched?: FetchedObjects,
  ) {}

  /**
   * The current claims of `names` at `tip` (the synced tip); undefined when the branch was
   * rewritten past it since.
   */
  async claims(
    tip: string,
    names: readonly string[],
  ): Promise<Map<string, ClaimFacts> | undefined> {
    const locks = names.map((name) => ({ name, state: 'claimed' as const }));
    // First the commits the working copy already holds (a fenced put fetches a window of them,
    // see run/lock-run.ts): the claims are usually there, which spares a fetch.
    const window = await (await this.inWindow(tip)).records(locks);
    const records = window.every((record) => record.commit !== undefined)
      ? window
      : await (await this.atTip(tip))?.records(locks);
    if (!records) return undefined;
    return new Map(
      records.map((record) => [
        record.name,
        {
          token: record.token,
          commit: record.commit,
          by: record.by,
          since: record.since,
          leaseExpires: record.leaseExpires,
        },
      ]),
    );
  }

  /**
   * The reclaim of `name`'s claim with `token`, if there was one, looked for back to the commit
   * that put the lock in `state` (where it is at `tip`): a reclaim lies at or before it.
   */
  async reclaimOf(
    tip: string,
    name: string,
    state: LockState | undefined,
    token: string,
  ): Promise<ReclaimFacts | undefined> {
    const reader = await this.atTip(tip);
    if (!reader) return undefined;
    if (state) await reader.records([{ name, state }]);
    return reader.reclaimOf(name, token);
  }

  /**
   * Who holds the claimed locks among `wanted` at `tip`, as the working copy's window of history
   * tells without a fetch (for `out`'s progress: usually without a git process either, see
   * fetched-log.ts); undefined where the copy is not at `tip`, may reach further back than the
   * progress looks, or a claim lies beyond its window.
   */
  async heldInWindow(
    tip: string,
    wanted: readonly string[],
    signal?: AbortSignal,
  ): Promise<LockRecord[] | undefined> {
    if (tip !== this.working.fetched) return undefined;
    // A copy that is not shallow may hold history further back than the progress looks
    // (PROGRESS_MAX_DEPTH): one git cloned whole (of a repository on this machine). One the run
    // fetched all of itself holds less (fetched-log.ts's walks stop before).
    const shallow = await this.working.shallowCommits();
    const { fetched } = this;
    if (shallow.size === 0 && !(fetched && windowKept(fetched, tip, shallow))) return undefined;
    const reader = await this.inWindow(tip);
    const names = new Set(wanted);
    const claimed = (await reader.locks(signal)).filter(
      (lock) => lock.state === 'claimed' && names.has(lock.name),
    );
    const records = await reader.records(claimed, signal);
    return records.every((record) => record.commit !== undefined) ? records : undefined;
  }

  /**
   * A reader over the working copy as synced, which never fetches: it finds what the window of
   * history the copy holds can tell (nothing beyond it: `maxDepth` 0).
   */
  private async inWindow(tip: string): Promise<LockHolders> {
    const { fetched } = this;
    const reader = new LockHolders(
      this.git,
      {
        ...this.options,
        gitDir: this.options.workdir,
        maxDepth: 0,
        fetched,
        poolAt: fetched && ((at) => fetched.poolTree(at, this.options.pool)),
      },
      this.working,
    );
    await reader.pin(tip);
    return reader;
  }

  /** The copy of its own, refreshed; undefined when it found the branch past `tip`. */
  private async atTip(tip: string): Promise<LockHolders | undefined> {
    this.own ??= new LockHolders(this.git, {
      uri: this.options.uri,
      branch: this.options.branch,
      pool: this.options.pool,
      gitDir: `${this.options.workdir}-claims`,
    });
    await this.own.refresh();
    // Fetched at the remote tip, which holds the synced one unless the branch was rewritten.
    return (await this.own.pin(tip)) ? this.own : undefined;
  }
}
