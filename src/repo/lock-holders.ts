// Who holds each lock and since when, read from the commit that put the lock where it is: the
// holder trailers of claiming commits, else (older commits) the `Build URL:` line or the author,
// and the commit's date. It keeps its own bare, shallow copy of the branch, fetched incrementally
// and deepened only as far as the answer needs, so `out`'s working copy is never touched.
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CancelledError, GitCommandError, OperationError, formatMs } from '../base/errors.js';
import { missingPoolError } from './missing-pool.js';
import { displayUri } from '../base/logger.js';
import type { Git } from '../git/git.js';
import { lockPath, type LockState } from '../lock/pool-state.js';

export interface LockRecord {
  name: string;
  state: LockState;
  /** Claimed-By, else the `Build URL:` line, else the commit's author; undefined when not found. */
  by?: string;
  /** When the lock entered its state: Claimed-At, else the commit's date. */
  since?: Date;
  /** The commit that put the lock in its state. */
  commit?: string;
}

export interface LockHoldersOptions {
  uri: string;
  branch: string;
  pool: string;
  /** Folder for the bare copy (created if missing). */
  gitDir: string;
  /** How many commits back a lookup may fetch; undefined means the whole history. */
  maxDepth?: number;
}

/** First fetch depth, then the deepening steps: most locks in use were taken recently. */
const FIRST_DEPTH = 16;
const DEEPEN_STEPS = [64, 256, 1024];
/** The `out` progress looks no further: 1360 commits of a lock branch are well under a megabyte. */
export const PROGRESS_MAX_DEPTH = FIRST_DEPTH + DEEPEN_STEPS.reduce((a, b) => a + b, 0);

const RECORD = '\x1e';
const FIELD = '\x1f';

export class LockHolders {
  private initialised = false;
  private fetched = false;
  private depth = 0;

  constructor(
    private readonly git: Git,
    private readonly options: LockHoldersOptions,
  ) {}

  private get trackingRef(): string {
    return `refs/remotes/origin/${this.options.branch}`;
  }

  private run(args: readonly string[], signal?: AbortSignal): Promise<string> {
    return this.git.run(args, { cwd: this.options.gitDir, signal });
  }

  /** Brings the copy up to the remote branch tip: shallow the first time, incremental after. */
  async refresh(signal?: AbortSignal): Promise<void> {
    if (!this.initialised) {
      await mkdir(this.options.gitDir, { recursive: true });
      await this.run(['init', '--quiet', '--bare'], signal);
      await this.run(['remote', 'add', 'origin', this.options.uri], signal);
      this.initialised = true;
    }
    const refspec = `+refs/heads/${this.options.branch}:${this.trackingRef}`;
    // Once shallow history is there, a plain fetch brings only the commits since, down to it.
    const depth = this.fetched ? [] : [`--depth=${FIRST_DEPTH}`];
    try {
      await this.run(['fetch', '--quiet', '--no-tags', ...depth, 'origin', refspec], signal);
    } catch (error) {
      if (error instanceof GitCommandError) {
        const heads = await this.run(
          ['ls-remote', '--', 'origin', `refs/heads/${this.options.branch}`],
          signal,
        );
        if (heads.trim() === '')
          throw new OperationError(
            `branch "${this.options.branch}" does not exist in ${displayUri(this.options.uri)}`,
          );
      }
      throw error;
    }
    this.fetched = true;
  }

