// A local copy of the branch's history for `in` and `check`, fetched as deep as the question needs.
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { GitCommandError, OperationError } from './errors.js';
import type { Git } from './git/git.js';
import { displayUri } from './logger.js';
import { lockPath, type LockState } from './pool-state.js';

/** A bare-bones local copy of the branch's history, fetched as deep as the question needs. */
export class BranchHistory {
  private depth: number | undefined;

  constructor(
    private readonly git: Git,
    private readonly workdir: string,
    private readonly uri: string,
    private readonly branch: string,
  ) {}

  get trackingRef(): string {
    return `refs/remotes/origin/${this.branch}`;
  }

  run(args: readonly string[]): Promise<string> {
    return this.git.run(args, { cwd: this.workdir });
  }

  async fetch(depth?: number): Promise<void> {
    await mkdir(this.workdir, { recursive: true });
    await this.run(['init', '--quiet']);
    await this.run(['remote', 'add', 'origin', this.uri]);
    this.depth = depth;
    // One commit deeper than asked: the version's own change needs its parent to diff against.
    const deepen = depth === undefined ? [] : [`--depth=${depth + 1}`];
    try {
      await this.run([
        'fetch',
        '--quiet',
        '--no-tags',
        ...deepen,
        'origin',
        `+refs/heads/${this.branch}:${this.trackingRef}`,
      ]);
    } catch (error) {
      if (error instanceof GitCommandError) {
        // When the server cannot be reached either, the fetch's own message is the one to report.
        const heads = await this.run([
          'ls-remote',
          '--heads',
          '--',
          'origin',
          `refs/heads/${this.branch}`,
        ]).catch(() => undefined);
        if (heads?.trim() === '')
          throw new OperationError(
            `branch "${this.branch}" does not exist in ${displayUri(this.uri)}`,
          );
      }
      throw error;
    }
  }

  private async deepen(): Promise<boolean> {
    if ((await this.run(['rev-parse', '--is-shallow-repository'])).trim() !== 'true') return false;
    this.depth = (this.depth ?? 1) * 4;
    await this.run([
      'fetch',
      '--quiet',
      '--no-tags',
      `--deepen=${this.depth}`,
      'origin',
      `+refs/heads/${this.branch}:${this.trackingRef}`,
    ]);
    return true;
  }

  private async shallowCommits(): Promise<Set<string>> {
    const path = (await this.run(['rev-parse', '--git-path', 'shallow'])).trim();
    try {
      return new Set(
        (await readFile(join(this.workdir, path), 'utf8')).split('\n').filter(Boolean),
      );
    } catch {
      return new Set();
    }
  }

  /** The full commit id of `version`, which must be in the branch's history. */
  async resolveOnBranch(version: string): Promise<string> {
    for (;;) {
      const commit = await this.tryResolve(version);
      if (commit && (await this.isAncestor(commit, this.trackingRef))) return commit;
      if (!(await this.deepen())) break;
    }
    throw new OperationError(`version ${version} is not a commit on branch "${this.branch}"`);
  }

  async tryResolve(version: string): Promise<string | undefined> {
    try {
      return (
        (
          await this.run([
            'rev-parse',
            '--verify',
            '--quiet',
            '--end-of-options',
            `${version}^{commit}`,
          ])
        ).trim() || undefined
      );
    } catch {
      return undefined;
    }
  }

  async isAncestor(commit: string, of: string): Promise<boolean> {
    try {
      await this.run(['merge-base', '--is-ancestor', commit, of]);
      return true;
    } catch (error) {
      if (error instanceof GitCommandError && error.exitCode === 1) return false;
      throw error;
    }
  }

  /** The newest commit at or before `commit` that changed a lock of `pool`, and that lock's name. */
  async lockCommitAt(
    commit: string,
    pool: string,
  ): Promise<{ commit: string; name: string } | undefined> {
    for (;;) {
      const shallow = await this.shallowCommits();
      const log = await this.run([
        'log',
        '-z',
        '--no-renames',
        '--name-only',
        '--format=%x01%H',
        commit,
        '--',
        `${pool}/`,
      ]);
      for (const record of log.split('\x01').slice(1)) {
        const [header = '', ...paths] = record.split(/\n|\0/).filter((part) => part !== '');
        const sha = header.trim();
        // A shallow copy's oldest commit seems to add every file: it says nothing until deepened.
        if (shallow.has(sha)) break;
        for (const path of paths) {
          const match = /^(?:claimed|unclaimed)\/([^/]+)$/.exec(path.slice(pool.length + 1));
          if (path.startsWith(`${pool}/`) && match && !match[1]!.startsWith('.'))
            return { commit: sha, name: match[1]! };
        }
      }
      if (!(await this.deepen())) return undefined;
    }
  }

  async stateAt(commit: string, pool: string, name: string): Promise<LockState | undefined> {
    const out = await this.run([
      'ls-tree',
      '-z',
      commit,
      '--',
      lockPath(pool, 'claimed', name),
      lockPath(pool, 'unclaimed', name),
    ]);
    for (const entry of out.split('\0')) {
      const path = entry.slice(entry.indexOf('\t') + 1);
      if (path === lockPath(pool, 'claimed', name)) return 'claimed';
      if (path === lockPath(pool, 'unclaimed', name)) return 'unclaimed';
    }
    return undefined;
  }

  async touchedSince(commit: string, path: string): Promise<boolean> {
    return (
      (await this.run(['rev-list', '-n1', `${commit}..${this.trackingRef}`, '--', path])).trim() !==
      ''
    );
  }

  /** Writes the file as it is at `commit` into the working copy (byte for byte) and returns its path. */
  async materialise(commit: string, path: string): Promise<string> {
    await this.run(['checkout', '--quiet', commit, '--', path]);
    return join(this.workdir, path);
  }
}
