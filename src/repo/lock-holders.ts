// Who holds each lock and since when, read from the commit that put the lock where it is (what
// it says is claim-trailers.ts's to read) and the commit's date. It keeps its own bare, shallow
// copy of the branch, fetched incrementally and deepened only as far as the answer needs, so
// `out`'s working copy is never touched.
import { GitCommandError, formatMs } from '../base/errors.js';
import { missingPoolError } from './missing-pool.js';
import type { Git } from '../git/git.js';
import { lockPath, type LockState } from '../lock/pool-state.js';
import { BranchCopy, type FetchById, type Reach } from './branch-copy.js';
import type { FetchedObjects } from './fetched-objects.js';
import { addingLog, renewalLog } from './fetched-log.js';
import {
  RECLAIMED_TOKEN,
  claimFromTrailers,
  firstLine,
  holderFromCommit,
  renewalLogArgs,
  renewedLeases,
  trailerOf,
} from './claim-trailers.js';
import {
  HOLDER_LOG_FORMAT,
  NOT_A_LOCK_NAME,
  isRegularFile,
  parseHolderLog,
  parseTree,
  poolEntriesOf,
  type TreeEntry,
} from './git-output.js';

export interface LockRecord {
  name: string;
  state: LockState;
  /** Claimed-By, else the `Build URL:` line, else the commit's author; undefined when not found. */
  by?: string;
  /** When the lock entered its state: Claimed-At, else the commit's date. */
  since?: Date;
  /** The commit that put the lock in its state. */
  commit?: string;
  /** A claimed lock's `Claim-Token` (SPEC §9): which put's claim it is. */
  token?: string;
  /**
   * When a claimed lock's lease runs out: the latest `Lease-Expires` recorded for its token (the
   * claiming commit's, or a later `renewing:` commit's). Undefined: the claim never expires.
   */
  leaseExpires?: Date;
  /** Why `out` does not count it as a lock (see PoolEntry). */
  problem?: string;
}

/** A file in a lock folder, as `pool status` lists it. */
export interface PoolEntry {
  name: string;
  state: LockState;
  /**
   * Set for a file whose name breaks the lock-name rules: `out` never takes or releases it, and
   * says why in the same words.
   */
  problem?: string;
}

export interface LockHoldersOptions {
  uri: string;
  branch: string;
  pool: string;
  /** Folder for the bare copy (created if missing). */
  gitDir: string;
  /** How many commits back a lookup may fetch; undefined means the whole history. */
  maxDepth?: number;
  /** Whether a tip given to `refresh` is fetched by its id; never when unset. */
  fetchById?: FetchById;
  /**
   * The put's own copy of the branch and the tip it holds, where that copy keeps every commit
   * since its first fetch (undefined elsewhere): a tip it holds is fetched from it (see refresh).
   */
  local?: () => { gitDir: string; tip: string | undefined } | undefined;
  /** The copy goes with the run (see BranchCopyOptions.scratch). */
  scratch?: boolean;
  /**
   * The pool at a tip as the put's own copy has it read already (LockRepository.poolRead), what
   * `ls-tree` would print of it; undefined where it has not.
   */
  poolAt?: (tip: string) => readonly TreeEntry[] | undefined;
  /**
   * What the copy (a put's working copy) fetched itself, parsed: the logs are read from it where
   * it holds the whole window (fetched-log.ts).
   */
  fetched?: FetchedObjects;
}

/** First fetch depth, then the deepening steps: most locks in use were taken recently. */
const FIRST_DEPTH = 16;
const DEEPEN_STEPS = [64, 256, 1024];
/** The `out` progress looks no further: 1360 commits of a lock branch are well under a megabyte. */
export const PROGRESS_MAX_DEPTH = FIRST_DEPTH + DEEPEN_STEPS.reduce((a, b) => a + b, 0);

export class LockHolders {
  private readonly copy: BranchCopy;
  private initialised = false;
  private depth = 0;

  constructor(
    git: Git,
    private readonly options: LockHoldersOptions,
    /** A copy that is already fetched (a put's working copy) instead of one of its own. */
    copy?: BranchCopy,
  ) {
    this.copy =
      copy ??
      new BranchCopy(git, {
        uri: options.uri,
        branch: options.branch,
        gitDir: options.gitDir,
        byId: options.fetchById,
        scratch: options.scratch,
      });
  }

  private run(args: readonly string[], signal?: AbortSignal): Promise<string> {
    return this.copy.run(args, { signal });
  }

