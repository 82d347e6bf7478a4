// The git mechanism under the lock policy: the bare, shallow copy of the branch tip (BranchCopy),
// reused across attempts, and the handful of lock-level actions the policy needs (the waiting
// line's refs are LineRefs', the current claims ClaimReader's, the push BranchPush's, what the
// history says of one lock SyncedHistory's). It never sleeps and never decides; LockPool does both.
//
// Cost is what keeps it here: every attempt is one fetch of the tip (one connection), one ls-tree,
// one fast-import that writes the commit straight from the tip's trees (no checkout, no index,
// nothing proportional to the history or the pool's size on disk) and one push. simple-git
// waits 50 ms after any command that printed nothing, so the commands chosen here all print.
import { OperationError } from '../base/errors.js';
import type { Git, GitRunOptions } from '../git/git.js';
import type { PushOutcome } from '../git/push-outcome.js';
import { writePack, type PackedObject } from '../git/pack-objects.js';
import type { GitIdentity } from '../git/environment.js';
import {
  lockPath,
  type Change,
  type ClaimFacts,
  type HoldHistory,
  type LockState,
  type PoolState,
  type ReclaimFacts,
} from '../lock/pool-state.js';
import { ClaimReader } from './claim-reader.js';
import { HOLD_HISTORY_COMMITS, holdHistoryArgs, parseHoldHistory } from './hold-history.js';
import { missingPoolError } from './missing-pool.js';
import type { LockMetadata } from '../base/lock-match.js';
import { LockFiles } from './lock-files.js';
import type { WaitingEntry } from '../lock/line-entry.js';
import { LineRefs } from './line-refs.js';
import { claimsBetween, lineTokenOf } from './line-claims.js';
import { FetchedObjects } from './fetched-objects.js';
import { holdLog } from './fetched-log.js';
import { commitsOfMoves, gitDate, movesOf } from './moved-commits.js';
import { BranchCopy, type FetchById, type Reach } from './branch-copy.js';
import { BranchPush } from './branch-push.js';
import { SyncedHistory } from './synced-history.js';
import type { KeptRefs } from '../git/kept-refs.js';
import type { KeptSession } from '../git/daemon-session.js';
import {
  blobId,
  fastImportCommits,
  isRegularFile,
  lockFileChange,
  parseMarks,
  parseTree,
  poolEntriesOf,
  type TreeEntry,
} from './git-output.js';

export interface LockRepositoryOptions {
  uri: string;
  branch: string;
  pool: string;
  /** Where the working copy lives (created if missing), in the run's private folder. */
  workdir: string;
  /** Read the pool's waiting line with every fetch (an acquire keeps its place in it). */
  line?: boolean;
  /**
   * Keep the history connected across syncs (the release after a stop): the first sync brings
   * CLAIM_DEPTH commits, enough to find a claim made just before under contention, and later
   * ones only the commits since, so a retry after a lost race needs no deepening fetch.
   */
  keepHistory?: boolean;
  /**
   * A kept connection to ask the refs on (git/kept-refs.ts): `look` then costs the server one
   * request or one upload-pack and no new connection, and falls back to ls-remote once it fails.
   */
  refs?: KeptRefs;
  /** Whether a tip a look has just seen is fetched by its id (see syncTo); never when unset. */
  fetchById?: FetchById;
  /**
   * A git:// repository's kept session: the branch tip read on it (tipNow), and the fetches it
   * can take (git/daemon-session.ts).
   */
  session?: KeptSession;
}

/** How many commits a keepHistory copy starts with. */
const CLAIM_DEPTH = 16;

/** Where fast-import leaves each attempt's commit (only its object id matters). */
const ATTEMPT_REF = 'refs/pool-resource/attempt';

