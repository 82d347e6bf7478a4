// A bare, shallow copy of the branch's recent history for `in` and `check`: a window of commits
// from the tip, fetched in one connection and deepened only when the question reaches past it.
// The oldest commits of a shallow window have no parents here, so they seem to add every file:
// answers never rest on them (the window is deepened instead).
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { OperationError } from '../base/errors.js';
import type { KeptSession } from '../git/daemon-session.js';
import type { PackSource } from '../git/session-pack.js';
import type { Git } from '../git/git.js';
import { lockPath, type LockState } from '../lock/pool-state.js';
import { BranchCopy } from './branch-copy.js';
import {
  CHANGE_LOG_FORMAT,
  isRegularFile,
  lockAtPath,
  objectType,
  parseChangeLog,
  parseHolderLog,
  parseRawLog,
  parseTree,
  type ChangeLogRecord,
  type RawChange,
} from './git-output.js';
import {
  claimFromTrailers,
  renewalLogArgs,
  renewedLeases,
  trailerValues,
} from './claim-trailers.js';
import { changesBelow } from './commit-diff.js';
import { renewalLog } from './fetched-log.js';
import { FetchedObjects } from './fetched-objects.js';

/** How much wider each deepening makes the window. */
const DEEPEN_FACTOR = 4;

/** The claim a commit made (claimOf). */
export interface CommitClaim {
  token?: string;
  /** The lease as last renewed up to the tip. */
  leaseExpires?: Date;
  /** The commit's trailers, one a line, when its subject is a claim's or a renewal's. */
  trailers?: string;
}

export interface LockAtCommit {
  /** The commit that last changed the lock, at or before the asked one. */
  commit: string;
  name: string;
}

/** Where a lock sits at a commit, and its file's object id there (lockAt). */
export interface LockFile {
  state: LockState;
  blob: string;
  regular: boolean;
}

/** Which of the pool's commits a filtered `check` reports (see pool-events.ts). */
export type CommitTest = (record: ChangeLogRecord) => boolean;

export class BranchHistory {
  private depth = 0;
  private readonly copy: BranchCopy;
  /** What the copy fetched itself (its first fetch, on a kept session or connection), parsed. */
  private readonly fetched = new FetchedObjects();
  /** What the commit lockCommitAt found last changed, as its log printed it. */
  private lockCommitChanges: { commit: string; changes: RawChange[] } | undefined;

  constructor(
    git: Git,
    /** The bare repository (kept between runs by `check`, private to the run otherwise). */
    private readonly gitDir: string,
    uri: string,
    private readonly branch: string,
    /**
     * `scratch`: the copy goes with the run (see BranchCopyOptions.scratch); `session`: a git://
     * repository's kept session, which takes the first fetch (see BranchCopyOptions.session);
     * `packs`: over HTTP(S), the kept connection that does (BranchCopyOptions.packs).
     */
    {
      scratch = false,
      session,
      packs,
    }: { scratch?: boolean; session?: KeptSession; packs?: PackSource } = {},
  ) {
    this.copy = new BranchCopy(git, {
      uri,
      branch,
      gitDir,
      scratch,
      session,
      packs,
      fetched: this.fetched,
    });
  }

  /** How many commits from the tip the copy holds, as last fetched. */
  get window(): number {
    return this.depth;
  }

  /** The branch tip as last fetched. */
  get tip(): string {
    return this.copy.tip;
  }

  run(args: readonly string[]): Promise<string> {
    return this.copy.run(args);
  }

  /** Fetches `depth` commits from the branch tip (objects already here are not sent again). */
  async fetch(depth: number): Promise<void> {
    this.depth = depth;
    if (await this.copy.exists()) await this.copy.fetch(depth);
    else await this.copy.clone(depth);
  }

  /** Widens the window; false when it already holds the whole history. */
  async deepen(): Promise<boolean> {
    const more = this.depth * (DEEPEN_FACTOR - 1);
    if (!(await this.copy.deepen(more))) return false;
    this.depth += more;
    return true;
  }