  /** The pool's locks at the fetched tip, sorted by name. */
  async locks(signal?: AbortSignal): Promise<{ name: string; state: LockState }[]> {
    const { pool } = this.options;
    const out = await this.run(
      ['ls-tree', '-r', '-t', '-z', this.trackingRef, '--', `${pool}/`],
      signal,
    );
    const locks: { name: string; state: LockState }[] = [];
    const folders = new Set<string>();
    for (const entry of out.split('\0')) {
      if (!entry) continue;
      const tab = entry.indexOf('\t');
      const [mode, type] = entry.slice(0, tab).split(' ');
      const path = entry.slice(tab + 1);
      if (type === 'tree') folders.add(path);
      const match = /^(claimed|unclaimed)\/([^/]+)$/.exec(path.slice(pool.length + 1));
      if (!path.startsWith(`${pool}/`) || !match || type !== 'blob' || mode === '120000') continue;
      const [, state, name] = match as unknown as [string, LockState, string];
      if (!name.startsWith('.')) locks.push({ name, state });
    }
    if (!folders.has(`${pool}/claimed`) || !folders.has(`${pool}/unclaimed`))
      throw await missingPoolError(
        (args) => this.run(args, signal),
        this.trackingRef,
        pool,
        this.options.branch,
      );
    return locks.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /**
   * For each lock, the commit that put it in its current state and what that commit says about
   * who did it. Deepens the copy until every lock is found or `maxDepth` is reached.
   */
  async records(
    locks: readonly { name: string; state: LockState }[],
    signal?: AbortSignal,
  ): Promise<LockRecord[]> {
    const byPath = new Map(
      locks.map((lock) => [lockPath(this.options.pool, lock.state, lock.name), lock]),
    );
    const found = new Map<string, LockRecord>();
    let steps = 0;
    let lastVisible = 0;
    for (;;) {
      const pending = [...byPath.keys()].filter((path) => !found.has(path));
      if (pending.length === 0) break;
      const shallow = await this.shallowCommits();
      for (const [path, record] of await this.addingCommits(pending, shallow, signal)) {
        found.set(path, { ...byPath.get(path)!, ...record });
      }
      if (found.size === byPath.size || shallow.size === 0) break;
      // Counted rather than tracked: incremental fetches since the first one add to it.
      const visible = Number(
        (await this.run(['rev-list', '--count', this.trackingRef], signal)).trim(),
      );
      this.depth = visible;
      const { maxDepth } = this.options;
      if ((maxDepth !== undefined && visible >= maxDepth) || visible <= lastVisible) break;
      lastVisible = visible;
      const step = DEEPEN_STEPS[Math.min(steps, DEEPEN_STEPS.length - 1)]!;
      steps++;
      // An absolute --depth, not --deepen: git 2.39's `--deepen` (deepen-relative) stops
      // deepening after a long run of commits sharing one timestamp (seen at ~170 commits).
      const deepen =
        maxDepth === undefined && steps > DEEPEN_STEPS.length
          ? '--unshallow'
          : `--depth=${Math.min(visible + step, maxDepth ?? Infinity)}`;
      await this.run(
        [
          'fetch',
          '--quiet',
          '--no-tags',
          deepen,
          'origin',
          `+refs/heads/${this.options.branch}:${this.trackingRef}`,
        ],
        signal,
      );
    }
    return [...byPath.entries()].map(([path, lock]) => found.get(path) ?? { ...lock });
  }

  /** How far back the last lookup looked (for "not found in the last N commits"). */
  get searchedDepth(): number {
    return this.depth;
  }

  /**
   * The newest commit that added each path (`--no-renames`: a claim is a move, seen as an add).
   * A shallow copy's oldest commit seems to add every file, so it proves nothing.
   */
  private async addingCommits(
    paths: readonly string[],
    shallow: ReadonlySet<string>,
    signal?: AbortSignal,
  ): Promise<Map<string, Omit<LockRecord, 'name' | 'state'>>> {
    const format = [`${RECORD}%H`, '%at', '%an <%ae>', '%(trailers:only,unfold)', '%B', ''].join(
      FIELD,
    );
    const out = await this.run(
      [
        'log',
        '-z',
        '--no-renames',
        '--diff-filter=A',
        '--name-only',
        `--format=${format}`,
        this.trackingRef,
        '--',
        ...paths,
      ],
      signal,
    );
    const wanted = new Set(paths);
    const result = new Map<string, Omit<LockRecord, 'name' | 'state'>>();
    const settled = new Set<string>();
    for (const entry of out.split(RECORD).slice(1)) {
      const [commit = '', time = '', author = '', trailers = '', body = '', names = ''] =
        entry.split(FIELD);
      for (const raw of names.split('\0')) {
        const path = raw.trim();
        if (!wanted.has(path) || settled.has(path)) continue;
        settled.add(path);
        if (shallow.has(commit)) continue;
        result.set(path, {
          commit,
          ...holderFromCommit({
            trailers,
            body,
            author,
            authoredAt: new Date(Number(time) * 1000),
          }),
        });
      }
    }
    return result;
  }

  /** The shallow boundary: `shallow` in the bare copy's folder (absent once complete). */
  private async shallowCommits(): Promise<Set<string>> {
    try {
      const text = await readFile(join(this.options.gitDir, 'shallow'), 'utf8');
      return new Set(text.split('\n').filter(Boolean));
    } catch {
      return new Set();
    }
  }
}

export interface CommitFacts {
  /** `%(trailers:only,unfold)`: one `Key: value` per line. */
  trailers: string;
  /** The whole message. */
  body: string;
  /** `Name <email>` */
  author: string;
  /** The author date: what `git log` shows; for our own commits, the moment of the claim. */
  authoredAt: Date;
}

/** What a commit says about who made the change and when; claims first, then older habits. */
export function holderFromCommit(facts: CommitFacts): { by: string; since: Date } {
  const trailer = (key: string): string | undefined => {
    let value: string | undefined;
    for (const line of facts.trailers.split('\n')) {
      const colon = line.indexOf(':');
      if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === key.toLowerCase()) {
        value = line.slice(colon + 1).trim();
      }
    }
    return value;
  };
  const known = (value: string | undefined) =>
    value !== undefined && value !== '' && value !== 'unknown' ? value : undefined;
  const buildUrl = /^Build URL: (.*)$/m.exec(facts.body)?.[1]?.trim();
  const by = known(trailer('Claimed-By')) ?? known(buildUrl) ?? facts.author;
  const claimedAt = trailer('Claimed-At');
  const parsed = claimedAt ? new Date(claimedAt) : undefined;
  const since = parsed && !Number.isNaN(parsed.getTime()) ? parsed : facts.authoredAt;
  return { by, since };
}

