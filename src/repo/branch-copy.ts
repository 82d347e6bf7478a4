// The bare, shallow copy of the branch every reader of the lock repository works on: creating it,
// fetching the tip (one connection), deepening it, its shallow boundary, and the one way to say
// that the branch does not exist. simple-git waits 50 ms after any command that printed nothing,
// so the commands here all print (`fetch --verbose`).
import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CancelledError, GitCommandError, OperationError } from '../base/errors.js';
import { displayUri } from '../base/logger.js';
import type { Git, GitRunOptions } from '../git/git.js';
import type { KeptSession } from '../git/daemon-session.js';
import { unpack, writeLooseObjects, writePack, type PackedObject } from '../git/pack-objects.js';
import type { PackSource } from '../git/session-pack.js';
import { readRef, writeRef } from '../git/refs.js';
import type { FetchedObjects } from './fetched-objects.js';
import { parseFetchHead, parseLsRemote, parseShallow, type RemoteRef } from './git-output.js';

export interface BranchCopyOptions {
  uri: string;
  branch: string;
  /** The bare repository's folder (created if missing). */
  gitDir: string;
  /**
   * The copy goes with the run (it lives in the run's private folder): git need not sync what it
   * writes to disk, and each fetch keeps what it brings as a pack (see `fetchConfig`).
   */
  scratch?: boolean;
  /** Whether the run asks for commits by their id (fetchCommit); never when unset. */
  byId?: FetchById;
  /** A git:// repository's kept session, where fetches go when it can take them. */
  session?: KeptSession;
  /** Over HTTP(S) and SSH, the kept connection a commit's pack is asked on (git/kept-refs.ts). */
  packs?: PackSource;
  /** Where the commits and trees the copy fetched itself (unpackFromSession) are kept parsed. */
  fetched?: FetchedObjects;
}

/**
 * Whether a run asks the lock repository for commits by their id (BranchCopy.fetchCommit): where
 * git speaks protocol v2 to it, until the server refuses one. The run's copies share it, so one
 * refusal ends it for all of them.
 */
export class FetchById {
  private refused = false;

  constructor(private readonly allowed: boolean) {}

  get usable(): boolean {
    return this.allowed && !this.refused;
  }

  refuse(): void {
    this.refused = true;
  }
}

/**
 * For a copy that goes with the run: git >= 2.36 syncs every pack and its index to disk (1-5 ms
 * each measured here); older versions ignore the key.
 */
const NO_SYNC = [['core.fsync', 'none']] as const;

/** How far a fetch reaches: `depth` commits from the tip, the whole history, or only what is new. */
export type Reach = number | 'all' | 'since';

export class BranchCopy {
  private fetchedTip: string | undefined;
  /** The depth last fetched, counted from the tip: unknown after a fetch of what is new. */
  private knownDepth: number | undefined;

  constructor(
    private readonly git: Git,
    readonly options: BranchCopyOptions,
  ) {}

  get branchRef(): string {
    return `refs/heads/${this.options.branch}`;
  }

  private get trackingRef(): string {
    return `refs/remotes/origin/${this.options.branch}`;
  }

  /** The branch tip as last fetched. */
  get tip(): string {
    if (this.fetchedTip === undefined) throw new Error('the branch was never fetched');
    return this.fetchedTip;
  }

  /** The tip as last fetched, or undefined before the first fetch. */
  get fetched(): string | undefined {
    return this.fetchedTip;
  }

  /** A git command in the copy. */
  run(args: readonly string[], options: Omit<GitRunOptions, 'cwd'> = {}) {
    return this.git.run(args, {
      cwd: this.options.gitDir,
      session: this.options.session,
      ...options,
    });
  }

  /** Whether the copy is on disk (kept between runs by `check`). */
  async exists(): Promise<boolean> {
    return stat(join(this.options.gitDir, 'HEAD')).then(
      () => true,
      () => false,
    );
  }

  /**
   * A new copy with `depth` commits of the branch: asked on the kept session or connection and
   * written here (firstFromSession), else one process creates it and fetches.
   */
  async clone(depth: number): Promise<void> {
    if (this.options.scratch && this.packSource?.firstPack) {
      await this.init();
      if (await this.firstFromSession(depth, [])) return;
    }
    await this.empty();
    await this.branchMustExist(() =>
      this.git.run(
        [
          'clone',
          '--bare',
          `--depth=${depth}`,
          '--single-branch',
          '--no-tags',
          `--branch=${this.options.branch}`,
          '--',
          this.options.uri,
          this.options.gitDir,
        ],
        { config: this.options.scratch ? NO_SYNC : [], session: this.options.session },
      ),
    );
    this.knownDepth = depth;
    this.fetchedTip =
      (await readRef(this.options.gitDir, this.branchRef)) ??
      (await this.run(['rev-parse', '--verify', `${this.branchRef}^{commit}`])).trim();
  }