export class LockRepository {
  private readonly copy: BranchCopy;
  /** What the copy fetched itself (kept session or connection), parsed: read without git. */
  private readonly fetched = new FetchedObjects();
  private initialised = false;
  /** The pool's entries at `tip`, by path (from the last `pool()`). */
  private entries = new Map<string, TreeEntry>();
  /** The changes staged for the next commit, one commit each. */
  private staged: { change: Change; effective: boolean }[] = [];
  /** The last commit written, which `push` sends. */
  private committed: string | undefined;
  /**
   * The objects of the commits since the synced tip, where the run built them all (undefined
   * where fast-import wrote any): what the push sends (BranchPush, own-push.ts).
   */
  private unpushed: PackedObject[] | undefined = [];
  /** The waiting line as the last fetch found it (with `line`), or as syncTo inferred it. */
  private fetchedLine: WaitingEntry[] = [];
  lineInferred = false;
  /** The lock files read for `match` (only an acquire with `match` creates it). */
  private files: LockFiles | undefined;
  /** The pool's waiting line on the remote. */
  private readonly line: LineRefs;
  /** The reader of claims (leases, fencing). */
  private readonly claimReader: ClaimReader;
  private readonly pusher: BranchPush;
  private readonly history: SyncedHistory;

  constructor(
    private readonly git: Git,
    private readonly options: LockRepositoryOptions,
  ) {
    this.copy = new BranchCopy(git, {
      uri: options.uri,
      branch: options.branch,
      gitDir: options.workdir,
      scratch: true, // the run's private folder holds it (see LockRepositoryOptions.workdir)
      byId: options.fetchById,
      session: options.session,
      packs: options.refs?.packs,
      fetched: this.fetched,
    });
    this.claimReader = new ClaimReader(git, options, this.copy, this.fetched);
    this.line = new LineRefs(this.copy, options, this.fetched);
    this.pusher = new BranchPush(this.copy, this.line, options);
    this.history = new SyncedHistory(
      this.copy,
      options.pool,
      () => this.synced(),
      (more) => this.deepen(more),
    );
  }

  private run(args: readonly string[], options: Omit<GitRunOptions, 'cwd'> = {}): Promise<string> {
    return this.copy.run(args, options);
  }

  /** The branch tip and the pool's waiting line on the remote, without fetching (LineRefs.look). */
  look(): Promise<{ tip: string | undefined; line: WaitingEntry[] }> {
    return this.line.look();
  }

  /** Whether `look` asks on a kept connection: polls may then look, and fetch once it moved. */
  get looksAreCheap(): boolean {
    return this.line.looksAreCheap;
  }

  /** The tip read on a put in line's kept session; another run waiting lets it go, and looks. */
  async tipNow(): Promise<string | undefined> {
    if (!this.options.line) return void this.unwatch();
    return this.options.session?.tip();
  }

  unwatch(): void {
    this.options.session?.release();
  }

  /** Puts an entry in the pool's line, or moves it to the synced tip (see LineRefs.join). */
  join(entry: WaitingEntry): Promise<boolean> {
    return this.line.join(entry, this.synced());
  }

  /** Takes entries out of the line (deleting one that is already gone is no error). */
  leave(entries: readonly WaitingEntry[], signal?: AbortSignal): Promise<void> {
    return this.line.leave(entries, signal);
  }

  /**
   * Fetches the branch tip (depth 1 the first time; later depth 1 too, or only the commits since
   * where that is cheaper, see laterReach); the next attempt starts from exactly that commit.
   */
  async sync(): Promise<string> {
    if (this.initialised) await this.fetch(this.laterReach);
    else if (this.options.line) await this.initAndFetch();
    else await this.cloneTip();
    return this.startAttempt();
  }

  /**
   * Syncs to the tip a look has just seen, with the line it saw there: as `sync`, but git asks the
   * server for that commit alone, listing no refs first (fetchById); where the server refuses that
   * (by id, or a commit it no longer has), it syncs, from then on. With `since`, the line less the
   * claims after it (line-claims.ts), where the copy keeps those commits (laterReach), else syncs.
   */
  async syncTo({ tip, line, since }: { tip: string; line: WaitingEntry[]; since?: string }) {
    const reach = this.laterReach;
    const byId = this.initialised && (!since || reach === 'since');
    if (!byId || !(await this.copy.fetchCommit(tip, reach))) return this.sync();
    const claimed = await this.claimsBetween(since, tip);
    if (!claimed) return this.sync();
    const left = line.filter(({ token }) => !claimed.has(token));
    this.fetchedLine = this.options.line ? this.line.listedAt(tip, left) : [];
    this.lineInferred = since !== undefined;
    return this.startAttempt();
  }