  /** Commits whose parents were cut off by the window (empty when the history is complete). */
  shallowCommits(): Promise<Set<string>> {
    return this.copy.shallowCommits();
  }

  /**
   * The full id of `version` (a full or abbreviated commit id) when it is on the branch inside
   * the window, with its parents: `undefined` when the window does not reach it (yet).
   */
  async findInWindow(version: string): Promise<string | undefined> {
    const wanted = version.toLowerCase();
    // A put's implicit get asks about the tip it just made: no need to list the window.
    if (this.tip.startsWith(wanted) && !(await this.shallowCommits()).has(this.tip))
      return this.tip;
    const out = await this.run(['rev-list', this.tip, '--']);
    const matches = out.split('\n').filter((sha) => sha !== '' && sha.startsWith(wanted));
    if (matches.length > 1)
      throw new OperationError(`version ${version} is ambiguous: use the full commit id`);
    const found = matches[0];
    if (found === undefined || (await this.shallowCommits()).has(found)) return undefined;
    return found;
  }

  /** `version` on the branch, deepening the window until it is inside; fails when it is not there. */
  async resolveOnBranch(version: string): Promise<string> {
    for (;;) {
      const found = await this.findInWindow(version);
      if (found) return found;
      if (!(await this.deepen())) break;
    }
    throw new OperationError(`version ${version} is not a commit on branch "${this.branch}"`);
  }

  /** The newest commit at or before `commit` that changed a lock of `pool`, and that lock's name. */
  async lockCommitAt(commit: string, pool: string): Promise<LockAtCommit | undefined> {
    let shallow = await this.shallowCommits();
    // What the copy fetched itself tells it without git where `commit` changed a lock.
    const kept = shallow.has(commit) ? undefined : changesBelow(this.fetched, commit, pool);
    const found = kept && this.lockChangedIn(commit, kept, pool);
    if (found) return found;
    for (;;) {
      // --raw rather than --name-only: what each path holds after the commit comes with it, so
      // lockAt on that commit needs no ls-tree.
      const log = await this.run([
        'log',
        '-z',
        '--no-renames',
        '--raw',
        '--no-abbrev',
        '--format=%x01%H',
        commit,
        '--',
        `${pool}/`,
      ]);
      for (const { commit: sha, changes } of parseRawLog(log)) {
        if (shallow.has(sha)) break;
        const lock = this.lockChangedIn(sha, changes, pool);
        if (lock) return lock;
      }
      if (!(await this.deepen())) return undefined;
      shallow = await this.shallowCommits();
    }
  }

  /** The first lock of `pool` among the `changes` of `commit`, noted for lockAt. */
  private lockChangedIn(
    commit: string,
    changes: RawChange[],
    pool: string,
  ): LockAtCommit | undefined {
    for (const { path } of changes) {
      const lock = lockAtPath(pool, path);
      if (!lock) continue;
      this.lockCommitChanges = { commit, changes };
      return { commit, name: lock.name };
    }
    return undefined;
  }

  /** Where the lock sits at `commit`, and its file's object id there. */
  async lockAt(commit: string, pool: string, name: string): Promise<LockFile | undefined> {
    const changed = this.changedLockAt(commit, pool, name);
    if (changed !== 'unknown') return changed;
    const out = await this.run([
      'ls-tree',
      '-z',
      commit,
      '--',
      lockPath(pool, 'claimed', name),
      lockPath(pool, 'unclaimed', name),
    ]);
    for (const entry of parseTree(out)) {
      const { id: blob, path } = entry;
      // A symlink or a folder is not a lock file: its "content" must never be written out.
      const regular = isRegularFile(entry);
      if (path === lockPath(pool, 'claimed', name)) return { state: 'claimed', blob, regular };
      if (path === lockPath(pool, 'unclaimed', name)) return { state: 'unclaimed', blob, regular };
    }
    return undefined;
  }

