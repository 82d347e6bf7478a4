// The git mechanism under the lock policy: one shallow working copy of the branch tip, reused
// across attempts, and the handful of lock-level actions the policy needs. It never sleeps
// and never decides; LockPool does both.
import { lstat, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CancelledError, OperationError, GitCommandError } from './errors.js';
import type { Git } from './git/git.js';
import { classifyPush, type PushOutcome, type PushRefused } from './git/push-outcome.js';
import { lockPath, type Change, type LockState, type PoolState } from './pool-state.js';
import { displayUri } from './logger.js';
import { lockNameProblem } from './lock-name.js';

export interface LockRepositoryOptions {
  uri: string;
  branch: string;
  pool: string;
  /** Where the working copy lives (created if missing). */
  workdir: string;
}

export class LockRepository {
  private initialised = false;
  private tip: string | undefined;

  constructor(
    private readonly git: Git,
    private readonly options: LockRepositoryOptions,
  ) {}

  get branchRef(): string {
    return `refs/heads/${this.options.branch}`;
  }

  private get trackingRef(): string {
    return `refs/remotes/origin/${this.options.branch}`;
  }

  private run(args: readonly string[], signal?: AbortSignal): Promise<string> {
    return this.git.run(args, { cwd: this.options.workdir, signal });
  }

  /** The branch tip on the remote without fetching anything (cheap: one ls-remote). */
  async remoteTip(): Promise<string | undefined> {
    await this.init();
    const out = await this.run(['ls-remote', '--', 'origin', this.branchRef]);
    for (const line of out.split('\n')) {
      const [sha, ref] = line.split('\t');
      if (ref === this.branchRef && sha) return sha;
    }
    return undefined;
  }

  /** Fetches the branch tip (depth 1) and makes the working copy exactly that commit. */
  async sync(): Promise<string> {
    await this.init();
    try {
      await this.run([
        'fetch',
        '--quiet',
        '--no-tags',
        '--depth=1',
        'origin',
        `+${this.branchRef}:${this.trackingRef}`,
      ]);
    } catch (error) {
      // Asked only to tell a missing branch apart; when the server cannot be reached either,
      // the fetch's own message is the one to report.
      const remote =
        error instanceof GitCommandError ? await this.remoteTip().catch(() => null) : null;
      if (remote === undefined) {
        throw new OperationError(
          `branch "${this.options.branch}" does not exist in ${displayUri(this.options.uri)}`,
        );
      }
      throw error;
    }
    await this.run(['checkout', '--quiet', '--force', '-B', this.options.branch, this.trackingRef]);
    await this.run(['clean', '--quiet', '-ffdx']);
    this.tip = (await this.run(['rev-parse', 'HEAD'])).trim();
    return this.tip;
  }

  /** The tip the working copy was last synced to. */
  get syncedTip(): string | undefined {
    return this.tip;
  }

  /** The pool as it is in the working copy; refuses when the pool's folders are missing. */
  async pool(): Promise<PoolState> {
    const { pool } = this.options;
    const out = await this.run(['ls-tree', '-r', '-t', '-z', 'HEAD', '--', `${pool}/`]);
    const claimed = new Set<string>();
    const unclaimed = new Set<string>();
    const irregular = new Map<string, string>();
    const folders = new Set<string>();
    for (const entry of out.split('\0')) {
      if (!entry) continue;
      const tab = entry.indexOf('\t');
      const [mode, type] = entry.slice(0, tab).split(' ');
      const path = entry.slice(tab + 1);
      if (path === `${pool}/claimed` || path === `${pool}/unclaimed`) {
        if (type === 'tree') folders.add(path);
        continue;
      }
      const match = /^(claimed|unclaimed)\/([^/]+)$/.exec(path.slice(pool.length + 1));
      if (!path.startsWith(`${pool}/`) || !match) continue;
      const [, state, name] = match as unknown as [string, LockState, string];
      if (name.startsWith('.')) continue;
      // A name the resource refuses (a tab, a newline) could be acquired but never released.
      if (lockNameProblem(name)) {
        irregular.set(`${state}/${name}`, 'not a valid lock name');
        continue;
      }
      if (type !== 'blob' || mode === '120000') {
        irregular.set(`${state}/${name}`, type === 'tree' ? 'a directory' : 'a symlink');
        continue;
      }
      (state === 'claimed' ? claimed : unclaimed).add(name);
    }
    if (!folders.has(`${pool}/claimed`) || !folders.has(`${pool}/unclaimed`)) {
      throw new OperationError(
        `pool "${pool}" does not exist on branch "${this.options.branch}" (expected folders ${pool}/claimed/ and ${pool}/unclaimed/)`,
      );
    }
    return { claimed, unclaimed, irregular };
  }

  /** Stages one change in the working copy. */
  async apply(change: Change): Promise<void> {
    const { pool, workdir } = this.options;
    switch (change.kind) {
      case 'move':
        await this.run([
          'mv',
          '--',
          lockPath(pool, change.from, change.name),
          lockPath(pool, change.to, change.name),
        ]);
        return;
      case 'write': {
        const path = lockPath(pool, change.state, change.name);
        await mkdir(join(workdir, pool, change.state), { recursive: true });
        await refuseLink(join(workdir, path));
        await writeFile(join(workdir, path), change.content);
        await this.run(['add', '--', path]);
        return;
      }
      case 'delete':
        await this.run(['rm', '--quiet', '--', lockPath(pool, change.state, change.name)]);
        return;
    }
  }