/** `2026-11-29T17:50:00Z`: RFC 3339 in UTC, to the second. */
export function formatInstant(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** `by URL since 2026-…Z (for 12m30s)`, or that the claiming commit lies deeper than we looked. */
export function describeHolder(record: LockRecord, now: number, searchedDepth: number): string {
  if (!record.since || !record.by) return `holder not found in the last ${searchedDepth} commits`;
  const held = Math.max(0, now - record.since.getTime());
  return `by ${record.by} since ${formatInstant(record.since)} (for ${formatMs(held)})`;
}

/**
 * The holder lookup as `out`'s progress uses it: claimed locks only, bounded by its own time
 * budget so a slow server can delay a waiting line but never the wait itself by much.
 */
export class HolderLookup {
  constructor(
    private readonly holders: LockHolders,
    private readonly runSignal: AbortSignal,
    private readonly budgetMs: number,
  ) {}

  get searchedDepth(): number {
    return this.holders.searchedDepth;
  }

  async claimed(wanted: readonly string[]): Promise<LockRecord[]> {
    const signal = AbortSignal.any([this.runSignal, AbortSignal.timeout(this.budgetMs)]);
    try {
      await this.holders.refresh(signal);
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
): HolderLookup {
  const holders = new LockHolders(git, {
    uri: source.uri,
    branch: source.branch,
    pool: source.pool,
    gitDir: join(home, 'holders.git'),
    maxDepth: PROGRESS_MAX_DEPTH,
  });
  return new HolderLookup(holders, signal, Math.min(LOOKUP_BUDGET_MS, waitTimeoutMs ?? Infinity));
}
