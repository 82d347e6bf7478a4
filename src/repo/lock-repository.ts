// The git mechanism under the lock policy: one bare, shallow copy of the branch tip, reused across
// attempts, and the handful of lock-level actions the policy needs. It never sleeps and never
// decides; LockPool does both.
//
// Cost is what keeps it here: every attempt is one depth-1 fetch (one connection), one ls-tree,
// one fast-import that writes the commit straight from the tip's trees (no checkout, no index,
// nothing proportional to the history or the pool's size on disk) and one push. simple-git
// waits 50 ms after any command that printed nothing, so the commands chosen here all print.
import { createHash } from 'node:crypto';
import { mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { CancelledError, OperationError, GitCommandError } from '../base/errors.js';
import type { Git } from '../git/git.js';
import { classifyPush, type PushOutcome, type PushRefused } from '../git/push-outcome.js';
import { readRef } from '../git/refs.js';
import { lockPath, type Change, type LockState, type PoolState } from '../lock/pool-state.js';
import { displayUri } from '../base/logger.js';
import { lockNameProblem } from '../base/lock-name.js';
import { missingPoolError } from './missing-pool.js';
import { entryRef, linePrefix, parseEntryRef, type WaitingEntry } from '../lock/waiting-line.js';

export interface LockRepositoryOptions {
  uri: string;
  branch: string;
  pool: string;
  /** Where the working copy lives (created if missing). */
  workdir: string;
  /** Read the pool's waiting line with every fetch (an acquire keeps its place in it). */
  line?: boolean;
  /**
   * Keep the history connected across syncs (the release after a stop): the first sync brings
   * CLAIM_DEPTH commits, enough to find a claim made just before under contention, and later
   * ones only the commits since, so a retry after a lost race needs no deepening fetch.
   */
  keepHistory?: boolean;
}

interface TreeEntry {
  mode: string;
  type: string;
  id: string;
}

/** How many commits a keepHistory copy starts with. */
const CLAIM_DEPTH = 16;

/** Where fast-import leaves each attempt's commit (only its object id matters). */
const ATTEMPT_REF = 'refs/pool-resource/attempt';

export class LockRepository {
  private initialised = false;
  private tip: string | undefined;
  /** The pool's entries at `tip`, by path (from the last `pool()`). */
  private entries = new Map<string, TreeEntry>();
  private staged: { change: Change; effective: boolean } | undefined;
  private identity: { author: string; committer: string } | undefined;
  /** The last commit written, which `push` sends. */
  private committed: string | undefined;
  /** The waiting line as the last fetch found it (with `line`). */
  private fetchedLine: WaitingEntry[] = [];
  /** The server cannot take an --atomic push: a claim leaves the line in a push of its own. */
  private atomicRefused = false;

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

  private run(
    args: readonly string[],
    options: { input?: Buffer; signal?: AbortSignal } = {},
  ): Promise<string> {
    return this.git.run(args, { cwd: this.options.workdir, ...options });
  }

  private get linePrefix(): string {
    return linePrefix(this.options.branch, this.options.pool);
  }

  /**
   * The branch tip and the pool's waiting line on the remote, without fetching anything: one
   * ls-remote, the same one connection as asking for the tip alone. Needs no repository: runs in
   * the private home.
   */
  async look(): Promise<{ tip: string | undefined; line: WaitingEntry[] }> {
    const prefix = this.linePrefix;
    const out = await this.git.run([
      'ls-remote',
      '--',
      this.options.uri,
      this.branchRef,
      `${prefix}*`,
    ]);
    let tip: string | undefined;
    const line: WaitingEntry[] = [];
    for (const row of out.split('\n')) {
      const [sha, ref = ''] = row.split('\t');
      if (!sha) continue;
      if (ref === this.branchRef) tip = sha;
      const entry = parseEntryRef(prefix, ref);
      if (entry) line.push({ ...entry, at: sha });
    }
    return { tip, line };
  }

  /**
   * Puts an entry in the pool's line, or moves it to the synced tip (a put showing it is alive):
   * a ref at a commit the server already has, so the push sends no objects. Forced: the tip may
   * not descend from where the entry pointed. False when the remote refuses refs outside its
   * branches.
   */
  async join(entry: WaitingEntry): Promise<boolean> {
    const ref = entryRef(this.linePrefix, entry);
    const outcome = await this.pushRefs([`+${this.synced()}:${ref}`], ref);
    if (outcome === undefined) throw new Error(`git push printed no status for ${ref}`);
    return typeof outcome === 'string';
  }

  /** Takes entries out of the line (deleting one that is already gone is no error). */
  async leave(entries: readonly WaitingEntry[], signal?: AbortSignal): Promise<void> {
    if (entries.length === 0) return;
    const refs = entries.map((entry) => `:${entryRef(this.linePrefix, entry)}`);
    await this.pushRefs(refs, refs[0]!.slice(1), signal);
  }

  /** One push of `refspecs`; the outcome for `ref`, or undefined when git reported none. */
  private async pushRefs(
    refspecs: readonly string[],
    ref: string,
    signal?: AbortSignal,
  ): Promise<PushOutcome | PushRefused | undefined> {
    let out: string;
    try {
      out = await this.run(['push', '--porcelain', '--', this.options.uri, ...refspecs], {
        signal,
      });
    } catch (error) {
      const outcome =
        error instanceof GitCommandError ? classifyPush(error.stdout, ref) : undefined;
      if (outcome === undefined) throw error;
      return outcome;
    }
    return classifyPush(out, ref);
  }

  /** Fetches the branch tip (depth 1); the next attempt starts from exactly that commit. */
  async sync(): Promise<string> {
    try {
      if (this.initialised) await this.fetch(this.options.keepHistory ? [] : ['--depth=1']);
      else if (this.options.line) await this.initAndFetch();
      else await this.cloneTip();
    } catch (error) {
      // Asked only to tell a missing branch apart; when the server cannot be reached either,
      // the fetch's own message is the one to report.
      const remote =
        error instanceof GitCommandError
          ? await this.look().then(
              ({ tip }) => tip,
              () => null,
            )
          : null;
      if (remote === undefined) {
        throw new OperationError(
          `branch "${this.options.branch}" does not exist in ${displayUri(this.options.uri)}`,
        );
      }
      throw error;
    }
    this.entries = new Map();
    this.staged = undefined;
    this.committed = undefined;
    return this.synced();
  }

  /** The first sync: one process creates the bare copy and fetches the tip into it. */
  private async cloneTip(): Promise<void> {
    await rm(this.options.workdir, { recursive: true, force: true });
    await mkdir(this.options.workdir, { recursive: true });
    // The committer identity is only needed later: ask for it while the clone runs.
    const identity = this.ident();
    identity.catch(() => undefined);
    await this.git.run([
      'clone',
      '--bare',
      `--depth=${this.options.keepHistory ? CLAIM_DEPTH : 1}`,
      '--single-branch',
      '--no-tags',
      `--branch=${this.options.branch}`,
      '--',
      this.options.uri,
      this.options.workdir,
    ]);
    this.initialised = true;
    this.tip =
      (await readRef(this.options.workdir, this.branchRef)) ??
      (await this.run(['rev-parse', '--verify', `${this.branchRef}^{commit}`])).trim();
    await identity;
  }

  /**
   * The first sync of an acquire: clone cannot fetch refs beside its one branch, and the line
   * must come with the tip (a separate ls-remote would cost a connection per acquire).
   */
  private async initAndFetch(): Promise<void> {
    await rm(this.options.workdir, { recursive: true, force: true });
    await mkdir(this.options.workdir, { recursive: true });
    const identity = this.ident();
    identity.catch(() => undefined);
    // Not --quiet: its line is what spares simple-git's wait after a silent command (header).
    await this.run(['init', '--bare']);
    this.initialised = true;
    await this.fetch(['--depth=1']);
    await identity;
  }

  /** When the synced tip was committed: its committer time, to the second. */
  async tipTime(): Promise<number | undefined> {
    const out = await this.run(['show', '--no-patch', '--format=%ct', this.synced()]);
    const seconds = Number(out.trim());
    return Number.isSafeInteger(seconds) && seconds > 0 ? seconds * 1000 : undefined;
  }

  /** The waiting line as the last sync fetched it (empty without the `line` option). */
  syncedLine(): WaitingEntry[] {
    return this.fetchedLine;
  }

  /** The tip the working copy was last synced to. */
  get syncedTip(): string | undefined {
    return this.tip;
  }

  /** The pool as it is at the synced tip; refuses when the pool's folders are missing. */
  async pool(): Promise<PoolState> {
    const { pool } = this.options;
    const out = await this.run(['ls-tree', '-r', '-t', '-z', this.synced(), '--', `${pool}/`]);
    const claimed = new Set<string>();
    const unclaimed = new Set<string>();
    const irregular = new Map<string, string>();
    const folders = new Set<string>();
    this.entries = new Map();
    for (const entry of out.split('\0')) {
      if (!entry) continue;
      const tab = entry.indexOf('\t');
      const [mode = '', type = '', id = ''] = entry.slice(0, tab).split(' ');
      const path = entry.slice(tab + 1);
      this.entries.set(path, { mode, type, id });
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
    if (!folders.has(`${pool}/claimed`) || !folders.has(`${pool}/unclaimed`))
      throw await missingPoolError(
        (args) => this.run(args),
        this.synced(),
        pool,
        this.options.branch,
      );
    return { claimed, unclaimed, irregular };
  }

  /** Stages one change for the next commit (nothing touches disk until `commit`). */
  async apply(change: Change): Promise<void> {
    let effective = true;
    if (change.kind === 'write') {
      const path = lockPath(this.options.pool, change.state, change.name);
      const existing = this.entries.get(path);
      if (existing && (existing.type !== 'blob' || existing.mode === '120000'))
        throw new OperationError(`refusing to write ${path}: it is not a regular file`);
      // Same bytes as the lock already has: an update that changes nothing.
      effective = existing?.id !== blobId(change.content, existing?.id.length ?? 40);
    }
    this.staged = { change, effective };
    return Promise.resolve();
  }

  /** Whether the staged change changes anything (an update with identical metadata does not). */
  async hasStagedChanges(): Promise<boolean> {
    return Promise.resolve(this.staged?.effective ?? false);
  }

  /** Writes the staged change as a commit on top of the synced tip; returns its id. */
  async commit(message: string): Promise<string> {
    const staged = this.staged;
    if (!staged) throw new Error('nothing staged to commit');
    const identity = await this.ident();
    const body = Buffer.from(message.endsWith('\n') ? message : `${message}\n`);
    const { pool } = this.options;
    const { change } = staged;
    const parts: Buffer[] = [
      Buffer.from(
        `commit ${ATTEMPT_REF}\nmark :1\n` +
          `author ${identity.author} now\ncommitter ${identity.committer} now\n` +
          `data ${body.length}\n`,
      ),
      body,
      Buffer.from(`\nfrom ${this.synced()}\n`),
    ];
    switch (change.kind) {
      case 'move':
        parts.push(
          Buffer.from(
            `R ${quotePath(lockPath(pool, change.from, change.name))} ${quotePath(lockPath(pool, change.to, change.name))}\n`,
          ),
        );
        break;
      case 'write': {
        const path = lockPath(pool, change.state, change.name);
        const mode = this.entries.get(path)?.mode ?? '100644';
        parts.push(
          Buffer.from(`M ${mode} inline ${quotePath(path)}\ndata ${change.content.length}\n`),
          change.content,
          Buffer.from('\n'),
        );
        break;
      }
      case 'delete':
        parts.push(Buffer.from(`D ${quotePath(lockPath(pool, change.state, change.name))}\n`));
        break;
    }
    parts.push(Buffer.from('\nget-mark :1\ndone\n'));
    const out = await this.run(
      [
        // A commit is a handful of objects: keep them loose rather than a pack per attempt.
        '-c',
        'fastimport.unpackLimit=100',
        'fast-import',
        '--quiet',
        '--force',
        '--done',
        '--date-format=now',
      ],
      { input: Buffer.concat(parts) },
    );
    const id = out.trim().split('\n').pop() ?? '';
    if (!/^[0-9a-f]{40,64}$/.test(id)) throw new Error(`git fast-import printed no commit: ${out}`);
    this.committed = id;
    return id;
  }

  /**
   * Pushes the last commit to the branch. With `leaving`, the same push takes that entry out of
   * the line, atomically: a claim that lost its race keeps its place in line.
   */
  async push(signal?: AbortSignal, leaving?: WaitingEntry): Promise<PushOutcome> {
    if (!leaving || this.atomicRefused) {
      const outcome = await this.pushCommit([], signal);
      if (leaving && outcome === 'pushed')
        await this.leave([leaving], signal).catch(() => undefined);
      return outcome;
    }
    try {
      return await this.pushCommit([`:${entryRef(this.linePrefix, leaving)}`], signal);
    } catch (error) {
      // send-pack.c dies with this before sending anything when the server does not advertise
      // `atomic` (git 2.39); there is no other sign of it. Claim first, then leave the line.
      if (!(
        error instanceof GitCommandError && /does not support --atomic push/.test(error.stderr)
      ))
        throw error;
      this.atomicRefused = true;
      return this.push(signal, leaving);
    }
  }

  /** Pushes the last commit to the branch, with `also` (more refspecs) in the same atomic push. */
  private async pushCommit(also: readonly string[], signal?: AbortSignal): Promise<PushOutcome> {
    const commit = this.committed;
    if (!commit) throw new Error('nothing committed to push');
    const refspecs = [`${commit}:${this.branchRef}`, ...also];
    const leaving = also.length > 0;
    let out: string;
    try {
      out = await this.run(
        [
          'push',
          '--porcelain',
          ...(leaving ? ['--atomic'] : []),
          '--',
          this.options.uri,
          ...refspecs,
        ],
        { signal },
      );
    } catch (error) {
      // Without a verdict for our ref the push may or may not have landed: a transient failure.
      if (error instanceof GitCommandError) {
        const outcome = classifyPush(error.stdout, this.branchRef);
        if (outcome) return this.verdict(outcome);
      }
      // No answer (timed out, connection lost) does not mean no push: the server may have moved
      // the branch before the client gave up. Retrying a release or an add that landed would
      // fail with "not claimed" or "already exists".
      if (!(error instanceof CancelledError) && (await this.landed(commit))) return 'pushed';
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
  private async landed(commit: string): Promise<boolean> {
    try {
      return (await this.look()).tip === commit;
    } catch {
      return false;
    }
  }

  /**
   * The newest commit in the synced history that touched this lock's file, deepening the
   * shallow copy as needed (an update that changed nothing answers with it).
   */
  async lastCommitOf(state: LockState, name: string): Promise<string> {
    const path = lockPath(this.options.pool, state, name);
    // Bounded steps ending in --unshallow: git 2.39's --deepen can stop deepening after a long
    // run of commits sharing one timestamp, so multiplying it alone may never get there.
    for (const deepen of ['--deepen=8', '--deepen=128', '--unshallow', undefined]) {
      const found = (
        await this.run(['log', '-1', '--format=%H%n', this.synced(), '--', path])
      ).trim();
      const shallow = await this.shallowCommits();
      if (found && !shallow.has(found)) return found;
      if (!deepen || shallow.size === 0) return found || this.synced();
      await this.fetch([deepen]);
    }
    return this.synced();
  }

  /**
   * Whether the remote tip (as last synced) still carries this claim: the claim commit is in its
   * history and nothing touched the claimed lock since. Deepens the shallow copy to find out,
   * no further than the tip the claim was made on (`parent`), when it is known.
   */
  async holds(claim: { name: string; commit: string; parent?: string }): Promise<boolean> {
    const claimedPath = lockPath(this.options.pool, 'claimed', claim.name);
    for (const deepen of ['--deepen=16', '--deepen=256', '--unshallow', undefined]) {
      const tip = this.synced();
      // Still at the tip the claim was made on: it has not landed.
      if (claim.parent === tip) return false;
      if (await this.isAncestor(claim.commit, tip)) {
        // `rev-list --count` always prints, so the answer costs one quick command.
        const since = await this.run([
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
      if (claim.parent !== undefined && (await this.isAncestor(claim.parent, tip))) return false;
      if (!deepen || (await this.shallowCommits()).size === 0) return false;
      await this.fetch([deepen]);
    }
    return false;
  }

  /** False too when `commit` is unknown here (not fetched yet, or never on this branch). */
  private async isAncestor(commit: string, of: string): Promise<boolean> {
    try {
      await this.run(['merge-base', '--is-ancestor', commit, of]);
      return true;
    } catch (error) {
      if (error instanceof GitCommandError) return false;
      throw error;
    }
  }

  private synced(): string {
    if (this.tip === undefined) throw new Error('the working copy was never synced');
    return this.tip;
  }

  /**
   * Fetches the branch into the tracking ref (and, with `line`, the line's refs) and takes the
   * fetched tip and line from FETCH_HEAD, which lists every ref the fetch matched.
   */
  private async fetch(extra: readonly string[]): Promise<void> {
    const prefix = this.linePrefix;
    // --verbose: fetch always prints (see the header), and FETCH_HEAD names the tip we got.
    await this.run([
      'fetch',
      '--verbose',
      '--no-tags',
      '--no-show-forced-updates',
      ...extra,
      '--',
      this.options.uri,
      `+${this.branchRef}:${this.trackingRef}`,
      ...(this.options.line ? [`+${prefix}*:refs/pool-resource/line/*`] : []),
    ]);
    const head = await readFile(join(this.options.workdir, 'FETCH_HEAD'), 'utf8');
    let tip: string | undefined;
    const line: WaitingEntry[] = [];
    // One row per ref fetched: `<id>\t[not-for-merge]\tbranch '<name>' of <uri>` for the
    // branch, `<id>\t[not-for-merge]\t'<ref>' of <uri>` for any other ref.
    for (const row of head.split('\n')) {
      const match = /^([0-9a-f]{40,64})\t[^\t]*\t(branch )?'([^']*)' of /.exec(row);
      if (!match) continue;
      const [, sha, branch, name = ''] = match;
      if (branch) tip ??= sha;
      else {
        const entry = parseEntryRef(prefix, name);
        if (entry) line.push({ ...entry, at: sha });
      }
    }
    if (!tip) throw new Error(`git fetch wrote no FETCH_HEAD for ${this.branchRef}`);
    this.tip = tip;
    this.fetchedLine = line;
  }

  private async shallowCommits(): Promise<Set<string>> {
    try {
      const text = await readFile(join(this.options.workdir, 'shallow'), 'utf8');
      return new Set(text.split('\n').filter(Boolean));
    } catch {
      return new Set();
    }
  }

  private async ident(): Promise<{ author: string; committer: string }> {
    if (this.identity) return this.identity;
    // `git var` applies the same config and environment rules as `git commit` would.
    // In the private home: the copy may not exist yet (this runs alongside the first clone).
    const out = await this.git.run(['var', '-l']);
    const read = (name: string) => {
      const line = out.split('\n').find((l) => l.startsWith(`${name}=`));
      const ident = line?.slice(name.length + 1).replace(/ \d+ [+-]\d{4}$/, '');
      if (!ident) throw new Error(`git var printed no ${name}`);
      return ident;
    };
    this.identity = { author: read('GIT_AUTHOR_IDENT'), committer: read('GIT_COMMITTER_IDENT') };
    return this.identity;
  }
}

/** A path as fast-import reads it: C-style quoted when it holds anything unusual. */
function quotePath(path: string): string {
  if (/^[\x21-\x7e]*$/.test(path) && !path.startsWith('"')) return path;
  let quoted = '"';
  for (const byte of Buffer.from(path, 'utf8')) {
    if (byte === 0x22 || byte === 0x5c) quoted += `\\${String.fromCharCode(byte)}`;
    else if (byte === 0x0a) quoted += '\\n';
    else if (byte < 0x20 || byte >= 0x7f) quoted += `\\${byte.toString(8).padStart(3, '0')}`;
    else quoted += String.fromCharCode(byte);
  }
  return `${quoted}"`;
}

/** The object id git gives a blob with these bytes (SHA-1 or SHA-256, by the repository's ids). */
function blobId(content: Buffer, idLength: number): string {
  const hash = createHash(idLength === 64 ? 'sha256' : 'sha1');
  hash.update(`blob ${content.length}\0`);
  hash.update(content);
  return hash.digest('hex');
}