  /**
   * A new, empty copy, for a first fetch that needs more refspecs than clone can take. Written
   * here rather than by `git init --bare`, a process before the fetch can start: a bare
   * repository is HEAD, objects/, refs/ and its config (git's setup.c, is_git_directory), which is
   * all `git init --bare` writes that git reads back (the rest is hooks, a description and
   * info/exclude, unused in a bare copy). The hash is git's default, SHA-1, as `init` would pick.
   */
  async init(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) throw new CancelledError(signal.reason);
    await this.empty();
    const { gitDir } = this.options;
    await Promise.all([
      mkdir(join(gitDir, 'objects', 'pack'), { recursive: true }),
      mkdir(join(gitDir, 'refs', 'heads'), { recursive: true }),
      writeFile(join(gitDir, 'HEAD'), 'ref: refs/heads/main\n'),
      writeFile(
        join(gitDir, 'config'),
        '[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n',
      ),
    ]);
  }

  private async empty(): Promise<void> {
    await rm(this.options.gitDir, { recursive: true, force: true });
    await mkdir(this.options.gitDir, { recursive: true });
  }

  /**
   * Fetches the branch tip (and `refspecs` beside it) in one connection; returns the other refs
   * the fetch matched, from FETCH_HEAD. A `depth` counts from the tip as it is now, so the
   * history stays contiguous even when the branch moved (or was force-pushed) since.
   */
  async fetch(
    reach: Reach,
    options: { refspecs?: readonly string[]; signal?: AbortSignal } = {},
  ): Promise<RemoteRef[]> {
    if (this.fetchedTip === undefined && typeof reach === 'number') {
      const refs = await this.firstFromSession(reach, options.refspecs ?? [], options.signal);
      if (refs) return refs;
    }
    const config = this.fetchConfig();
    await this.branchMustExist(
      () =>
        this.run(
          this.fetchArgs(reach, [
            `+${this.branchRef}:${this.trackingRef}`,
            ...(options.refspecs ?? []),
          ]),
          { signal: options.signal, config },
        ),
      options.signal,
    );
    const { tip, refs } = parseFetchHead(
      await readFile(join(this.options.gitDir, 'FETCH_HEAD'), 'utf8'),
    );
    if (!tip) throw new Error(`git fetch wrote no FETCH_HEAD for ${this.branchRef}`);
    this.fetchedTip = tip;
    this.knownDepth = typeof reach === 'number' ? reach : undefined;
    return refs;
  }

  /**
   * Fetches the commit `id` as the branch tip (one a look has just seen there), as far as `reach`
   * says. Asked for by its id, with no ref of the remote to match, git does not list the remote's
   * refs first (protocol v2): one round trip, and one upload-pack on the server, less than
   * `fetch`. False, having fetched nothing, where the run asks nothing by id (options.byId), or
   * where the server refuses it (protocol v0 serves only the tips it has just advertised; a
   * commit it no longer has): the run asks nothing by id from then on, and the caller fetches the
   * branch instead.
   */
  async fetchCommit(id: string, reach: Reach, signal?: AbortSignal): Promise<boolean> {
    const { byId, session } = this.options;
    // A kept session takes any commit by its id (daemon-session.ts).
    const kept = session?.usable ?? false;
    if (!byId?.usable && !kept) return false;
    if (reach === 'since' && (await this.unpackFromSession(id, signal))) return true;
    try {
      await this.fetchTip(this.options.uri, id, reach, signal);
    } catch (error) {
      if (!(error instanceof GitCommandError) || signal?.aborted) throw error;
      if (kept) session?.close();
      else byId?.refuse();
      return false;
    }
    return true;
  }

  /**
   * Fetches the commit `id` as the branch tip from another copy of the branch on this machine
   * (`gitDir`, where `id` is a ref's tip), as far as `reach` says: nothing asked of the server.
   */
  fetchLocal(gitDir: string, id: string, reach: Reach, signal?: AbortSignal): Promise<void> {
    return this.fetchTip(gitDir, id, reach, signal);
  }

  /** Where the run asks for packs itself: the kept git:// session, else the kept connection. */
  private get packSource(): PackSource | undefined {
    const { session, packs } = this.options;
    return session?.usable ? session : packs?.usable ? packs : undefined;
  }

  /**
   * The copy's first fetch (`depth` commits of the branch, and the refs `refspecs` name), asked on
   * the kept git:// session or HTTP(S) connection (an ls-refs, then a fetch) and written
   * here: no process, where git's clone or fetch starts four (session-pack.ts). Only into an empty
   * copy that goes with the run; the refs it read beside the branch, or undefined where it cannot
   * (git fetches then: a branch the server does not have, a v0 server, a pack too large or one it
   * cannot read).
   */
  private async firstFromSession(
    depth: number,
    refspecs: readonly string[],
    signal?: AbortSignal,
  ): Promise<RemoteRef[] | undefined> {
    const { scratch, gitDir } = this.options;
    const source = this.packSource;
    if (!scratch || !source?.refs || !source.firstPack) return undefined;
    const patterns = refspecs.map(sourcePattern);
    if (patterns.some((pattern) => pattern === undefined)) return undefined;
    const prefixes = (patterns as string[]).map((pattern) => pattern.replace(/\*$/, ''));
    const refs = await source.refs([this.branchRef, ...prefixes], signal);
    const tip = refs?.find(({ ref }) => ref === this.branchRef)?.id;
    if (!refs || !tip) return undefined;
    const answer = await source.firstPack(tip, depth, signal);
    if (!answer) return undefined;
    let objects: PackedObject[];
    try {
      objects = unpack(answer.pack);
    } catch {
      return undefined;
    }
    await writePack(gitDir, objects);
    if (answer.shallow.length > 0)
      await writeFile(join(gitDir, 'shallow'), answer.shallow.map((id) => `${id}\n`).join(''));
    // Where clone and fetch put the tip: the branch (HEAD names it) and its tracking ref.
    await Promise.all([
      writeRef(gitDir, this.branchRef, tip),
      writeRef(gitDir, this.trackingRef, tip),
      writeFile(join(gitDir, 'HEAD'), `ref: ${this.branchRef}\n`),
    ]);
    // The newest last: the tip's folders are the ones kept should there be more than are kept.
    this.options.fetched?.learn(objects.toReversed());
    this.fetchedTip = tip;
    this.knownDepth = depth;
    return refs.filter(({ ref }) => ref !== this.branchRef && matchesAny(ref, patterns));
  }

  /**
   * Brings the commits since the tip fetched last up to `id`, asked on the kept session (or the
   * kept HTTP(S) or SSH connection) and written here (pack-objects.ts): no process, where git's
   * fetch starts four (session-pack.ts). False where it cannot tell (the caller fetches with git).
   */
  private async unpackFromSession(id: string, signal?: AbortSignal): Promise<boolean> {
    const { gitDir } = this.options;
    const since = this.fetchedTip;
    const source = this.packSource;
    if (!source || since === undefined) return false;
    const pack = await source.pack(id, [since], signal);
    if (!pack) return false;
    let objects: PackedObject[];
    try {
      objects = unpack(pack);
    } catch {
      // A pack it cannot read whole (its checksum, a delta): git fetches the commit instead.
      return false;
    }
    // A copy that goes with the run keeps them as a pack: two files to remove at its end.
    await (this.options.scratch ? writePack : writeLooseObjects)(gitDir, objects);
    this.options.fetched?.learn(objects);
    await writeRef(gitDir, this.trackingRef, id);
    this.fetchedTip = id;
    this.knownDepth = undefined;
    return true;
  }

  /** Fetches the commit `id` from `from` as the branch tip, as far as `reach` says. */
  private async fetchTip(from: string, id: string, reach: Reach, signal?: AbortSignal) {
    await this.run(this.fetchArgs(reach, [`+${id}:${this.trackingRef}`], from), {
      signal,
      config: this.fetchConfig(),
    });
    this.fetchedTip = id;
    this.knownDepth = typeof reach === 'number' ? reach : undefined;
  }

  /**
   * git's settings for a fetch into a copy that goes with the run: what it brings is kept as a
   * pack. As loose objects (git's choice below 100) that is a file and often a folder each, which
   * the run then spends as long removing as git writing (from the server, or from the put's own
   * copy into the holders' copy); a pack is two files, however many objects.
   */
  private fetchConfig(): (readonly [string, string])[] {
    if (!this.options.scratch) return [];
    return [...NO_SYNC, ['fetch.unpackLimit', '1']];
  }

  /** `git fetch` of `refspecs` from the lock repository (or `from`), as far as `reach` says. */
  private fetchArgs(reach: Reach, refspecs: readonly string[], from = this.options.uri): string[] {
    return [
      'fetch',
      '--verbose',
      '--no-tags',
      '--no-show-forced-updates',
      ...(reach === 'since' ? [] : reach === 'all' ? ['--unshallow'] : [`--depth=${reach}`]),
      '--',
      from,
      ...refspecs,
    ];
  }

  /**
   * Fetches `more` commits beyond those already here (at most `atMost` from the tip), or the
   * whole history; returns what `fetch` does, or undefined (and fetches nothing) when the copy
   * already holds the whole history or `atMost` commits.
   *
   * Always an absolute --depth, counted from the tip being fetched, never --deepen: --deepen
   * (deepen-relative) counts from the copy's old shallow boundary, which a moved or force-pushed
   * branch leaves anywhere, while --depth names the window from the tip whatever the copy held;
   * and git 2.39's --deepen was seen to stop deepening after a long run of commits sharing one
   * timestamp (~170 commits, as a busy lock branch makes them), which --depth never did.
   */
  async deepen(
    more: number | 'all',
    options: { refspecs?: readonly string[]; signal?: AbortSignal; atMost?: number } = {},
  ): Promise<RemoteRef[] | undefined> {
    if ((await this.shallowCommits()).size === 0) return undefined;
    if (more === 'all') return this.fetch('all', options);
    const here = await this.depth(options.signal);
    const depth = Math.min(here + more, options.atMost ?? Infinity);
    if (depth <= here) return undefined;
    return this.fetch(depth, options);
  }

  /**
   * How many commits from the tip the copy holds: the depth last fetched, else (after a fetch of
   * what is new, which adds to it) counted.
   */
  async depth(signal?: AbortSignal): Promise<number> {
    this.knownDepth ??= Number(
      (await this.run(['rev-list', '--count', this.tip], { signal })).trim(),
    );
    return this.knownDepth;
  }

  /**
   * Whether `commit` is in the history of `of`; false too when `commit` is unknown here (not
   * fetched yet, or never on this branch).
   */
  async isAncestor(commit: string, of: string): Promise<boolean> {
    try {
      await this.run(['merge-base', '--is-ancestor', commit, of]);
      return true;
    } catch (error) {
      if (error instanceof GitCommandError) return false;
      throw error;
    }
  }

  /** Commits whose parents were cut off (empty when the history is complete). */
  async shallowCommits(): Promise<Set<string>> {
    try {
      return parseShallow(await readFile(join(this.options.gitDir, 'shallow'), 'utf8'));
    } catch {
      return new Set();
    }
  }

  /** The remote refs matching `patterns`, without fetching: one ls-remote, needs no copy. */
  async remoteRefs(patterns: readonly string[], signal?: AbortSignal): Promise<RemoteRef[]> {
    return parseLsRemote(
      await this.git.run(['ls-remote', '--', this.options.uri, ...patterns], { signal }),
    );
  }

  /**
   * Runs `fetch`; when git fails, asks the remote whether the branch is there, to say so instead.
   * When the server cannot be reached either, the fetch's own message is the one to report.
   */
  private async branchMustExist<T>(fetch: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    try {
      return await fetch();
    } catch (error) {
      if (!(error instanceof GitCommandError)) throw error;
      const refs = await this.remoteRefs([this.branchRef], signal).catch(() => undefined);
      if (refs && !refs.some(({ ref }) => ref === this.branchRef))
        throw new OperationError(
          `branch "${this.options.branch}" does not exist in ${displayUri(this.options.uri)}`,
        );
      throw error;
    }
  }
}

/**
 * The refs a fetch refspec's source names, as an ls-refs prefix (`[+]<src>*:<dst>*`, or one ref):
 * undefined for a refspec that names no ref.
 */
function sourcePattern(refspec: string): string | undefined {
  const source = refspec.replace(/^\+/, '').split(':')[0] ?? '';
  if (!source.startsWith('refs/')) return undefined;
  return source;
}

/** Whether `ref` is one of `patterns` (a pattern ending in `*` names every ref it starts). */
function matchesAny(ref: string, patterns: readonly (string | undefined)[]): boolean {
  return patterns.some((pattern) =>
    pattern?.endsWith('*') ? ref.startsWith(pattern.slice(0, -1)) : ref === pattern,
  );
}