  /** Whether anything is staged (an update with identical metadata stages nothing). */
  async hasStagedChanges(): Promise<boolean> {
    try {
      await this.run(['diff', '--cached', '--quiet']);
      return false;
    } catch (error) {
      if (error instanceof GitCommandError && error.exitCode === 1) return true;
      throw error;
    }
  }

  async commit(message: string): Promise<string> {
    await this.run(['commit', '--quiet', '--no-verify', '--cleanup=verbatim', '-m', message]);
    return (await this.run(['rev-parse', 'HEAD'])).trim();
  }

  async push(signal?: AbortSignal): Promise<PushOutcome> {
    let out: string;
    try {
      out = await this.run(['push', '--porcelain', 'origin', `HEAD:${this.branchRef}`], signal);
    } catch (error) {
      // Without a verdict for our ref the push may or may not have landed: a transient failure.
      if (error instanceof GitCommandError) {
        const outcome = classifyPush(error.stdout, this.branchRef);
        if (outcome) return this.verdict(outcome);
      }
      // No answer (timed out, connection lost) does not mean no push: the server may have moved
      // the branch before the client gave up. Retrying a release or an add that landed would
      // fail with "not claimed" or "already exists".
      if (!(error instanceof CancelledError) && (await this.landed())) return 'pushed';
      throw error;
    }
    const outcome = classifyPush(out, this.branchRef);
    if (outcome === undefined) throw new Error(`git push printed no status for ${this.branchRef}`);
    return this.verdict(outcome);
  }

  /** A push the remote refused (hook, protection) will be refused again: retrying would spin. */
  private verdict(outcome: PushOutcome | PushRefused): PushOutcome {
    if (typeof outcome === 'string') return outcome;
    throw new OperationError(
      `the lock repository refused the push to branch "${this.options.branch}": ${outcome.refused}`,
    );
  }

  /** Whether the remote branch tip is the commit we just tried to push. */
  private async landed(): Promise<boolean> {
    try {
      const [head, remote] = await Promise.all([this.run(['rev-parse', 'HEAD']), this.remoteTip()]);
      return remote === head.trim();
    } catch {
      return false;
    }
  }

  /**
   * The newest commit in the working copy's history that touched this lock's file, deepening
   * the shallow copy as needed (an update that changed nothing answers with it).
   */
  async lastCommitOf(state: LockState, name: string): Promise<string> {
    const path = lockPath(this.options.pool, state, name);
    for (let depth = 8; ; depth *= 4) {
      const found = (await this.run(['log', '-1', '--format=%H', 'HEAD', '--', path])).trim();
      const shallowBoundary =
        (await this.run(['rev-parse', '--is-shallow-repository'])).trim() === 'true';
      if (found && (!shallowBoundary || !(await this.isShallowBoundary(found)))) return found;
      if (!shallowBoundary) return found || (this.tip ?? '');
      await this.run([
        'fetch',
        '--quiet',
        '--no-tags',
        `--deepen=${depth}`,
        'origin',
        `+${this.branchRef}:${this.trackingRef}`,
      ]);
    }
  }

  /**
   * Whether the remote tip (as last synced) still carries this claim: the claim commit is in its
   * history and nothing touched the claimed lock since. Deepens the shallow copy to find out.
   */
  async holds(claim: { name: string; commit: string }): Promise<boolean> {
    const claimedPath = lockPath(this.options.pool, 'claimed', claim.name);
    for (const depth of [16, 256, 0]) {
      try {
        await this.run(['merge-base', '--is-ancestor', claim.commit, 'HEAD']);
        const since = await this.run([
          'rev-list',
          '-n1',
          `${claim.commit}..HEAD`,
          '--',
          claimedPath,
        ]);
        return since.trim() === '';
      } catch (error) {
        if (!(error instanceof GitCommandError) || error.exitCode !== 1) throw error;
      }
      if ((await this.run(['rev-parse', '--is-shallow-repository'])).trim() !== 'true')
        return false;
      const deepen = depth > 0 ? `--deepen=${depth}` : '--unshallow';
      await this.run([
        'fetch',
        '--quiet',
        '--no-tags',
        deepen,
        'origin',
        `+${this.branchRef}:${this.trackingRef}`,
      ]);
      await this.run(['reset', '--quiet', '--hard', this.trackingRef]);
    }
    return false;
  }

  private async isShallowBoundary(commit: string): Promise<boolean> {
    const shallow = await this.run(['rev-parse', '--git-path', 'shallow']);
    try {
      const text = await readFile(join(this.options.workdir, shallow.trim()), 'utf8');
      return text.split('\n').includes(commit);
    } catch {
      return false;
    }
  }

  private async init(): Promise<void> {
    if (this.initialised) return;
    await mkdir(this.options.workdir, { recursive: true });
    await this.run(['init', '--quiet']);
    await this.run(['remote', 'add', 'origin', this.options.uri]);
    this.initialised = true;
  }
}

/** A symlinked lock path could make a write land outside the repository. */
async function refuseLink(path: string): Promise<void> {
  try {
    const info = await lstat(path);
    if (info.isSymbolicLink() || info.isDirectory())
      throw new OperationError(`refusing to write ${path}: it is not a regular file`);
  } catch (error) {
    if (error instanceof OperationError) throw error;
  }
}