  /**
   * Brings the copy up to the remote branch tip, or to `tip` (a branch tip the caller has seen)
   * when given: shallow the first time, incremental after. A copy already at `tip` fetches
   * nothing; a `tip` the put's own copy holds (options.local) comes from there, without a
   * connection to the server; where fetchById allows, `tip` is asked for by its id, without
   * listing the remote's refs (the branch is fetched instead, and from then on, once the server
   * refused one).
   */
  async refresh(signal?: AbortSignal, tip?: string): Promise<void> {
    if (!this.initialised) {
      await this.copy.init(signal);
      this.initialised = true;
    }
    if (tip !== undefined && tip === this.copy.fetched) return;
    // Once shallow history is there, a plain fetch brings only the commits since, down to it.
    const reach = this.copy.fetched === undefined ? FIRST_DEPTH : 'since';
    if (tip !== undefined && (await this.fetchLocally(tip, reach, signal))) return;
    if (tip !== undefined && (await this.copy.fetchCommit(tip, reach, signal))) return;
    await this.copy.fetch(reach, { signal });
  }

  /**
   * Fetches `tip` as far as `reach` says from the put's own copy when that is at `tip`; false,
   * having fetched nothing, where it is not or git refuses (a history this copy cannot join to).
   */
  private async fetchLocally(tip: string, reach: Reach, signal?: AbortSignal): Promise<boolean> {
    const local = this.options.local?.();
    if (local?.tip !== tip) return false;
    try {
      await this.copy.fetchLocal(local.gitDir, tip, reach, signal);
      return true;
    } catch (error) {
      if (!(error instanceof GitCommandError) || signal?.aborted) throw error;
      return false;
    }
  }