  /** The line tokens of the claims after `since` up to `tip` (see claimsBetween). */
  private async claimsBetween(since: string | undefined, tip: string) {
    const kept = since === undefined ? undefined : this.fetched.claimTokens(since, tip);
    if (!kept) return claimsBetween((args) => this.run(args), since, tip);
    return new Set(kept.map(lineTokenOf).filter((token) => token !== ''));
  }

  /** See LockStore.syncAfterLostRace: the tip asked on the kept session, fetched on it. */
  async syncAfterLostRace(inferLine: boolean): Promise<string | undefined> {
    const { session, line } = this.options;
    if (!session?.usable || (line && !inferLine)) return undefined;
    const [lost, tip] = [this.synced(), await session.tip()];
    if (tip === undefined || tip === lost) return undefined;
    return this.syncTo({ tip, line: this.fetchedLine, since: line ? lost : undefined });
  }

  /**
   * How far a fetch after the first reaches: the commits since, for a copy that keeps its history,
   * over git://, where a --depth waits on a delayed ACK (git/daemon-command.ts), and where the run
   * asks its kept HTTP(S) or SSH connection for that pack itself (BranchCopy.fetchCommit); else
   * the tip.
   */
  private get laterReach(): Reach {
    const { keepHistory, refs } = this.options;
    return keepHistory || this.git.overDaemonSockets || refs?.packs?.usable ? 'since' : 1;
  }

  /** An attempt starts from the tip just synced, with nothing read or staged yet. */
  private startAttempt(): string {
    this.entries = new Map();
    this.staged = [];
    this.committed = undefined;
    this.unpushed = [];
    return this.synced();
  }

  /** The first sync: one process creates the bare copy and fetches the tip into it. */
  private async cloneTip(): Promise<void> {
    // The committer identity is only needed later: ask for it while the clone runs.
    const identity = this.git.identity();
    identity.catch(() => undefined);
    await this.copy.clone(this.options.keepHistory ? CLAIM_DEPTH : 1);
    this.initialised = true;
    await identity;
  }

  /**
   * The first sync of an acquire: clone cannot fetch refs beside its one branch, and the line
   * must come with the tip (a separate ls-remote would cost a connection per acquire). Where the
   * copy keeps every commit since (laterReach), CLAIM_DEPTH commits: a put that waits looks up
   * the holders here (keptCopy).
   */
  private async initAndFetch(): Promise<void> {
    const identity = this.git.identity();
    identity.catch(() => undefined);
    await this.copy.init();
    this.initialised = true;
    await this.fetch(this.laterReach === 'since' ? CLAIM_DEPTH : 1);
    await identity;
  }

  /** When `commit`, a tip this copy has synced, was committed: its committer time, to the second. */
  async commitTime(commit: string): Promise<number | undefined> {
    const kept = this.fetched.commitTime(commit);
    if (kept !== undefined) return kept;
    const out = await this.run(['show', '--no-patch', '--format=%ct', commit]);
    const seconds = Number(out.trim());
    return Number.isSafeInteger(seconds) && seconds > 0 ? seconds * 1000 : undefined;
  }

  /**
   * The holds the commits of the working copy show (hold-history.ts); none where it keeps only
   * the tip (keptCopy), which a log would not reach past.
   */
  async holdHistory(): Promise<HoldHistory> {
    if (!this.keptCopy) return { claimedAt: new Map(), holds: [], claims: [] };
    const [tip, { pool }] = [this.synced(), this.options];
    const shallow = await this.copy.shallowCommits();
    const kept = holdLog(this.fetched, tip, pool, shallow, HOLD_HISTORY_COMMITS);
    return parseHoldHistory(kept ?? (await this.run(holdHistoryArgs(tip, pool))));
  }