  /**
   * lockAt answered from what the commit lockCommitAt found changed, where that settles it: as
   * ls-tree lists the claimed file before the unclaimed one, a claimed file the commit wrote is
   * the answer, and one it deleted leaves the unclaimed file's change to say. 'unknown' where
   * the commit did not touch what decides (ls-tree is asked then).
   */
  private changedLockAt(
    commit: string,
    pool: string,
    name: string,
  ): LockFile | undefined | 'unknown' {
    if (this.lockCommitChanges?.commit !== commit) return 'unknown';
    const { changes } = this.lockCommitChanges;
    const claimed = lockPath(pool, 'claimed', name);
    const unclaimed = lockPath(pool, 'unclaimed', name);
    // A lock file that became a folder, or a folder that became one, shows as the files inside.
    if (
      changes.some(({ path }) => path.startsWith(`${claimed}/`) || path.startsWith(`${unclaimed}/`))
    )
      return 'unknown';
    const file = (state: LockState, { mode, id }: RawChange): LockFile => ({
      state,
      blob: id,
      regular: isRegularFile({ mode, type: objectType(mode) }),
    });
    const claimedChange = changes.find(({ path }) => path === claimed);
    if (!claimedChange) return 'unknown';
    if (claimedChange.status !== 'D') return file('claimed', claimedChange);
    const unclaimedChange = changes.find(({ path }) => path === unclaimed);
    if (!unclaimedChange) return 'unknown';
    return unclaimedChange.status === 'D' ? undefined : file('unclaimed', unclaimedChange);
  }

  /** Whether a commit after `commit` (up to the tip) touched `path`. */
  async touchedSince(commit: string, path: string): Promise<boolean> {
    // Nothing comes after the tip (the commit `in` is asked about right after a put).
    if (commit === this.tip) return false;
    // --count always prints (see fetch), and answers in one quick command.
    const count = await this.run(['rev-list', '--count', `${commit}..${this.tip}`, '--', path]);
    return count.trim() !== '0';
  }

  /**
   * The claim `commit` made on lock `name`: its token, and its lease as last renewed up to the
   * tip (SPEC §10). The window holds `commit`, so it holds every renewal after it.
   */
  async claimOf(commit: string, name: string): Promise<CommitClaim> {
    // One command for the claim and its renewals; its parents are in the window, as `commit` is
    // not cut off. Read from what the copy fetched, where it holds those commits.
    const kept = renewalLog(this.fetched, this.tip, await this.shallowCommits(), commit);
    const log =
      kept ?? parseHolderLog(await this.run(renewalLogArgs([this.tip, '--not', `${commit}^@`])));
    const trailers = log.find((record) => record.commit === commit)?.trailers;
    const claim = { ...claimFromTrailers(trailers ?? ''), trailers };
    if (claim.token === undefined) return claim;
    const renewal = { name, token: claim.token };
    const renewed = renewedLeases(log, [renewal]);
    return { ...claim, leaseExpires: renewed.get(renewal) ?? claim.leaseExpires };
  }

  /**
   * The values of `key`'s trailers in `commit`'s message, in order. `known`: that commit's
   * trailers as a log of it printed them (`%(trailers:only,unfold)`), read instead of asking git.
   */
  async trailers(commit: string, key: string, known?: string): Promise<string[]> {
    if (known !== undefined) return trailerValues(known, key).filter((value) => value !== '');
    // `=` first: the command prints even when the commit has no such trailer (see fetch).
    const out = await this.run([
      'show',
      '--no-patch',
      `--format==%(trailers:key=${key},valueonly,separator=%x00)`,
      commit,
    ]);
    return out
      .slice(1)
      .replace(/\n$/, '')
      .split('\0')
      .map((value) => value.trim())
      .filter((value) => value !== '');
  }

  /** Writes a blob's bytes, exactly, to `target`. */
  async writeBlob(blob: string, target: string): Promise<void> {
    const kept = this.fetched.blob(blob);
    if (kept) return writeFile(target, kept);
    // unpack-file writes the blob to a temporary file in the repository and prints its name.
    const temporary = join(this.gitDir, (await this.run(['unpack-file', blob])).trim());
    try {
      // Not copyFile: unpack-file's file is private (0600, mkstemp) and a copy keeps its mode. A
      // task running as another user reads the metadata as it reads `name`, with the umask's mode.
      await writeFile(target, await readFile(temporary));
    } finally {
      await rm(temporary, { force: true });
    }
  }