  /**
   * The pool's lock files at the fetched tip (regular files: not a directory, not a symlink),
   * sorted by name. The lock-name rules are `out`'s: a file whose name breaks them comes with
   * the `problem` `out` names it by.
   */
  async locks(signal?: AbortSignal): Promise<PoolEntry[]> {
    const { pool } = this.options;
    const tip = this.copy.tip;
    const entries =
      this.options.poolAt?.(tip) ??
      parseTree(await this.run(['ls-tree', '-r', '-t', '-z', tip, '--', `${pool}/`], signal));
    const { claimed, unclaimed, irregular, exists, byPath } = poolEntriesOf(entries, pool);
    if (!exists)
      throw await missingPoolError(
        (args) => this.run(args, signal),
        tip,
        pool,
        this.options.branch,
      );
    const locks: PoolEntry[] = [
      ...[...claimed].map((name) => ({ name, state: 'claimed' as const })),
      ...[...unclaimed].map((name) => ({ name, state: 'unclaimed' as const })),
    ];
    for (const state of ['claimed', 'unclaimed'] as const) {
      for (const [key, problem] of irregular) {
        const name = key.slice(state.length + 1);
        const entry = byPath.get(lockPath(pool, state, name));
        if (
          key.startsWith(`${state}/`) &&
          problem === NOT_A_LOCK_NAME &&
          entry &&
          isRegularFile(entry)
        )
          locks.push({ name, state, problem });
      }
    }
    return locks.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /**
   * For each lock, the commit that put it in its current state and what that commit says about
   * who did it. Deepens the copy until every lock is found or `maxDepth` is reached.
   */
  async records(locks: readonly PoolEntry[], signal?: AbortSignal): Promise<LockRecord[]> {
    const byPath = new Map(
      locks.map((lock) => [lockPath(this.options.pool, lock.state, lock.name), lock]),
    );
    const found = new Map<string, LockRecord>();
    let steps = 0;
    let lastVisible = 0;
    let shallow: ReadonlySet<string> = new Set();
    for (;;) {
      const pending = [...byPath.keys()].filter((path) => !found.has(path));
      if (pending.length === 0) break;
      shallow = await this.copy.shallowCommits();
      for (const [path, record] of await this.addingCommits(pending, shallow, signal)) {
        found.set(path, { ...byPath.get(path)!, ...record });
      }
      if (found.size === byPath.size || shallow.size === 0) break;
      const visible = await this.copy.depth(signal);
      this.depth = visible;
      const { maxDepth } = this.options;
      if ((maxDepth !== undefined && visible >= maxDepth) || visible <= lastVisible) break;
      lastVisible = visible;
      const step = DEEPEN_STEPS[Math.min(steps, DEEPEN_STEPS.length - 1)]!;
      steps++;
      const more = maxDepth === undefined && steps > DEEPEN_STEPS.length ? 'all' : step;
      if (!(await this.copy.deepen(more, { signal, atMost: maxDepth }))) break;
    }
    await this.renewLeases(found, shallow, signal);
    return [...byPath.entries()].map(([path, lock]) => found.get(path) ?? { ...lock });
  }

  /**
   * Moves each claim's lease to its latest renewal. A renewal is an empty `renewing: NAME` commit
   * carrying the claim's token (SPEC §10): it touches no file, so `git log -- path` never finds
   * it. It always comes after its claiming commit, which the copy holds, so the commits fetched
   * hold every renewal; a token is unique to one put, so a `renewing:` commit with it that names
   * the lock counts (the locks of a set share their put's token).
   */
  private async renewLeases(
    found: Map<string, LockRecord>,
    /** The copy's shallow commits, as `records` last read them. */
    shallow: ReadonlySet<string>,
    signal?: AbortSignal,
  ) {
    const claims = [...found.values()].filter(({ state, token }) => state === 'claimed' && token);
    if (claims.length === 0) return;
    const { fetched } = this.options;
    const log =
      (fetched && renewalLog(fetched, this.head, shallow)) ??
      parseHolderLog(await this.run(renewalLogArgs([this.head]), signal));
    for (const [record, lease] of renewedLeases(log, claims)) record.leaseExpires = lease;
  }

  /** The commit the answers about claims are about: the fetched tip, unless pinned (see pin). */
  private pinned: string | undefined;

  private get head(): string {
    return this.pinned ?? this.copy.tip;
  }

  /**
   * Answers about `commit` from now on, not the fetched tip: a decision made at a tip the branch
   * has since moved past still gets the claims as they were there. False when the copy lacks it.
   */
  async pin(commit: string, signal?: AbortSignal): Promise<boolean> {
    try {
      // The tip the copy last fetched is there: no git process to ask.
      if (commit !== this.copy.fetched)
        await this.run(['rev-parse', '--verify', `${commit}^{commit}`], signal);
    } catch (error) {
      if (error instanceof GitCommandError) return false;
      throw error;
    }
    this.pinned = commit;
    return true;
  }

  /**
   * The reclaim of lock `name`'s claim with `token` (an `unclaiming:` commit whose
   * `Reclaimed-Token` is it), among the commits fetched; call `records` for the lock first, so
   * they reach back past its current state.
   */
  async reclaimOf(
    name: string,
    token: string,
    signal?: AbortSignal,
  ): Promise<{ at: Date; reason: string } | undefined> {
    const out = await this.run(
      [
        'log',
        '-z',
        '--fixed-strings',
        `--grep=${RECLAIMED_TOKEN}: ${token}`,
        `--format=${HOLDER_LOG_FORMAT}`,
        this.head,
        '--',
      ],
      signal,
    );
    for (const { time, trailers, body } of parseHolderLog(out)) {
      if (trailerOf(trailers, RECLAIMED_TOKEN) !== token) continue;
      if (firstLine(body) !== `unclaiming: ${name}`) continue;
      return {
        at: new Date(time * 1000),
        reason: trailerOf(trailers, 'Reclaim-Reason') ?? 'reclaimed',
      };
    }
    return undefined;
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
    const log =
      (this.options.fetched && addingLog(this.options.fetched, this.head, paths, shallow)) ??
      parseHolderLog(await this.addingLogOutput(paths, signal));
    const wanted = new Set(paths);
    const result = new Map<string, Omit<LockRecord, 'name' | 'state'>>();
    const settled = new Set<string>();
    for (const { commit, time, author, trailers, body, paths: names } of log) {
      for (const path of names) {
        if (!wanted.has(path) || settled.has(path)) continue;
        settled.add(path);
        if (shallow.has(commit)) continue;
        const claimed = path.startsWith(`${this.options.pool}/claimed/`);
        result.set(path, {
          commit,
          ...holderFromCommit({ trailers, body, author, authoredAt: new Date(time * 1000) }),
          ...(claimed ? claimFromTrailers(trailers) : {}),
        });
      }
    }
    return result;
  }

  /** git's log of the commits that added `paths`, for addingCommits. */
  private addingLogOutput(paths: readonly string[], signal?: AbortSignal): Promise<string> {
    return this.run(
      [
        'log',
        '-z',
        '--no-renames',
        '--diff-filter=A',
        '--name-only',
        `--format=${HOLDER_LOG_FORMAT}`,
        this.head,
        '--',
        ...paths,
      ],
      signal,
    );
  }
}

/** `2026-11-29T17:50:00Z`: RFC 3339 in UTC, to the second. */
export function formatInstant(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** `by URL since 2026-…Z (for 12m30s, lease expires in 12m)`, or that the claiming commit lies deeper than we looked. */
export function describeHolder(record: LockRecord, now: number, searchedDepth: number): string {
  if (!record.since || !record.by) return `holder not found in the last ${searchedDepth} commits`;
  const held = Math.max(0, now - record.since.getTime());
  const lease = describeLease(record, now);
  return `by ${record.by} since ${formatInstant(record.since)} (for ${formatMs(held)}${lease ? `, ${lease}` : ''})`;
}

/**
 * `lease expires in 12m` or `lease expired 3m ago` (SPEC §10); undefined for a claim without a
 * lease, which never expires.
 */
export function describeLease(record: Pick<LockRecord, 'leaseExpires'>, now: number) {
  if (!record.leaseExpires) return undefined;
  const left = record.leaseExpires.getTime() - now;
  return left >= 0 ? `lease expires in ${formatMs(left)}` : `lease expired ${formatMs(-left)} ago`;
}