  /** The waiting line as the last sync fetched it (empty without the `line` option). */
  syncedLine(): WaitingEntry[] {
    return this.fetchedLine;
  }

  /** The copy and its synced tip where it keeps every commit since its first fetch (laterReach). */
  get keptCopy(): { gitDir: string; tip: string | undefined } | undefined {
    const kept = this.laterReach === 'since';
    return kept ? { gitDir: this.options.workdir, tip: this.copy.fetched } : undefined;
  }

  /** The pool as it is at the synced tip; refuses when the pool's folders are missing. */
  async pool(): Promise<PoolState> {
    const { pool, branch } = this.options;
    let entries = this.poolRead(this.synced());
    if (!entries) {
      const out = await this.run(['ls-tree', '-r', '-t', '-z', this.synced(), '--', `${pool}/`]);
      entries = parseTree(out);
      this.fetched.learnListing(entries, pool);
    }
    const { claimed, unclaimed, irregular, exists, byPath } = poolEntriesOf(entries, pool);
    this.entries = byPath;
    if (!exists)
      throw await missingPoolError((args) => this.run(args), this.synced(), pool, branch);
    return { claimed, unclaimed, irregular };
  }

  /** The pool at `tip` where the copy has it read already (FetchedObjects), else undefined. */
  poolRead(tip: string): TreeEntry[] | undefined {
    return this.fetched.poolTree(tip, this.options.pool);
  }

  /** The lock files of `names` as the last `pool()` listed them (see LockFiles). */
  async metadata(names: readonly string[]): Promise<Map<string, LockMetadata>> {
    const ids = new Map<string, string>();
    for (const name of names) {
      const entry =
        this.entries.get(lockPath(this.options.pool, 'unclaimed', name)) ??
        this.entries.get(lockPath(this.options.pool, 'claimed', name));
      if (entry) ids.set(name, entry.id);
    }
    this.files ??= new LockFiles(this.git, this.options.workdir);
    const parsed = await this.files.metadata([...ids.values()]);
    return new Map([...ids].map(([name, id]) => [name, parsed.get(id)!]));
  }

  /** Stages one change, for a commit of its own (nothing touches disk until `commit`). */
  async apply(change: Change): Promise<void> {
    let effective = true;
    if (change.kind === 'write') {
      const path = lockPath(this.options.pool, change.state, change.name);
      const existing = this.entries.get(path);
      if (existing && !isRegularFile(existing))
        throw new OperationError(`refusing to write ${path}: it is not a regular file`);
      // Same bytes as the lock already has: an update that changes nothing.
      effective = existing?.id !== blobId(change.content, existing?.id.length ?? 40);
    }
    this.staged.push({ change, effective });
    return Promise.resolve();
  }

  /** Whether a staged change changes anything (an update with identical metadata does not). */
  async hasStagedChanges(): Promise<boolean> {
    return Promise.resolve(this.staged.some(({ effective }) => effective));
  }

  /**
   * Writes each staged change as a commit with the message of the same place, in a row on top of
   * the last commit written since the sync (else the synced tip), in one fast-import; returns
   * their ids. One push then carries them all.
   */
  async commit(messages: readonly string[]): Promise<string[]> {
    const staged = this.staged;
    if (staged.length === 0 || staged.length !== messages.length)
      throw new Error(`${staged.length} changes staged for ${messages.length} commit messages`);
    const identity = await this.git.identity();
    const built = this.movesBuilt(messages, identity);
    if (built) {
      await writePack(this.options.workdir, built);
      this.unpushed?.push(...built);
      const ids = built.filter(({ type }) => type === 'commit').map(({ id }) => id);
      this.committed = ids.at(-1);
      this.staged = [];
      return ids;
    }
    const input = fastImportCommits({
      ref: ATTEMPT_REF,
      ...identity,
      from: this.committed ?? this.synced(),
      commits: staged.map(({ change }, index) => ({
        message: messages[index]!,
        change: lockFileChange(this.options.pool, change, (path) => this.entries.get(path)?.mode),
      })),
    });
    const out = await this.run(
      ['fast-import', '--quiet', '--force', '--done', '--date-format=now'],
      {
        input,
        // Keep the pack fast-import writes: below its unpack limit (100 objects by default) it
        // starts `git unpack-objects` to turn a commit's handful of objects into loose files, a
        // process per commit. Nor sync it to disk (git >= 2.36 syncs packs, 1-5 ms measured): the
        // commit only has to reach the remote, and the copy goes with the run.
        config: [
          ['fastimport.unpackLimit', '0'],
          ['core.fsync', 'none'],
        ],
      },
    );
    // What fast-import wrote is git's to send.
    this.unpushed = undefined;
    const ids = parseMarks(out, staged.length);
    if (!ids) throw new Error(`git fast-import printed no commit: ${out}`);
    this.committed = ids.at(-1);
    this.staged = [];
    return ids;
  }