  /**
   * The commits that touched `pool/`, oldest first: from `version` (inclusive) to the tip, or
   * only the latest one when there is no version or it is not on the branch.
   */
  async poolCommits(pool: string, version: string | undefined): Promise<string[]> {
    let from: string | undefined;
    if (version) {
      for (;;) {
        from = await this.findInWindow(version);
        if (from || !(await this.deepen())) break;
      }
    }
    for (;;) {
      const shallow = await this.shallowCommits();
      const range = from ? ['--reverse', this.tip, '--not', `${from}^@`] : ['-1', this.tip];
      const out = await this.run(['log', '--format=%H', ...range, '--', `${pool}/`]);
      const commits = out.split('\n').filter(Boolean);
      // A window's cut-off commits seem to add every file: such an answer needs a wider window.
      // From a version inside the window the range ends there; the latest one needs finding.
      const cut = commits.some((commit) => shallow.has(commit));
      const complete = shallow.size === 0 || (!cut && (from !== undefined || commits.length > 0));
      if (complete) return commits;
      if (!(await this.deepen())) return commits;
    }
  }

  /**
   * `version` on the branch, deepening the window until it is inside; undefined when it is not
   * there.
   */
  async findOnBranch(version: string): Promise<string | undefined> {
    for (;;) {
      const found = await this.findInWindow(version);
      if (found || !(await this.deepen())) return found;
    }
  }

  /**
   * The commits from `from` (inclusive, a commit on the branch) to the tip that `matches` lets
   * through, oldest first.
   */
  matchingFrom(pool: string, matches: CommitTest, from: string): Promise<string[]> {
    return this.matchingAfter(pool, matches, ['--not', `${from}^@`]);
  }

  /**
   * The commits after `since` up to the tip that `matches` lets through, oldest first; undefined
   * when `since` is not (any more) on the branch.
   */
  async matchingSince(
    pool: string,
    matches: CommitTest,
    since: string,
  ): Promise<string[] | undefined> {
    const from = await this.findOnBranch(since);
    if (from === undefined) return undefined;
    if (from === this.tip) return [];
    return this.matchingAfter(pool, matches, ['--not', from]);
  }

  /** The newest commit that `matches` lets through; the window may have to reach the root commit. */
  async latestMatching(pool: string, matches: CommitTest): Promise<string | undefined> {
    for (;;) {
      const shallow = await this.shallowCommits();
      const records = await this.changeLog(pool, [this.tip]);
      // Newest first. A cut-off commit seems to add every file: what it really did, and all
      // before it, needs a wider window.
      const found = records.find((record) => shallow.has(record.commit) || matches(record));
      if (found && !shallow.has(found.commit)) return found.commit;
      if ((!found && shallow.size === 0) || !(await this.deepen()))
        return records.find(matches)?.commit;
    }
  }

  /** The commits from the tip back to `bound` (git log's `--not …`) that `matches` lets through. */
  private async matchingAfter(
    pool: string,
    matches: CommitTest,
    bound: readonly string[],
  ): Promise<string[]> {
    for (;;) {
      const shallow = await this.shallowCommits();
      const records = await this.changeLog(pool, ['--reverse', this.tip, ...bound]);
      const cut = records.some(({ commit }) => shallow.has(commit));
      if (!cut || !(await this.deepen()))
        return records.filter(matches).map(({ commit }) => commit);
    }
  }

  /** What each commit in `range` changed under `pool/`, with its reclaim trailer: one git log. */
  private async changeLog(pool: string, range: readonly string[]): Promise<ChangeLogRecord[]> {
    const out = await this.run([
      'log',
      '-z',
      '--no-renames',
      '--name-status',
      `--format=${CHANGE_LOG_FORMAT}`,
      ...range,
      '--',
      `${pool}/`,
    ]);
    return parseChangeLog(out);
  }
}
