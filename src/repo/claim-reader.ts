// Who holds a lock now, as leases and fencing need it (SPEC §10): the current claim of each lock
// at the tip a decision is made on (its token, holder, time and lease, as last renewed), and the
// reclaim that ended a claim. Read first from the commits the put's working copy already holds,
// then, when the claim lies further back, in a copy of its own, deepened as far as the claiming
// commits lie (the whole history if need be: fencing must not guess), so the working copy stays
// as shallow as it is.
import type { Git } from '../git/git.js';
import type { ClaimFacts, LockState, ReclaimFacts } from '../lock/pool-state.js';
import type { BranchCopy } from './branch-copy.js';
import type { FetchedObjects } from './fetched-objects.js';
import { LockHolders } from './lock-holders.js';

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
   * A reader over the working copy as synced, which never fetches: it finds what the window of
   * history the copy holds can tell (nothing beyond it: `maxDepth` 0).
   */
  private async inWindow(tip: string): Promise<LockHolders> {
    const reader = new LockHolders(
      this.git,
      { ...this.options, gitDir: this.options.workdir, maxDepth: 0, fetched: this.fetched },
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
