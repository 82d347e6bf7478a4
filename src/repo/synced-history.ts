// What the synced history says about one lock: the newest commit that touched its file, and
// whether a claim made earlier is still carried by the tip. Both read the working copy and deepen
// it in bounded steps only as far as the answer lies, so the copy stays as shallow as it can.
import { lockPath, type LockState } from '../lock/pool-state.js';
import type { BranchCopy } from './branch-copy.js';

export class SyncedHistory {
  constructor(
    private readonly copy: BranchCopy,
    private readonly pool: string,
    /** The tip last synced (LockRepository's; it refuses a copy never synced). */
    private readonly tip: () => string,
    /** Fetches `more` commits of history; false when the copy already holds it all. */
    private readonly deepen: (more: number | 'all') => Promise<boolean>,
  ) {}

  /**
   * The newest commit in the synced history that touched this lock's file, deepening the
   * shallow copy as needed (an update that changed nothing answers with it).
   */
  async lastCommitOf(state: LockState, name: string): Promise<string> {
    const path = lockPath(this.pool, state, name);
    // Bounded steps ending in the whole history (see BranchCopy.deepen for why not --deepen).
    for (const more of [8, 128, 'all' as const, undefined]) {
      const found = (
        await this.copy.run(['log', '-1', '--format=%H%n', this.tip(), '--', path])
      ).trim();
      if (found && !(await this.copy.shallowCommits()).has(found)) return found;
      if (more === undefined || !(await this.deepen(more))) return found || this.tip();
    }
    return this.tip();
  }

  /**
   * Whether the remote tip (as last synced) still carries this claim: the claim commit is in its
   * history and nothing touched the claimed lock since. Deepens the shallow copy to find out,
   * no further than the tip the claim was made on (`parent`), when it is known.
   */
  async holds(claim: { name: string; commit: string; parent?: string }): Promise<boolean> {
    const claimedPath = lockPath(this.pool, 'claimed', claim.name);
    for (const more of [16, 256, 'all' as const, undefined]) {
      const tip = this.tip();
      // Still at the tip the claim was made on: it has not landed.
      if (claim.parent === tip) return false;
      if (await this.copy.isAncestor(claim.commit, tip)) {
        // `rev-list --count` always prints, so the answer costs one quick command.
        const since = await this.copy.run([
          'rev-list',
          '--count',
          `${claim.commit}..${tip}`,
          '--',
          claimedPath,
        ]);
        return since.trim() === '0';
      }
      // The history fetched reaches back to the tip the claim was made on, so it would hold the
      // claim had it landed: no need to fetch more.
      if (claim.parent !== undefined && (await this.copy.isAncestor(claim.parent, tip)))
        return false;
      if (more === undefined || !(await this.deepen(more))) return false;
    }
    return false;
  }
}