  /**
   * The staged changes as commits built by the run (moved-commits.ts), where each only moves lock
   * files (a claim, a release) and the folders they touch are kept read; undefined otherwise.
   */
  private movesBuilt(messages: readonly string[], identity: GitIdentity) {
    const commits = movesOf(
      this.options.pool,
      this.staged.map(({ change }) => change),
      messages,
    );
    const parent = this.committed ?? this.synced();
    const when = gitDate(new Date());
    return commits && commitsOfMoves(this.fetched, parent, commits, { ...identity, when });
  }

  /**
   * Pushes the last commit to the branch. With `leaving`, the same push takes that entry out of
   * the line, atomically (see BranchPush), with where the sync saw that entry point.
   */
  async push(signal?: AbortSignal, leaving?: WaitingEntry): Promise<PushOutcome> {
    if (!this.committed) throw new Error('nothing committed to push');
    const seen = leaving && this.fetchedLine.find(({ token }) => token === leaving.token);
    const entry = leaving && { ...leaving, at: seen?.at };
    return this.pusher.push(this.committed, signal, entry, this.unpushed);
  }

  /** The newest commit in the synced history that touched this lock's file (SyncedHistory). */
  lastCommitOf(state: LockState, name: string): Promise<string> {
    return this.history.lastCommitOf(state, name);
  }

  /** Whether the synced tip still carries this claim (SyncedHistory). */
  holds(claim: { name: string; commit: string; parent?: string }): Promise<boolean> {
    return this.history.holds(claim);
  }

  /** See ClaimReader.heldInWindow. */
  heldInWindow(tip: string, wanted: readonly string[], signal?: AbortSignal) {
    return this.claimReader.heldInWindow(tip, wanted, signal);
  }

  /** The current claims of `names` at the synced tip (see ClaimReader). */
  async claims(names: readonly string[]): Promise<Map<string, ClaimFacts> | undefined> {
    return this.claimReader.claims(this.synced(), names);
  }

  /** The reclaim of `name`'s claim with `token`, if there was one (see ClaimReader). */
  async reclaimOf(name: string, token: string): Promise<ReclaimFacts | undefined> {
    const { pool } = this.options;
    const state = (['claimed', 'unclaimed'] as const).find((at) =>
      this.entries.has(lockPath(pool, at, name)),
    );
    return this.claimReader.reclaimOf(this.synced(), name, state, token);
  }

  private synced(): string {
    const tip = this.copy.fetched;
    if (tip === undefined) throw new Error('the working copy was never synced');
    return tip;
  }

  /** Fetches the branch (and, with `line`, the line's refs) and keeps the line it found. */
  private async fetch(reach: Reach): Promise<void> {
    const refs = await this.copy.fetch(reach, { refspecs: this.line.refspecs });
    [this.fetchedLine, this.lineInferred] = [this.line.entries(refs, this.copy.fetched), false];
  }

  /** Fetches `more` commits of history; false when the copy already holds it all. */
  private async deepen(more: number | 'all'): Promise<boolean> {
    const refs = await this.copy.deepen(more, { refspecs: this.line.refspecs });
    if (refs)
      [this.fetchedLine, this.lineInferred] = [this.line.entries(refs, this.copy.fetched), false];
    return refs !== undefined;
  }
}
