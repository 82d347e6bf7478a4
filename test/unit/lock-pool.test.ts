import { describe, expect, it } from 'vitest';
import {
  CancelledError,
  GaveUpError,
  GitCommandError,
  GitTimeoutError,
  OperationError,
  WaitTimeoutError,
  describeError,
} from '../../src/base/errors.js';
import type { PushOutcome } from '../../src/git/push-outcome.js';
import type { LockMetadata } from '../../src/base/lock-match.js';
import { readLockMetadata } from '../../src/base/lock-metadata.js';
import { LockPool, type PoolReporter } from '../../src/lock/lock-pool.js';
import type { Claim, LockStore } from '../../src/lock/lock-store.js';
import { releaseAbandonedClaim, type PendingClaim } from '../../src/lock/pending-claims.js';
import { TRANSIENT_RETRIES, type Clock } from '../../src/lock/retry.js';
import type { ResolvedOperation } from '../../src/lock/lock-operation.js';
import type {
  Change,
  ClaimFacts,
  HoldHistory,
  LockState,
  PoolState,
  ReclaimFacts,
} from '../../src/lock/pool-state.js';
import type { WaitingEntry } from '../../src/lock/line-entry.js';
import {
  FAR_BACK_LOCKS,
  KEPT_SESSIONS,
  POLL_FLOOR_MS,
  WATCHED_BUSY_MS,
} from '../../src/lock/waiting-line.js';

const RETRY_DELAY_MS = 5_000;

interface Snapshot {
  claimed: Set<string>;
  unclaimed: Set<string>;
  /** The commit that last changed each lock. */
  touchedBy: Map<string, string>;
}

function copy(s: Snapshot): Snapshot {
  return {
    claimed: new Set(s.claimed),
    unclaimed: new Set(s.unclaimed),
    touchedBy: new Map(s.touchedBy),
  };
}

/**
 * What a push does, scripted: an outcome git reports, a failure (thrown), or a push whose result
 * is lost: it lands on the remote but the caller only sees the error. `late` is one the server is
 * still applying when the caller gives up on it (git_timeout): it lands just before the next push
 * is judged, if the remote is still at the commit it was made on.
 */
type PushStep = PushOutcome | Error | { lost: Error } | { late: Error };

/** An in-memory lock repository: one remote branch and one working copy, in lock vocabulary. */
class FakeStore implements LockStore {
  remote: Snapshot;
  remoteCommit = 'c0';
  private local: Snapshot;
  private localCommit = 'c0';
  /** The changes staged for the next commit() (an update to the same bytes is ineffective). */
  private staged: { change: Change; effective: boolean }[] = [];
  private commits = 0;
  readonly log: string[] = [];
  readonly messages: string[] = [];
  /** Failures for the next sync() calls, in order. */
  syncFailures: Error[] = [];
  pushes: PushStep[] = [];
  /** Runs just before a push is judged (another writer can move the remote first). */
  beforePush: (() => void) | undefined;
  /** A push the server is still applying (see PushStep). */
  private inFlight: { snapshot: Snapshot; commit: string; parent: string } | undefined;
  /** The pool's waiting line on the remote, and as the last sync fetched it. */
  line: WaitingEntry[] = [];
  private syncedEntries: WaitingEntry[] = [];
  /** The remote refuses the line's refs. */
  refuseLine = false;
  /** Looks go over a kept connection (see LockStore.looksAreCheap). */
  looksAreCheap = false;
  /** Each lock's file, as `match` reads it (empty when not set). */
  files = new Map<string, string>();
  /** The remote's state at each commit it has had: a fetch by id (syncTo) gets any of them. */
  private readonly history = new Map<string, Snapshot>();

  constructor(claimed: string[], unclaimed: string[]) {
    this.remote = {
      claimed: new Set(claimed),
      unclaimed: new Set(unclaimed),
      touchedBy: new Map(),
    };
    for (const name of [...claimed, ...unclaimed]) this.remote.touchedBy.set(name, 'c0');
    this.local = copy(this.remote);
    this.remember();
  }

  /** The remote's commits in order, and the line token of the put each claim was made by. */
  private readonly order: string[] = [];
  private readonly claimedBy = new Map<string, string>();
  lineInferred = false;

  /** Keeps the remote's state at its current commit (see history). */
  private remember(): void {
    this.history.set(this.remoteCommit, copy(this.remote));
    this.order.push(this.remoteCommit);
  }

  /** A put in line (`token`) claims lock `name`: its push takes its entry out of the line. */
  otherClaimsInLine(name: string, token: string): void {
    this.otherMoves(name, 'claimed');
    this.claimedBy.set(this.remoteCommit, token);
    this.line = this.line.filter((entry) => entry.token !== token);
  }

  /** The server finishes applying a push whose client gave up (see PushStep). */
  settle(): void {
    if (this.inFlight?.parent === this.remoteCommit) {
      this.remote = this.inFlight.snapshot;
      this.remoteCommit = this.inFlight.commit;
      this.remember();
    }
    this.inFlight = undefined;
  }

  /** Another build claims (`to` claimed) or releases (`to` unclaimed) a lock and pushes. */
  otherMoves(name: string, to: LockState): void {
    this.otherWriter((remote) => {
      (to === 'claimed' ? remote.unclaimed : remote.claimed).delete(name);
      (to === 'claimed' ? remote.claimed : remote.unclaimed).add(name);
      return name;
    });
  }

  /** Another clone changes the pool and pushes. */
  otherWriter(change: (pool: Snapshot) => string): void {
    const name = change(this.remote);
    this.remoteCommit = `other-${++this.commits}`;
    this.remote.touchedBy.set(name, this.remoteCommit);
    this.remember();
  }

  count(action: string): number {
    return this.log.filter((entry) => entry.startsWith(action)).length;
  }

  async sync(): Promise<string> {
    this.log.push('sync');
    const failure = this.syncFailures.shift();
    if (failure) throw failure;
    this.local = copy(this.remote);
    this.localCommit = this.remoteCommit;
    this.staged = [];
    this.syncedEntries = [...this.line];
    this.lineInferred = false;
    return this.localCommit;
  }

  async syncTo(seen: { tip: string; line: WaitingEntry[]; since?: string }): Promise<string> {
    this.log.push(seen.since === undefined ? 'syncTo' : 'syncTo since');
    return this.moveTo(seen);
  }

  /** What each syncAfterLostRace was told: whether the line may be inferred. */
  readonly lostRaceInfers: boolean[] = [];

  /** With tipWatched, the tip that won is fetched on the kept session (no sync). */
  async syncAfterLostRace(inferLine: boolean): Promise<string | undefined> {
    this.lostRaceInfers.push(inferLine);
    if (!this.tipWatched || !inferLine || this.remoteCommit === this.localCommit) return undefined;
    this.log.push('fetch the winner');
    const since = this.localCommit;
    return this.moveTo({ tip: this.remoteCommit, line: this.syncedEntries, since });
  }

  private moveTo(seen: { tip: string; line: WaitingEntry[]; since?: string }): string {
    const snapshot = this.history.get(seen.tip);
    if (!snapshot) throw new Error(`the remote never had ${seen.tip}`);
    this.local = copy(snapshot);
    this.localCommit = seen.tip;
    this.staged = [];
    const after =
      seen.since === undefined
        ? []
        : this.order.slice(this.order.indexOf(seen.since) + 1, this.order.indexOf(seen.tip) + 1);
    const left = new Set(after.map((commit) => this.claimedBy.get(commit)));
    this.syncedEntries = seen.line.filter((entry) => !left.has(entry.token));
    this.lineInferred = seen.since !== undefined;
    return this.localCommit;
  }

  syncedLine(): WaitingEntry[] {
    return this.syncedEntries;
  }

  async look(): Promise<{ tip: string | undefined; line: WaitingEntry[] }> {
    this.log.push('look');
    return { tip: this.remoteCommit, line: [...this.line] };
  }

  /** The branch tip can be read at no connection (see LockStore.tipNow). */
  tipWatched = false;

  async tipNow(): Promise<string | undefined> {
    if (!this.tipWatched) return undefined;
    this.log.push('tipNow');
    return this.remoteCommit;
  }

  unwatch(): void {
    if (this.tipWatched) this.log.push('unwatch');
  }

  /** What holdHistory answers: no hold seen, unless a test says otherwise. */
  holdsSeen: HoldHistory = { claimedAt: new Map(), holds: [], claims: [] };

  async holdHistory(): Promise<HoldHistory> {
    this.log.push('holdHistory');
    return this.holdsSeen;
  }

  /** When each commit was made, for commitTime (unknown for any other). */
  readonly commitTimes = new Map<string, number>();

  async commitTime(commit: string): Promise<number | undefined> {
    this.log.push('commitTime');
    return this.commitTimes.get(commit);
  }

  async join(entry: WaitingEntry): Promise<boolean> {
    this.log.push('join');
    if (this.refuseLine) return false;
    this.line = [
      ...this.line.filter((other) => other.token !== entry.token),
      { ...entry, at: this.localCommit },
    ];
    return true;
  }

  async leave(entries: readonly WaitingEntry[], signal?: AbortSignal): Promise<void> {
    this.log.push(`leave ${entries.map((entry) => entry.token).join(' ')}`);
    if (signal?.aborted) throw new CancelledError(signal.reason);
    const tokens = new Set(entries.map((entry) => entry.token));
    this.line = this.line.filter((entry) => !tokens.has(entry.token));
  }

  async pool(): Promise<PoolState> {
    return { claimed: this.local.claimed, unclaimed: this.local.unclaimed, irregular: new Map() };
  }

  async metadata(names: readonly string[]): Promise<Map<string, LockMetadata>> {
    this.log.push(`metadata ${names.join(' ')}`);
    return new Map(
      names.map((name) => [name, readLockMetadata(Buffer.from(this.files.get(name) ?? ''))]),
    );
  }

  async apply(change: Change): Promise<void> {
    this.log.push(`apply ${change.kind} ${change.name}`);
    const set = (state: LockState) =>
      state === 'claimed' ? this.local.claimed : this.local.unclaimed;
    switch (change.kind) {
      case 'move':
        set(change.from).delete(change.name);
        set(change.to).add(change.name);
        break;
      case 'write': {
        const unchanged =
          set(change.state).has(change.name) && change.content.toString() === 'same';
        set(change.state).add(change.name);
        this.staged.push({ change, effective: !unchanged });
        return;
      }
      case 'delete':
        set(change.state).delete(change.name);
        break;
      case 'none':
        break;
    }
    this.staged.push({ change, effective: true });
  }

  async hasStagedChanges(): Promise<boolean> {
    return this.staged.some(({ effective }) => effective);
  }

  async commit(messages: readonly string[]): Promise<string[]> {
    const ids = this.staged.map(({ change }, index) => {
      this.localCommit = `c${++this.commits}`;
      this.log.push(`commit ${this.localCommit}`);
      this.messages.push(messages[index]!);
      this.local.touchedBy.set(change.name, this.localCommit);
      return this.localCommit;
    });
    this.staged = [];
    return ids;
  }

  async push(_signal?: AbortSignal, leaving?: WaitingEntry): Promise<PushOutcome> {
    this.log.push(leaving ? 'push leaving' : 'push');
    this.beforePush?.();
    this.settle();
    const step = this.pushes.shift() ?? 'pushed';
    const land = () => {
      this.remote = copy(this.local);
      this.remoteCommit = this.localCommit;
      this.remember();
      if (leaving) this.claimedBy.set(this.remoteCommit, leaving.token);
      if (leaving) this.line = this.line.filter((entry) => entry.token !== leaving.token);
    };
    if (step instanceof Error) throw step;
    if (typeof step === 'object' && 'late' in step) {
      this.inFlight = {
        snapshot: copy(this.local),
        commit: this.localCommit,
        parent: this.remoteCommit,
      };
      throw step.late;
    }
    if (typeof step === 'object') {
      land();
      throw step.lost;
    }
    if (step === 'pushed') land();
    return step;
  }

  async lastCommitOf(_state: LockState, name: string): Promise<string> {
    return this.local.touchedBy.get(name) ?? this.localCommit;
  }

  async holds(claim: Claim): Promise<boolean> {
    this.log.push(`holds ${claim.commit}`);
    return (
      this.local.claimed.has(claim.name) && this.local.touchedBy.get(claim.name) === claim.commit
    );
  }

  /** The claims the branch's history records, by lock (leases, fencing). */
  claimFacts = new Map<string, ClaimFacts>();
  /** The reclaims it records, by `name token`. */
  reclaims = new Map<string, ReclaimFacts>();

  async claims(names: readonly string[]): Promise<Map<string, ClaimFacts> | undefined> {
    this.log.push(`claims ${names.join(',')}`);
    return new Map(names.map((name) => [name, this.claimFacts.get(name) ?? {}]));
  }

  async reclaimOf(name: string, token: string): Promise<ReclaimFacts | undefined> {
    return this.reclaims.get(`${name} ${token}`);
  }
}

/** Time that passes only when the policy sleeps. */
class FakeClock implements Clock {
  time = 1_000_000;
  readonly sleeps: number[] = [];
  /** Called after each sleep with its index (0-based): the world can change meanwhile. */
  onSleep: ((index: number) => void) | undefined;

  constructor(private readonly randomValue = 0.5) {}

  now(): number {
    return this.time;
  }

  async sleep(ms: number, signal: AbortSignal): Promise<void> {
    if (signal.aborted) throw new CancelledError(signal.reason);
    this.sleeps.push(ms);
    this.time += ms;
    this.onSleep?.(this.sleeps.length - 1);
    if (signal.aborted) throw new CancelledError(signal.reason);
  }

  random(): number {
    return this.randomValue;
  }
}

class RecordingReporter implements PoolReporter {
  readonly waits: string[] = [];
  /** The locks each wait named as wanted (whose holders progress shows). */
  readonly wanted: (readonly string[])[] = [];
  readonly conflicts: string[] = [];
  readonly transients: { message: string; attempt: number; delayMs: number }[] = [];
  /** The tip each wait named, where who holds the wanted locks is read. */
  readonly tips: (string | undefined)[] = [];

  waiting(reason: string, wanted: readonly string[], _waitedMs: number, tip?: string): void {
    this.waits.push(reason);
    this.wanted.push(wanted);
    this.tips.push(tip);
  }

  conflict(name: string): void {
    this.conflicts.push(name);
  }

  transient(error: unknown, attempt: number, delayMs: number): void {
    this.transients.push({ message: describeError(error), attempt, delayMs });
  }

  readonly lines: string[] = [];
  line(message: string): void {
    this.lines.push(message);
  }
}

function setup(
  store: FakeStore,
  options: {
    clock?: FakeClock;
    signal?: AbortSignal;
    /** This put's token in the waiting line (none: no line, as the reference). */
    lineToken?: string;
    waitTimeoutMs?: number;
    waitTimeoutSetting?: string;
    leaseGraceMs?: number;
    retryDelayMs?: number;
  } = {},
) {
  const clock = options.clock ?? new FakeClock();
  const reporter = new RecordingReporter();
  const pool = new LockPool(
    store,
    clock,
    reporter,
    {
      pool: 'envs',
      retryDelayMs: options.retryDelayMs ?? RETRY_DELAY_MS,
      lineToken: options.lineToken,
      waitTimeoutMs: options.waitTimeoutMs,
      waitTimeoutSetting: options.waitTimeoutSetting,
      leaseGraceMs: options.leaseGraceMs,
      reclaimedBy: 'https://ci/reaper',
      message: ({ subject, claiming }) => `${subject}${claiming ? ' [claiming]' : ''}`,
    },
    options.signal ?? new AbortController().signal,
  );
  return { pool, clock, reporter };
}

const gitFailure = (text: string) => new GitCommandError(['fetch'], 128, '', text);
const pushHungUp = () => new GitCommandError(['push'], 128, '', 'the remote end hung up');

describe('LockPool', () => {
  it('takes a free lock with one commit and one push, without sleeping', async () => {
    const store = new FakeStore([], ['lock-a']);
    const { pool, clock } = setup(store);
    expect(await pool.run({ kind: 'acquire' })).toEqual({
      ref: 'c1',
      name: 'lock-a',
      names: ['lock-a'],
    });
    expect(store.log).toEqual(['sync', 'apply move lock-a', 'commit c1', 'push']);
    expect(store.messages).toEqual(['claiming: lock-a [claiming]']);
    expect(store.remote.claimed).toEqual(new Set(['lock-a']));
    expect(clock.sleeps).toEqual([]);
  });

  it('retries a rejected push at once from the new tip (a short jitter, never retry_delay)', async () => {
    const store = new FakeStore([], ['lock-a', 'lock-b']);
    store.pushes = ['rejected', 'rejected', 'pushed'];
    const { pool, clock, reporter } = setup(store, { clock: new FakeClock(0.5) });
    const outcome = await pool.run({ kind: 'claim', name: 'lock-b' });
    expect(outcome).toEqual({ ref: 'c3', name: 'lock-b', names: ['lock-b'] });
    expect(store.count('sync')).toBe(3);
    expect(store.count('push')).toBe(3);
    expect(reporter.conflicts).toEqual(['lock-b', 'lock-b']);
    expect(reporter.waits).toEqual([]);
    expect(clock.sleeps).toHaveLength(2);
    for (const ms of clock.sleeps) expect(ms).toBeLessThan(200);
  });

  it('retries a release that lost a race with no jitter: the put it frees a lock for waits on it', async () => {
    const store = new FakeStore(['lock-a'], ['lock-b']);
    store.pushes = ['rejected', 'rejected', 'pushed'];
    const { pool, clock, reporter } = setup(store, { clock: new FakeClock(0.5) });
    const outcome = await pool.run({ kind: 'release', name: 'lock-a' });
    expect(outcome).toEqual({ ref: 'c3', name: 'lock-a', names: ['lock-a'] });
    expect(store.count('sync')).toBe(3);
    expect(reporter.conflicts).toEqual(['lock-a', 'lock-a']);
    expect(clock.sleeps).toEqual([]);
    expect(store.remote.unclaimed).toEqual(new Set(['lock-a', 'lock-b']));
  });

  it('starts again from the tip that won, fetched where that costs no connection: no sync', async () => {
    const store = new FakeStore(['lock-a', 'lock-c'], ['lock-b']);
    store.tipWatched = true;
    // Two other writers land first, one before each of its first two pushes.
    const others: [string, LockState][] = [
      ['lock-b', 'claimed'],
      ['lock-c', 'unclaimed'],
    ];
    store.beforePush = () => {
      const other = others.shift();
      if (!other) return;
      store.otherMoves(...other);
      store.pushes.unshift('rejected');
    };
    const { pool, reporter } = setup(store);
    expect((await pool.run({ kind: 'release', name: 'lock-a' })).name).toBe('lock-a');
    expect(reporter.conflicts).toEqual(['lock-a', 'lock-a']);
    expect(store.count('sync')).toBe(1);
    expect(store.count('fetch the winner')).toBe(2);
    // Each attempt built on the one before it lost to: nothing the others did is undone.
    expect(store.remote.claimed).toEqual(new Set(['lock-b']));
    expect(store.remote.unclaimed).toEqual(new Set(['lock-a', 'lock-c']));
  });

  it('treats an "Everything up-to-date" push like a lost race', async () => {
    const store = new FakeStore([], ['lock-a']);
    store.pushes = ['up-to-date', 'pushed'];
    const { pool, clock, reporter } = setup(store);
    expect(await pool.run({ kind: 'acquire' })).toEqual({
      ref: 'c2',
      name: 'lock-a',
      names: ['lock-a'],
    });
    expect(reporter.conflicts).toEqual(['lock-a']);
    expect(clock.sleeps.every((ms) => ms < 200)).toBe(true);
  });

  it('after losing the only free lock to another writer, waits retry_delay for it', async () => {
    const store = new FakeStore([], ['lock-a']);
    // Another build takes lock-a between our read and our push.
    store.beforePush = () => {
      store.beforePush = undefined;
      store.otherMoves('lock-a', 'claimed');
      store.pushes.unshift('rejected');
    };
    const { pool, clock, reporter } = setup(store, { clock: new FakeClock(0) });
    // It releases it while we wait (after our second poll).
    clock.onSleep = (index) => {
      if (index === 2) store.otherMoves('lock-a', 'unclaimed');
    };
    const outcome = await pool.run({ kind: 'acquire' });
    expect(outcome.name).toBe('lock-a');
    expect(reporter.conflicts).toEqual(['lock-a']);
    expect(reporter.waits[0]).toBe('no unclaimed lock in pool "envs" (1 claimed, 0 unclaimed)');
    // Jitter 0 after the lost race; the first poll at a random point of retry_delay (0 here),
    // then one retry_delay later.
    expect(clock.sleeps).toEqual([0, 0, RETRY_DELAY_MS]);
    expect(store.remote.claimed).toEqual(new Set(['lock-a']));
  });

  it('waits retry_delay only while nothing is free, polling the tip without fetching', async () => {
    // The first poll comes at a random point of retry_delay (half of it with this clock), so
    // puts that started together do not poll in lockstep; then one every retry_delay.
    const store = new FakeStore(['lock-a', 'lock-b'], []);
    const { pool, clock, reporter } = setup(store);
    clock.onSleep = (index) => {
      if (index === 3) store.otherMoves('lock-b', 'unclaimed');
    };
    expect(await pool.run({ kind: 'acquire' })).toEqual({
      ref: 'c2',
      name: 'lock-b',
      names: ['lock-b'],
    });
    expect(clock.sleeps).toEqual([
      RETRY_DELAY_MS / 2,
      RETRY_DELAY_MS,
      RETRY_DELAY_MS,
      RETRY_DELAY_MS,
    ]);
    // One fetch before the wait, one after the tip moved; the polls in between only look.
    expect(store.count('sync')).toBe(2);
    expect(store.count('look')).toBe(4);
    expect(reporter.waits).toHaveLength(4);
    expect(store.count('commit')).toBe(1);
  });

  it('where the tip is watched (git://), polls it on the watch instead of looking', async () => {
    const store = new FakeStore(['lock-a', 'lock-b'], []);
    store.tipWatched = true;
    const { pool, clock } = setup(store);
    clock.onSleep = (index) => {
      if (index === 3) store.otherMoves('lock-b', 'unclaimed');
    };
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-b');
    expect(store.count('tipNow')).toBe(4);
    expect(store.count('look')).toBe(0);
    expect(store.count('sync')).toBe(2);
  });

  it.each([
    ['the put', undefined, '(params.wait_timeout)'],
    ['the pool command', '--wait-timeout', '(--wait-timeout)'],
  ])('names the wait timeout as %s calls it when it runs out', async (_t, setting, named) => {
    const store = new FakeStore(['lock-a'], []);
    const { pool } = setup(store, { waitTimeoutMs: 3_000, waitTimeoutSetting: setting });
    const error = await pool.run({ kind: 'claim', name: 'lock-a' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WaitTimeoutError);
    expect(describeError(error)).toBe(
      `timed out after 3s ${named} waiting: lock "lock-a" in pool "envs" is claimed (1 claimed, 0 unclaimed)`,
    );
  });

  it.each<[string, ResolvedOperation, string[], string[]]>([
    ['claim of a claimed lock', { kind: 'claim', name: 'a' }, ['a'], []],
    ['claim of a lock that exists nowhere', { kind: 'claim', name: 'x' }, [], ['a']],
    [
      'update of a claimed lock',
      { kind: 'update', name: 'a', metadata: Buffer.from('m') },
      ['a'],
      [],
    ],
    ['check of a claimed lock', { kind: 'check', name: 'a' }, ['a'], []],
    ['check_unclaimed of an unclaimed lock', { kind: 'check_unclaimed', name: 'a' }, [], ['a']],
  ])(
    '%s waits retry_delay until the pool changes',
    async (_title, operation, claimed, unclaimed) => {
      const store = new FakeStore(claimed, unclaimed);
      const { pool, clock } = setup(store);
      clock.onSleep = () => {
        store.otherWriter((remote) => {
          remote.claimed.clear();
          remote.unclaimed.clear();
          const name = 'name' in operation ? operation.name : 'a';
          (operation.kind === 'check_unclaimed' ? remote.claimed : remote.unclaimed).add(name);
          return name;
        });
      };
      await pool.run(operation);
      expect(clock.sleeps).toEqual([RETRY_DELAY_MS / 2]);
    },
  );

  it('retries transient failures a bounded number of times with backoff, then reports git', async () => {
    const store = new FakeStore([], ['lock-a']);
    store.syncFailures = Array.from({ length: 10 }, () =>
      gitFailure('unable to connect to 127.0.0.1: Connection refused'),
    );
    const { pool, clock, reporter } = setup(store);
    const error = await pool.run({ kind: 'acquire' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GaveUpError);
    expect(describeError(error)).toBe(
      `gave up after ${TRANSIENT_RETRIES + 1} attempts: git fetch failed (exit 128): unable to connect to 127.0.0.1: Connection refused`,
    );
    expect(store.count('sync')).toBe(TRANSIENT_RETRIES + 1);
    expect(clock.sleeps).toEqual([500, 1000, 2000, 4000]);
    expect(reporter.transients.map((t) => t.attempt)).toEqual([1, 2, 3, 4]);
    expect(store.count('commit')).toBe(0);
  });

  it('gives a command that outlived git_timeout one more try only', async () => {
    const store = new FakeStore([], ['lock-a']);
    store.syncFailures = Array.from({ length: 10 }, () => new GitTimeoutError(['fetch'], 300_000));
    const { pool, clock } = setup(store);
    const error = await pool.run({ kind: 'acquire' }).catch((e: unknown) => e);
    expect(describeError(error)).toBe(
      'gave up after 2 attempts: git fetch timed out after 5m (source.git_timeout)',
    );
    expect(store.count('sync')).toBe(2);
    expect(clock.sleeps).toEqual([500]);
  });

  it('fails at once with its own message on a TypeError from the store: a bug is not retried', async () => {
    const store = new FakeStore([], ['lock-a']);
    store.syncFailures = [new TypeError("Cannot read properties of undefined (reading 'trim')")];
    const { pool, clock, reporter } = setup(store);
    const error = await pool.run({ kind: 'acquire' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TypeError);
    expect(describeError(error)).toBe("Cannot read properties of undefined (reading 'trim')");
    expect(store.count('sync')).toBe(1);
    expect(clock.sleeps).toEqual([]);
    expect(reporter.transients).toEqual([]);
  });

  it.each(['ECONNRESET', 'ECONNREFUSED', 'ETIMEDOUT', 'EPIPE', 'EAI_AGAIN', 'EHOSTUNREACH'])(
    'retries a network error (%s) as it retries a failed git command',
    async (code) => {
      const store = new FakeStore([], ['lock-a']);
      store.syncFailures = [Object.assign(new Error(`read ${code}`), { code })];
      const { pool, clock, reporter } = setup(store);
      expect(await pool.run({ kind: 'acquire' })).toEqual({
        ref: 'c1',
        name: 'lock-a',
        names: ['lock-a'],
      });
      expect(clock.sleeps).toEqual([500]);
      expect(reporter.transients).toEqual([{ message: `read ${code}`, attempt: 1, delayMs: 500 }]);
    },
  );

  it('carries on after a transient failure that goes away', async () => {
    const store = new FakeStore([], ['lock-a']);
    store.syncFailures = [gitFailure('early EOF'), gitFailure('early EOF')];
    const { pool, clock, reporter } = setup(store);
    expect(await pool.run({ kind: 'acquire' })).toEqual({
      ref: 'c1',
      name: 'lock-a',
      names: ['lock-a'],
    });
    expect(clock.sleeps).toEqual([500, 1000]);
    expect(reporter.transients).toHaveLength(2);
  });

  it('gives each new failure streak its full budget again after progress', async () => {
    const store = new FakeStore([], ['lock-a']);
    const failures = TRANSIENT_RETRIES;
    store.syncFailures = Array.from({ length: failures }, () => gitFailure('early EOF'));
    store.pushes = ['rejected'];
    let injected = false;
    store.beforePush = () => {
      if (injected) return;
      injected = true;
      store.syncFailures = Array.from({ length: failures }, () => gitFailure('early EOF'));
    };
    const { pool } = setup(store);
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
  });

  it('finds its claim on the remote after a push whose result was lost, and does not claim twice', async () => {
    const store = new FakeStore([], ['lock-a', 'lock-b']);
    store.pushes = [{ lost: pushHungUp() }];
    const { pool, reporter } = setup(store, { clock: new FakeClock(0) });
    const outcome = await pool.run({ kind: 'acquire' });
    expect(outcome).toEqual({ ref: 'c1', name: 'lock-a', names: ['lock-a'] });
    expect(store.log).toEqual([
      'sync',
      'apply move lock-a',
      'commit c1',
      'push',
      'sync',
      'holds c1',
    ]);
    expect(reporter.transients).toHaveLength(1);
    expect(store.remote.claimed).toEqual(new Set(['lock-a']));
    expect(store.remote.unclaimed).toEqual(new Set(['lock-b']));
  });

  it('claims again when the push that failed never reached the remote', async () => {
    const store = new FakeStore([], ['lock-a']);
    store.pushes = [pushHungUp()];
    const { pool } = setup(store);
    expect(await pool.run({ kind: 'acquire' })).toEqual({
      ref: 'c2',
      name: 'lock-a',
      names: ['lock-a'],
    });
    expect(store.count('holds')).toBe(1);
    expect(store.count('commit')).toBe(2);
    expect(pool.pendingClaims()).toEqual([
      { locks: [{ name: 'lock-a', commit: 'c2' }], parent: 'c0' },
    ]);
  });

  it('takes the claim a timed-out push landed late, and claims no second lock', async () => {
    const store = new FakeStore([], ['lock-a', 'lock-b']);
    // The server is still applying the first claim when the retry syncs; it lands just before
    // the retry's own push, which it therefore beats.
    store.pushes = [{ late: new GitTimeoutError(['push'], 1_000) }, 'rejected'];
    const { pool } = setup(store, { clock: new FakeClock(0) });
    const outcome = await pool.run({ kind: 'acquire' });
    expect(outcome).toEqual({ ref: 'c1', name: 'lock-a', names: ['lock-a'] });
    expect(store.remote.claimed).toEqual(new Set(['lock-a']));
    expect(store.remote.unclaimed).toEqual(new Set(['lock-b']));
    expect(store.count('commit')).toBe(2);
    expect(pool.pendingClaims()).toEqual([
      { locks: [{ name: 'lock-a', commit: 'c1' }], parent: 'c0', unanswered: true },
    ]);
  });

  it('drops a claim whose push timed out once the branch moved on without it', async () => {
    const store = new FakeStore([], ['lock-a', 'lock-b']);
    store.pushes = [new GitTimeoutError(['push'], 1_000)];
    // Another build changes the pool while we back off: the lost claim can no longer land.
    store.beforePush = () => {
      store.beforePush = undefined;
      store.otherMoves('lock-b', 'claimed');
    };
    const { pool } = setup(store, { clock: new FakeClock(0) });
    expect(await pool.run({ kind: 'acquire' })).toEqual({
      ref: 'c3',
      name: 'lock-a',
      names: ['lock-a'],
    });
    expect(pool.pendingClaims()).toEqual([
      { locks: [{ name: 'lock-a', commit: 'c3' }], parent: 'other-2' },
    ]);
    expect(store.remote.claimed).toEqual(new Set(['lock-a', 'lock-b']));
  });

  it('forgets a claim whose push was rejected (nothing to release after an abort)', async () => {
    const store = new FakeStore([], ['lock-a']);
    store.pushes = ['rejected'];
    let seen: PendingClaim[] = [];
    const controller = new AbortController();
    const { pool } = setup(store, { signal: controller.signal });
    store.beforePush = () => {
      seen = [...pool.pendingClaims()];
      // Abort while the rejected push is on its way back.
      controller.abort(new Error('stopped by SIGTERM'));
    };
    await expect(pool.run({ kind: 'acquire' })).rejects.toBeInstanceOf(CancelledError);
    expect(seen).toEqual([{ locks: [{ name: 'lock-a', commit: 'c1' }], parent: 'c0' }]);
    expect(pool.pendingClaims()).toEqual([]);
  });

  it.each<[string, ResolvedOperation, string[], string[]]>([
    ['release of an unclaimed lock', { kind: 'release', name: 'a' }, [], ['a']],
    ['remove of a lock that exists nowhere', { kind: 'remove', name: 'x' }, [], []],
    ['add of an existing name', { kind: 'add', name: 'a', metadata: Buffer.from('m') }, ['a'], []],
    ['check of a lock that exists nowhere', { kind: 'check', name: 'x' }, [], []],
  ])(
    '%s fails at once, without retrying or committing',
    async (_t, operation, claimed, unclaimed) => {
      const store = new FakeStore(claimed, unclaimed);
      const { pool, clock } = setup(store);
      await expect(pool.run(operation)).rejects.toBeInstanceOf(OperationError);
      expect(store.count('sync')).toBe(1);
      expect(store.count('commit')).toBe(0);
      expect(clock.sleeps).toEqual([]);
    },
  );

  it('answers a check with the tip it observed, committing nothing', async () => {
    const store = new FakeStore([], ['a']);
    const { pool } = setup(store);
    expect(await pool.run({ kind: 'check', name: 'a' })).toEqual({
      ref: 'c0',
      name: 'a',
      names: ['a'],
    });
    expect(store.count('commit')).toBe(0);
  });

  it('answers an update that changes nothing with the commit that last changed the lock', async () => {
    const store = new FakeStore([], ['a']);
    store.otherWriter(() => 'a');
    store.otherWriter(() => 'b');
    const { pool } = setup(store);
    expect(await pool.run({ kind: 'update', name: 'a', metadata: Buffer.from('same') })).toEqual({
      ref: 'other-1',
      name: 'a',
      names: ['a'],
    });
    expect(store.count('commit')).toBe(0);
    expect(store.count('push')).toBe(0);
  });

  it('stops waiting when cancelled, with nothing committed', async () => {
    const store = new FakeStore(['a'], []);
    const controller = new AbortController();
    const { pool, clock } = setup(store, { signal: controller.signal });
    clock.onSleep = (index) => {
      if (index === 1) controller.abort(new Error('stopped by SIGTERM'));
    };
    await expect(pool.run({ kind: 'acquire' })).rejects.toBeInstanceOf(CancelledError);
    expect(clock.sleeps).toEqual([RETRY_DELAY_MS / 2, RETRY_DELAY_MS]);
    expect(store.count('commit')).toBe(0);
  });

  it('does not retry a cancelled run as if it were a transient failure', async () => {
    const store = new FakeStore([], ['a']);
    const controller = new AbortController();
    controller.abort(new Error('stopped'));
    const { pool } = setup(store, { signal: controller.signal });
    await expect(pool.run({ kind: 'acquire' })).rejects.toBeInstanceOf(CancelledError);
    expect(store.log).toEqual([]);
  });
});

describe('LockPool with leases', () => {
  it('an acquire with reclaim_expired wakes when the lease runs out, and reclaims and claims in one push', async () => {
    const store = new FakeStore(['a'], []);
    const clock = new FakeClock();
    store.claimFacts.set('a', { token: 'old', leaseExpires: new Date(clock.time + 2_500) });
    const { pool } = setup(store, { clock, leaseGraceMs: 1_000 });
    expect(await pool.run({ kind: 'acquire', reclaimExpired: true })).toMatchObject({
      name: 'a',
      reclaimed: [{ name: 'a', token: 'old' }],
    });
    // Nothing moved on the branch: the wait ended when lease + grace had passed.
    expect(clock.time).toBeGreaterThan(1_000_000 + 3_500);
    expect(clock.time).toBeLessThan(1_000_000 + 3_500 + RETRY_DELAY_MS);
    expect(store.messages).toEqual(['unclaiming: a', 'claiming: a [claiming]']);
    expect(store.count('push')).toBe(1);
  });

  it('refuses a release from another claim’s folder, committing nothing, and names the holder', async () => {
    const store = new FakeStore(['a'], []);
    store.claimFacts.set('a', { token: 'new', by: 'https://ci/b/2', since: new Date(0) });
    const { pool } = setup(store);
    await expect(pool.run({ kind: 'release', name: 'a', token: 'mine' })).rejects.toThrow(
      'lock a is no longer held by this claim (claimed since 1970-01-01T00:00:00Z by https://ci/b/2)',
    );
    store.reclaims.set('a mine', { at: new Date(1000), reason: 'lease expired at X' });
    await expect(pool.run({ kind: 'release', name: 'a', token: 'mine' })).rejects.toThrow(
      'lock a is no longer held by this claim (reclaimed at 1970-01-01T00:00:01Z: lease expired at X)',
    );
    expect(store.count('commit')).toBe(0);
    expect(await pool.run({ kind: 'release', name: 'a', token: 'new' })).toMatchObject({
      name: 'a',
    });
    expect(await pool.run({ kind: 'update', name: 'a', metadata: Buffer.from('x') })).toMatchObject(
      {
        name: 'a',
      },
    );
  });
});

describe('releaseAbandonedClaim', () => {
  /** A store whose claim of lock-a (c1, made on c0) got no answer; the server still has it. */
  async function claimInFlight(): Promise<{ store: FakeStore; claim: PendingClaim }> {
    const store = new FakeStore([], ['lock-a']);
    await store.sync();
    await store.apply({ kind: 'move', name: 'lock-a', from: 'unclaimed', to: 'claimed' });
    const commit = (await store.commit(['claiming: lock-a']))[0]!;
    store.pushes = [{ late: new GitTimeoutError(['push'], 1_000) }];
    await expect(store.push()).rejects.toBeInstanceOf(GitTimeoutError);
    return {
      store,
      claim: { locks: [{ name: 'lock-a', commit }], parent: 'c0', unanswered: true },
    };
  }

  it('waits for a claim the server may still apply, and releases it once it lands', async () => {
    const { store, claim } = await claimInFlight();
    const clock = new FakeClock();
    clock.onSleep = (index) => {
      if (index === 2) store.settle();
    };
    const result = await releaseAbandonedClaim(
      store,
      claim,
      (name) => `unclaiming: ${name}`,
      new AbortController().signal,
      clock,
    );
    expect(result).toBe('released');
    expect(clock.sleeps).toEqual([500, 500, 500]);
    expect(store.remote.unclaimed).toEqual(new Set(['lock-a']));
    expect(store.remote.claimed).toEqual(new Set());
  });

  it('says the claim may still land when its deadline comes first', async () => {
    const { store, claim } = await claimInFlight();
    const clock = new FakeClock();
    const deadline = new AbortController();
    clock.onSleep = (index) => {
      if (index === 1) deadline.abort(new Error('deadline'));
    };
    await expect(
      releaseAbandonedClaim(store, claim, (name) => `unclaiming: ${name}`, deadline.signal, clock),
    ).rejects.toThrow(/the server may still apply it/);
    expect(store.count('commit')).toBe(1);
  });

  it('does not wait for a claim whose push was never sent, or once the branch moved on', async () => {
    const { store, claim } = await claimInFlight();
    const clock = new FakeClock();
    const signal = new AbortController().signal;
    expect(
      await releaseAbandonedClaim(store, { ...claim, unanswered: false }, () => 'm', signal, clock),
    ).toBe('not-held');
    store.otherWriter((remote) => {
      remote.unclaimed.add('lock-b');
      return 'lock-b';
    });
    expect(await releaseAbandonedClaim(store, claim, () => 'm', signal, clock)).toBe('not-held');
    expect(clock.sleeps).toEqual([]);
  });
});

/** An entry of another put in the line, `ago` ms before the fake clock's start. */
function waiting(token: string, ago = 1_000): WaitingEntry {
  return { since: 1_000_000 - ago, retryDelayMs: RETRY_DELAY_MS, token };
}

/** frontPollMs and goneAfterMs for RETRY_DELAY_MS (waiting-line.ts). */
const FRONT_POLL_MS = RETRY_DELAY_MS / 5;
const GONE_AFTER_MS = 2 * RETRY_DELAY_MS + 2_000;
/** farPollMs for RETRY_DELAY_MS. */
const FAR_POLL_MS = 2 * RETRY_DELAY_MS + 1_000;

/** A put in line acquires lock-a, which its holder releases at the put's fifth sleep. */
async function acquireReleasedAtFifthSleep(store: FakeStore): Promise<FakeClock> {
  const { pool, clock } = setup(store, { lineToken: 'me' });
  clock.onSleep = (index) => {
    if (index === 4) store.otherMoves('lock-a', 'unclaimed');
  };
  expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
  return clock;
}

/**
 * A put second in line behind `ahead`, both locks held: lock-a claimed as it starts, lock-b 20 s
 * later, and the holds the history shows lasted 30 s.
 */
function secondInLine(ahead: string) {
  const store = new FakeStore(['lock-a', 'lock-b'], []);
  store.line = [waiting(ahead)];
  const claimedAt = new Map([
    ['lock-a', 1_000_000],
    ['lock-b', 1_000_000 + 20_000],
  ]);
  store.holdsSeen = { claimedAt, holds: [30_000], claims: [] };
  return { store, claimedAt, ...setup(store, { lineToken: 'me' }) };
}

/** A put behind `ahead` others in line, who joined a second apart, for lock-a held by another. */
function behindInLine(ahead: number, options: { retryDelayMs: number; cheap?: boolean }) {
  const store = new FakeStore(['lock-a'], []);
  store.looksAreCheap = options.cheap ?? false;
  store.line = Array.from({ length: ahead }, (_, n) =>
    waiting(`ahead${n}`, (ahead + 1 - n) * 1_000),
  );
  return { store, ...setup(store, { lineToken: 'me', retryDelayMs: options.retryDelayMs }) };
}

/**
 * Each second from now, lock-a's holder releases it and the first in line takes it, `takes` times;
 * the release after that stays untaken.
 */
function handOverEachSecond(store: FakeStore, clock: FakeClock, takes: number) {
  let next = clock.time + 1_000;
  let taken = 0;
  clock.onSleep = () => {
    while (clock.time >= next && store.remote.claimed.has('lock-a')) {
      store.otherMoves('lock-a', 'unclaimed');
      if (taken < takes) {
        store.otherMoves('lock-a', 'claimed');
        store.line.shift();
        taken++;
      }
      next += 1_000;
    }
  };
}

describe('LockPool in the waiting line', () => {
  it('leaves a free lock to the put that has waited longer, then takes the next in its claiming push', async () => {
    const store = new FakeStore([], ['lock-a']);
    store.line = [waiting('older')];
    const setupResult = setup(store, { lineToken: 'me' });
    const { pool, clock } = setupResult;
    clock.onSleep = (index) => {
      if (index === 0) {
        store.otherMoves('lock-a', 'claimed');
        store.line = store.line.filter((entry) => entry.token !== 'older');
      }
      if (index === 2) store.otherMoves('lock-a', 'unclaimed');
    };
    const { reporter } = setupResult;
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    // First the free lock it may not take, then what it waits for once none is free.
    expect(reporter.waits).toEqual([
      'the unclaimed lock in pool "envs" goes to puts that have waited longer (0 claimed, 1 unclaimed)',
      'no unclaimed lock in pool "envs" (1 claimed, 0 unclaimed)',
      'no unclaimed lock in pool "envs" (1 claimed, 0 unclaimed)',
    ]);
    expect(store.count('join')).toBe(1);
    // Near the front the polls are fetches, a fifth of retry_delay apart (the first a random part).
    expect(clock.sleeps).toEqual([FRONT_POLL_MS / 2, FRONT_POLL_MS, FRONT_POLL_MS]);
    expect(store.log.at(-1)).toBe('push leaving');
    expect(store.line).toEqual([]);
  });

  it('at the front, with looks on a kept connection, looks at each poll and fetches once the tip moved', async () => {
    const store = new FakeStore(['lock-a'], []);
    store.looksAreCheap = true;
    const clock = await acquireReleasedAtFifthSleep(store);
    // Still a fifth of retry_delay apart, but each poll a look: one fetch to start, and after the
    // release one of the tip the look saw (the claim's attempt starts from it).
    expect(clock.sleeps.slice(1)).toEqual([
      FRONT_POLL_MS,
      FRONT_POLL_MS,
      FRONT_POLL_MS,
      FRONT_POLL_MS,
    ]);
    // At the front from the line it joined by: the holds seen tell it when to poll fast (none
    // here). Each poll a look, the fifth saw the release.
    expect(clock.sleeps[0]).toBe(FRONT_POLL_MS / 2);
    expect(store.log).toEqual([
      'sync',
      'join',
      'holdHistory',
      ...Array<string>(5).fill('look'),
      'syncTo',
      'apply move lock-a',
      'commit c2',
      'push leaving',
    ]);
  });

  it('where the tip is watched (git://), fetches only once it moved while no lock is free', async () => {
    const store = new FakeStore(['lock-a'], []);
    store.tipWatched = true;
    await acquireReleasedAtFifthSleep(store);
    // Its place was said as it joined, by the line it read: only the watch, until the release
    // moves the tip. First in line, it fetches the tip the watch saw (on the same session) and
    // claims.
    expect(store.log).toEqual([
      'sync',
      'join',
      'holdHistory',
      ...Array<string>(5).fill('tipNow'),
      'syncTo',
      'apply move lock-a',
      'commit c2',
      'push leaving',
    ]);
  });

  it('where the tip is watched, second in line, reads the claim of the put ahead from the commits it fetches', async () => {
    const store = new FakeStore(['lock-a'], []);
    store.line = [waiting('ahead')];
    store.tipWatched = true;
    const { pool, clock } = setup(store, { lineToken: 'me' });
    // lock-a is released, the put ahead claims it (its push takes it out of the line), and
    // the next release is this put's.
    clock.onSleep = (index) => {
      if (index === 2) store.otherMoves('lock-a', 'unclaimed');
      if (index === 4) store.otherClaimsInLine('lock-a', 'ahead');
      if (index === 6) store.otherMoves('lock-a', 'unclaimed');
    };
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    // After its first fetch, no look at the line and no fetch of it: each move of the tip
    // fetched on the session, the line told by the claims among its commits.
    expect(store.log.filter((entry) => entry === 'sync' || entry === 'look')).toEqual(['sync']);
    expect(store.count('syncTo since')).toBe(2);
    // First in line at the last: nobody ahead whose claim could count.
    expect(store.log.filter((entry) => entry.startsWith('syncTo')).at(-1)).toBe('syncTo');
    expect(store.log.at(-1)).toBe('push leaving');
  });

  it('where the tip is watched, further back, follows the puts ahead taking their turns on the session', async () => {
    const { store, pool, clock } = behindInLine(3, { retryDelayMs: RETRY_DELAY_MS });
    store.tipWatched = true;
    // Each second lock-a is released and the first in line claims it, three times; the fourth
    // release is this put's.
    let next = clock.time + 1_000;
    clock.onSleep = () => {
      while (clock.time >= next && store.remote.claimed.has('lock-a')) {
        store.otherMoves('lock-a', 'unclaimed');
        const first = store.line[0];
        if (first && first.token !== 'me') store.otherClaimsInLine('lock-a', first.token);
        next += 1_000;
      }
    };
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    expect(store.log.filter((entry) => entry === 'sync' || entry === 'look')).toEqual(['sync']);
    expect(store.count('syncTo since')).toBeGreaterThanOrEqual(2);
  });

  it('where the tip is watched, far back, a lock it saw free on its way to the put ahead sends it to the server no more', async () => {
    const { store, pool, clock } = behindInLine(8, { retryDelayMs: 1_000 });
    store.tipWatched = true;
    // Each second lock-a is released, and 600 ms later the first in line claims it, eight times;
    // the ninth release is this put's. Far back it polls every few seconds: some of its polls see
    // the lock free, on its way to the put ahead.
    const start = clock.time;
    let released = 0;
    let claimed = 0;
    clock.onSleep = () => {
      for (;;) {
        if (released === claimed && clock.time >= start + 1_000 * (released + 1)) {
          store.otherMoves('lock-a', 'unclaimed');
          released++;
        } else if (
          released > claimed &&
          claimed < 8 &&
          clock.time >= start + 1_000 * released + 600
        ) {
          store.otherClaimsInLine('lock-a', store.line[0]!.token);
          claimed++;
        } else break;
      }
    };
    // How many puts were ahead at each read of the line on the server, and whether a lock was free.
    const reads: { ahead: number; free: boolean }[] = [];
    for (const kind of ['look', 'sync'] as const) {
      const ask = store[kind].bind(store) as () => Promise<never>;
      store[kind] = () => {
        const ahead = store.line.filter((entry) => entry.token.startsWith('ahead')).length;
        reads.push({ ahead, free: store.remote.unclaimed.size > 0 });
        return ask();
      };
    }
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    // Far back (four puts or more ahead: FAR_BACK_LOCKS locks to go before the two next in line),
    // only the first fetch, before it joined: every move of the tip fetched on the session, the
    // line told by the claims among its commits, while the lock changed hands.
    expect(reads.filter(({ ahead }) => ahead >= 4)).toEqual([{ ahead: 8, free: false }]);
    expect(store.count('syncTo since')).toBeGreaterThanOrEqual(3);
  });

  it('where the tip is watched, reads the line on the server once a lock stood free past a hand-over', async () => {
    // The put ahead leaves the line without a claim (timed out, stopped) as the lock is freed:
    // no commit tells it.
    const store = new FakeStore(['lock-a'], []);
    store.line = [waiting('ahead')];
    store.tipWatched = true;
    const { pool, clock } = setup(store, { lineToken: 'me' });
    let freedAt = 0;
    clock.onSleep = (index) => {
      if (index !== 2) return;
      store.otherMoves('lock-a', 'unclaimed');
      store.line = store.line.filter((entry) => entry.token !== 'ahead');
      freedAt = clock.time;
    };
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    const fresh = store.log.lastIndexOf('sync');
    expect(fresh).toBeGreaterThan(store.log.indexOf('syncTo since'));
    // A hand-over takes a poll (retry_delay) and a second at most, then a poll to see it.
    expect(clock.time - freedAt).toBeLessThanOrEqual(RETRY_DELAY_MS + 1_000 + FRONT_POLL_MS);
  });

  it('where the tip is watched, fetches at each poll once a lock stood free past a hand-over', async () => {
    // The put ahead never takes the free lock: only fetches show how long it has stood free.
    const store = new FakeStore([], ['lock-a']);
    store.line = [waiting('ghost')];
    store.tipWatched = true;
    const { pool } = setup(store, { lineToken: 'me' });
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    expect(store.log).toContain('leave ghost');
    // The watch alone while the lock may be on its way to the put ahead (a retry_delay and a
    // second, at the watched front's pace after the first poll); from then on each poll fetched
    // as well.
    const polls = store.log.filter((entry) => ['tipNow', 'sync'].includes(entry)).slice(1);
    const fetched = polls.indexOf('sync');
    const watchOnly = (RETRY_DELAY_MS + 1_000 - FRONT_POLL_MS / 2) / POLL_FLOOR_MS;
    expect(polls.slice(0, fetched - 1)).toEqual(Array<string>(watchOnly).fill('tipNow'));
    expect(polls.slice(fetched - 1).join(' ')).toMatch(/^(tipNow sync ?)+$/);
  });

  it('at the front of a quiet pool, polls at retry_delay again', async () => {
    const store = new FakeStore(['lock-a'], []);
    const { pool, clock } = setup(store, { lineToken: 'me' });
    // The holder keeps lock-a for two minutes.
    clock.onSleep = () => {
      if (clock.time >= 1_000_000 + 120_000 && store.remote.claimed.has('lock-a'))
        store.otherMoves('lock-a', 'unclaimed');
    };
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    // Five polls a retry_delay while the tip moved lately (the first poll saw it, as any first
    // does), then back to retry_delay once ten of them went by without a move.
    const quietFrom = FRONT_POLL_MS / 2 + 10 * RETRY_DELAY_MS;
    let at = 0;
    for (const ms of clock.sleeps) {
      expect(ms, `the poll after ${at} ms`).toBe(
        at === 0 ? FRONT_POLL_MS / 2 : at < quietFrom ? FRONT_POLL_MS : RETRY_DELAY_MS,
      );
      at += ms;
    }
    expect(clock.sleeps.at(-1)).toBe(RETRY_DELAY_MS);
  });

  it('at the front, watching the tip on its session, polls at the floor while the branch moved lately', async () => {
    const store = new FakeStore(['lock-a'], []);
    store.tipWatched = true;
    const { pool, clock } = setup(store, { lineToken: 'me' });
    // The holder keeps lock-a for 30 s.
    clock.onSleep = () => {
      if (clock.time >= 1_000_000 + 30_000 && store.remote.claimed.has('lock-a'))
        store.otherMoves('lock-a', 'unclaimed');
    };
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    // Every 100 ms for WATCHED_BUSY_MS after the start (no move seen yet), at the front's pace
    // from then on; the release, 30 s in, is seen within one of those polls.
    let at = clock.sleeps[0]!;
    for (const ms of clock.sleeps.slice(1)) {
      expect(ms, `the poll after ${at} ms`).toBe(
        at < WATCHED_BUSY_MS ? POLL_FLOOR_MS : FRONT_POLL_MS,
      );
      at += ms;
    }
    expect(clock.sleeps.length).toBeGreaterThan(WATCHED_BUSY_MS / POLL_FLOOR_MS);
    expect(clock.time - 1_000_000 - 30_000).toBeLessThanOrEqual(FRONT_POLL_MS);
  });

  it('at the front, polls at retry_delay until a release is plausible after the holds seen, then fast', async () => {
    const store = new FakeStore(['lock-a'], []);
    const { pool, clock } = setup(store, { lineToken: 'me' });
    // lock-a was claimed as this put started; the holds the history shows lasted 30 s and more.
    store.holdsSeen = {
      claimedAt: new Map([['lock-a', 1_000_000]]),
      holds: [45_000, 30_000, 60_000],
      claims: [],
    };
    clock.onSleep = () => {
      if (clock.time >= 1_000_000 + 31_000 && store.remote.claimed.has('lock-a'))
        store.otherMoves('lock-a', 'unclaimed');
    };
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    // Plausible from the claim plus the shortest hold, less a front poll.
    const plausible = 30_000 - FRONT_POLL_MS;
    let at = 0;
    for (const ms of clock.sleeps) {
      if (at >= plausible) expect(ms, `the poll after ${at} ms`).toBe(FRONT_POLL_MS);
      else expect(ms, `the poll after ${at} ms`).toBeLessThanOrEqual(RETRY_DELAY_MS);
      at += ms;
    }
    expect(clock.sleeps.filter((ms) => ms === FRONT_POLL_MS).length).toBeLessThanOrEqual(
      (31_000 - plausible) / FRONT_POLL_MS + 1,
    );
    // Two polls a retry_delay before, five after: fewer than half of polling fast throughout.
    expect(clock.sleeps.length).toBeLessThan(31_000 / FRONT_POLL_MS / 2);
    // Read once for the tip it waited at.
    expect(store.count('holdHistory')).toBe(1);
  });

  it('second in line, polls fast only once a second release is plausible too', async () => {
    const { store, pool, clock, claimedAt } = secondInLine('older');
    clock.onSleep = () => {
      // The older put takes lock-a when it is released, 31 s in; lock-b comes free 52 s in.
      if (clock.time >= 1_000_000 + 31_000 && store.line.some((e) => e.token === 'older')) {
        store.otherMoves('lock-a', 'unclaimed');
        store.otherMoves('lock-a', 'claimed');
        store.line = store.line.filter((entry) => entry.token !== 'older');
        claimedAt.set('lock-a', clock.time);
      }
      if (clock.time >= 1_000_000 + 52_000 && store.remote.claimed.has('lock-b'))
        store.otherMoves('lock-b', 'unclaimed');
    };
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-b');
    // lock-a's release is plausible 29.8 s in, but it serves the put ahead: this one polls fast
    // only from lock-b's, 49.8 s in. Until lock-a's release it polls every 12 s less a second
    // (farPollMs: one poll still sees the put ahead gone in time), then every retry_delay.
    const fastFrom = 20_000 + 30_000 - FRONT_POLL_MS;
    let at = 0;
    for (const ms of clock.sleeps) {
      if (ms === FRONT_POLL_MS) expect(at + ms, 'a fast poll').toBeGreaterThanOrEqual(fastFrom);
      if (at < 31_000) expect(ms, `the poll after ${at} ms`).toBeLessThanOrEqual(FAR_POLL_MS);
      else expect(ms, `the poll after ${at} ms`).toBeLessThanOrEqual(RETRY_DELAY_MS);
      at += ms;
    }
    expect(clock.sleeps).toContain(FAR_POLL_MS);
    expect(clock.sleeps.at(-1)).toBe(FRONT_POLL_MS);
  });

  it('second in line, polling slower until its release is plausible, takes a lock the put ahead leaves untaken one grace after its release', async () => {
    const { store, pool, clock } = secondInLine('ghost');
    let releasedAt: number | undefined;
    clock.onSleep = () => {
      // lock-a is released 31 s in, and the put ahead, gone, never takes it.
      if (releasedAt === undefined && clock.time >= 1_000_000 + 31_000) {
        store.otherMoves('lock-a', 'unclaimed');
        releasedAt = clock.time;
        store.commitTimes.set(store.remoteCommit, releasedAt);
      }
    };
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    expect(store.log).toContain('leave ghost');
    const waited = clock.time - releasedAt!;
    expect(waited).toBeGreaterThanOrEqual(GONE_AFTER_MS);
    expect(waited).toBeLessThan(GONE_AFTER_MS + FRONT_POLL_MS);
  });

  it('first in line, with puts behind it, takes a freed lock without reading when its tip was committed', async () => {
    const store = new FakeStore(['lock-a'], []);
    store.line = [waiting('newer', -1_000)];
    await acquireReleasedAtFifthSleep(store);
    // That time dates a stall, which judges only puts ahead: a `git show` a hand-over waited on.
    expect(store.log).not.toContain('commitTime');
    expect(store.log.at(-1)).toMatch(/^push/);
  });

  it('at the front, polls fast where no hold is seen, or a claim lies beyond the history read', async () => {
    for (const holds of [
      { claimedAt: new Map([['lock-a', 1_000_000]]), holds: [], claims: [] },
      { claimedAt: new Map([['lock-b', 1_000_000]]), holds: [30_000], claims: [] },
    ]) {
      const store = new FakeStore(['lock-a'], []);
      store.holdsSeen = holds;
      const clock = await acquireReleasedAtFifthSleep(store);
      expect(clock.sleeps).toEqual([FRONT_POLL_MS / 2, ...Array(4).fill(FRONT_POLL_MS)]);
    }
  });

  it('reads no hold history again for ten retry_delays after holds too short to poll slower between', async () => {
    const store = new FakeStore(['lock-a'], []);
    store.holdsSeen = { claimedAt: new Map([['lock-a', 1_000_000]]), holds: [1_000], claims: [] };
    const { pool, clock } = setup(store, { lineToken: 'me' });
    // Another put releases lock-b and claims it again between two polls, every second: the tip
    // moves, and lock-b is never free when this put looks.
    store.remote.unclaimed.add('lock-b');
    store.otherMoves('lock-b', 'claimed');
    let next = clock.time + 1_000;
    clock.onSleep = () => {
      if (clock.time >= 1_000_000 + 30_000) {
        if (store.remote.claimed.has('lock-a')) store.otherMoves('lock-a', 'unclaimed');
        return;
      }
      if (clock.time < next) return;
      next += 1_000;
      store.otherMoves('lock-b', 'unclaimed');
      store.otherMoves('lock-b', 'claimed');
    };
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    // Every poll fast, as without history, and the history read once per ten retry_delays.
    expect(new Set(clock.sleeps.slice(1))).toEqual(new Set([FRONT_POLL_MS]));
    const reads = store.count('holdHistory');
    expect(reads).toBeGreaterThanOrEqual(1);
    expect(reads).toBeLessThanOrEqual(Math.ceil(30_000 / (10 * RETRY_DELAY_MS)) + 1);
  });

  it('takes the free lock at once when nobody waits, the reference way, with no join', async () => {
    const store = new FakeStore([], ['lock-a']);
    const { pool, clock } = setup(store, { lineToken: 'me' });
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    expect(store.log).toEqual(['sync', 'apply move lock-a', 'commit c1', 'push']);
    expect(clock.sleeps).toEqual([]);
  });

  /**
   * Three puts in line ahead for lock-a, held: within each poll the holder releases and the first
   * in line takes it, over and over, so the tip keeps moving, and the line with it.
   */
  function lineMovingUp() {
    const store = new FakeStore(['lock-a'], []);
    store.line = [waiting('first', 3_000), waiting('second', 2_000), waiting('third', 1_000)];
    const { pool, clock, reporter } = setup(store, { lineToken: 'me' });
    clock.onSleep = () => {
      if (store.remote.claimed.has('lock-a')) store.otherMoves('lock-a', 'unclaimed');
      if (store.line[0] && store.line[0].token !== 'me') {
        store.otherMoves('lock-a', 'claimed');
        store.line.shift();
      }
    };
    return { store, pool, clock, reporter };
  }

  it('further back, polls the tip at retry_delay and fetches only what it could take', async () => {
    const { store, pool, clock } = lineMovingUp();
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    // Three puts took the lock before this one; it fetched only once the one ahead of it had.
    expect(store.count('sync')).toBeLessThan(5);
    expect(store.count('look')).toBeGreaterThanOrEqual(2);
    // At retry_delay two locks back; once it saw the line move, one lock back, at the front's pace.
    expect(clock.sleeps.slice(0, 2)).toEqual([RETRY_DELAY_MS / 2, FRONT_POLL_MS]);
    expect(store.line).toEqual([]);
  });

  it('further back, names the newest tip it saw for the holders, fetched or only looked at', async () => {
    const { store, pool, reporter } = lineMovingUp();
    const synced = new Set<string>();
    for (const method of ['sync', 'syncTo'] as const) {
      const original = store[method].bind(store) as (...args: never[]) => Promise<string>;
      store[method] = async (...args: never[]) => {
        const tip = await original(...args);
        synced.add(tip);
        return tip;
      };
    }
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    // While it waited further back it fetched nothing, yet its line named the tips its looks saw.
    const looked = reporter.tips.filter((tip) => tip !== undefined && !synced.has(tip));
    expect(looked.length).toBeGreaterThan(0);
    expect(reporter.tips.every((tip) => tip !== undefined)).toBe(true);
  });

  it('further back, fetches the tip its look saw when the line ahead stands still after a release', async () => {
    const store = new FakeStore(['lock-a'], []);
    store.line = [waiting('first', 3_000), waiting('second', 2_000), waiting('third', 1_000)];
    const { pool, clock } = setup(store, { lineToken: 'me' });
    clock.onSleep = (index) => {
      if (index === 0) store.otherMoves('lock-a', 'unclaimed');
    };
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    // Two looks saw the release and nobody ahead leaving: the next attempt starts from the tip
    // those looks saw, fetched as such, with no fetch of the branch of its own.
    const fetched = store.log.indexOf('syncTo');
    expect(store.log.slice(0, fetched + 1)).toEqual(['sync', 'join', 'look', 'look', 'syncTo']);
    expect(store.log[fetched + 1]).not.toBe('sync');
  });

  it('far back in a line that moves slowly, polls less often the further back it stands, and at the usual pace once near the front', async () => {
    // retry_delay 100ms: every put polls at 100 ms (the floor) wherever it stands, before.
    const { store, pool, clock } = behindInLine(8, { retryDelayMs: 100 });
    // Each second the holder releases lock-a and the first in line takes it.
    handOverEachSecond(store, clock, 8);
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    const waited = clock.sleeps.reduce((a, b) => a + b, 0);
    expect(waited).toBeGreaterThan(8_000);
    // Far back, with the line moving a place a second, it polls up to about half the time the line
    // takes to bring it near the front (seven locks to go at first, a second each), slower than
    // farPollMs (1.2 s), which bounds the puts nearer the front. Near the front, it polls every
    // 100 ms again, so as not to miss its release.
    expect(Math.max(...clock.sleeps)).toBeGreaterThan(1_200);
    expect(Math.max(...clock.sleeps)).toBeLessThanOrEqual(3_500);
    expect(clock.sleeps.slice(-3)).toEqual([100, 100, 100]);
    expect(clock.sleeps.length).toBeLessThan(waited / 100 / 2);
    expect(store.line).toEqual([]);
  });

  it("far back, just joined, polls at the pace the pool's recent claims show, not as fast as the first puts to leave", async () => {
    // Twelve puts ahead for one lock. Two leave within the first second (a burst of hand-overs as
    // this put joins), then one every 3 s; the release after the last is this put's. Over git://
    // each poll far back is a fetch.
    const run = async (claims: number[]) => {
      const { store, pool, clock } = behindInLine(12, { retryDelayMs: 1_000 });
      store.holdsSeen = { claimedAt: new Map(), holds: [], claims };
      const handOvers = [400, 800, ...Array.from({ length: 10 }, (_, n) => 3_800 + n * 3_000)];
      const lastAt = clock.time + 3_800 + 10 * 3_000;
      const at = handOvers.map((ms) => clock.time + ms);
      clock.onSleep = () => {
        while (at.length > 0 && clock.time >= at[0]!) {
          at.shift();
          store.otherMoves('lock-a', 'unclaimed');
          store.otherMoves('lock-a', 'claimed');
          store.line.shift();
        }
        if (clock.time >= lastAt && store.remote.claimed.has('lock-a'))
          store.otherMoves('lock-a', 'unclaimed');
      };
      // The fetches it made far back: four puts or more ahead, no lock free.
      let fetches = 0;
      const sync = store.sync.bind(store);
      store.sync = () => {
        if (store.line.length > 4 && store.remote.unclaimed.size === 0) fetches++;
        return sync();
      };
      expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
      return { fetches, servedAfter: clock.time - lastAt };
    };
    // The claims the put's copy holds: a lock every 3 s for the half minute before it started.
    const start = new FakeClock().time;
    const steady = Array.from({ length: 10 }, (_, n) => start - 30_000 + n * 3_000);
    const without = await run([]);
    const withClaims = await run(steady);
    // Reading the first departures alone, it polls as if the line moved a lock every half second.
    expect(withClaims.fetches).toBeLessThanOrEqual(Math.ceil(without.fetches / 2));
    // Its own turn is seen as soon: near the front it polls as fast as before.
    for (const { servedAfter } of [without, withClaims])
      expect(servedAfter).toBeLessThanOrEqual(FRONT_POLL_MS);
    // Claims older than the window (60 retry_delays) tell nothing: polled as without any.
    const old = await run(steady.map((at) => at - 120_000));
    expect(old.fetches).toBe(without.fetches);
  });

  it.each([
    ['costs what a fetch does (git://)', 'sync', false],
    ['goes over a kept connection', 'look', true],
  ])(
    'far back, where a look %s, polls by %s, and takes the lock the puts ahead leave untaken',
    async (_, kind, cheap) => {
      const { store, pool, clock } = behindInLine(8, { retryDelayMs: 100, cheap });
      // Each second the holder releases lock-a and the first in line takes it, four times; then the
      // puts left ahead are gone, and the fifth release stays untaken.
      handOverEachSecond(store, clock, 4);
      // How each poll asked the server, and how many puts were ahead then.
      const polls: { kind: string; ahead: number; free: boolean }[] = [];
      const ahead = () => store.line.filter((entry) => entry.token.startsWith('ahead')).length;
      for (const kind of ['look', 'sync'] as const) {
        const ask = store[kind].bind(store) as () => Promise<never>;
        store[kind] = () => {
          polls.push({ kind, ahead: ahead(), free: store.remote.unclaimed.size > 0 });
          return ask();
        };
      }
      expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
      // With four puts or more ahead and no lock free (FAR_BACK_LOCKS locks to go before the two
      // next in line), every poll after its first look was a fetch where a look costs a connection
      // as a fetch does, and a look on a kept connection.
      const farBack = polls.slice(2).filter((poll) => poll.ahead >= 4 && !poll.free);
      expect(farBack.length).toBeGreaterThanOrEqual(3);
      expect(farBack.map((poll) => poll.kind)).toEqual(farBack.map(() => kind));
      // A poll after the fifth release showed it the free lock the puts ahead left untaken.
      expect(store.log).toContain('leave ahead4 ahead5 ahead6 ahead7');
      expect(store.line).toEqual([]);
    },
  );

  it.each([
    [KEPT_SESSIONS + 4, 'lets its kept session go until fewer than KEPT_SESSIONS are ahead', true],
    [8, 'keeps its kept session all along', false],
  ])('over git://, with %i puts ahead, %s', async (puts, _, letGo) => {
    const { store, pool, clock } = behindInLine(puts, { retryDelayMs: 100 });
    store.tipWatched = true;
    // Each second the first in line is served; the release after the last is this put's.
    handOverEachSecond(store, clock, puts);
    const ahead = () => store.line.filter((entry) => entry.token.startsWith('ahead')).length;
    const asked: number[] = [];
    const ask = store.tipNow.bind(store);
    store.tipNow = () => {
      asked.push(ahead());
      return ask();
    };
    // What the put had done when it first slept.
    const handOver = clock.onSleep;
    let beforeFirstSleep: string[] | undefined;
    clock.onSleep = (index) => {
      beforeFirstSleep ??= [...store.log];
      handOver?.(index);
    };
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    expect(beforeFirstSleep).toContain('join');
    if (letGo) {
      // Let go as soon as it waits, before its first sleep: a burst of puts that all fetched on
      // a session of their own holds them no longer than it takes to join the line.
      expect(beforeFirstSleep).toContain('unwatch');
      expect(Math.max(...asked)).toBeLessThan(KEPT_SESSIONS);
    } else {
      // Within the first KEPT_SESSIONS it keeps it all along, and asks it far back too.
      expect(store.log).not.toContain('unwatch');
      expect(Math.max(...asked)).toBeGreaterThan(FAR_BACK_LOCKS);
    }
    expect(asked.length).toBeGreaterThan(0);
  });

  it.each([
    ['where a look costs what a fetch does (git://)', false, 27_000],
    ['on a kept connection', true, 18_000],
  ])(
    'far back in a line that does not move, %s, polls at most every %i ms',
    async (_, cheap, slowest) => {
      // Eleven locks from the front (twelve puts ahead, one lock, held for long), retry_delay 1s:
      // nine times the pace of the puts near the front (farPollMs, 3 s, where each poll is a
      // fetch; slowestPollMs, 2 s, where it is a look).
      const { store, pool, clock } = behindInLine(12, { retryDelayMs: 1_000, cheap });
      const start = clock.time;
      let freedAt: number | undefined;
      clock.onSleep = () => {
        // Ten minutes on, the puts ahead have given up and the holder releases the lock.
        if (freedAt === undefined && clock.time >= start + 600_000) {
          store.line = store.line.filter((entry) => entry.token === 'me');
          store.otherMoves('lock-a', 'unclaimed');
          freedAt = clock.time;
        }
      };
      expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
      expect(Math.max(...clock.sleeps)).toBe(slowest);
      // About a poll per `slowest` once the line has stood still a while, not one per second.
      expect(clock.sleeps.length).toBeLessThan(600_000 / slowest + 15);
      expect(clock.time - freedAt!).toBeLessThanOrEqual(slowest);
    },
  );

  it('takes out a put ahead that leaves a free lock untaken, once it cannot be just slow', async () => {
    const store = new FakeStore([], ['lock-a']);
    store.line = [waiting('ghost')];
    const { pool, clock, reporter } = setup(store, { lineToken: 'me' });
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    expect(store.log).toContain('leave ghost');
    expect(reporter.lines.join('\n')).toMatch(/the put ahead in line left a free lock untaken/);
    const waited = clock.sleeps.reduce((a, b) => a + b, 0);
    expect(waited).toBeGreaterThanOrEqual(GONE_AFTER_MS);
    expect(waited).toBeLessThan(GONE_AFTER_MS + FRONT_POLL_MS);
    expect(store.line).toEqual([]);
  });

  it('puts itself back in its own place when another put took it out', async () => {
    const store = new FakeStore(['lock-a'], []);
    const { pool, clock } = setup(store, { lineToken: 'me' });
    const places: WaitingEntry[] = [];
    const join = store.join.bind(store);
    store.join = async (entry) => {
      places.push(entry);
      return join(entry);
    };
    clock.onSleep = (index) => {
      if (index === 0) store.line = [];
      if (index === 2) store.otherMoves('lock-a', 'unclaimed');
    };
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    expect(places.map((place) => ({ ...place, at: undefined }))).toEqual([
      waiting('me', 0),
      waiting('me', 0),
    ]);
    expect(store.line).toEqual([]);
  });

  it('waits without a place when the remote refuses the line, and says so once', async () => {
    const store = new FakeStore(['lock-a'], []);
    store.refuseLine = true;
    const { pool, clock, reporter } = setup(store, { lineToken: 'me' });
    clock.onSleep = (index) => {
      if (index === 2) store.otherMoves('lock-a', 'unclaimed');
    };
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    expect(reporter.lines).toEqual([
      "the lock repository refused the waiting line's ref (refs/pool-resource/waiting/…): waiting without a place in line",
    ]);
    expect(clock.sleeps).toEqual([RETRY_DELAY_MS / 2, RETRY_DELAY_MS, RETRY_DELAY_MS]);
    expect(store.count('join')).toBe(1);
    expect(store.log.at(-1)).toBe('push');
  });

  it('leaves the line when it times out, and when it is stopped', async () => {
    const timedOut = new FakeStore(['lock-a'], []);
    const first = setup(timedOut, { lineToken: 'me', waitTimeoutMs: 3_000 });
    await expect(first.pool.run({ kind: 'acquire' })).rejects.toBeInstanceOf(WaitTimeoutError);
    expect(timedOut.log).toContain('leave me');
    expect(timedOut.line).toEqual([]);

    const stopped = new FakeStore(['lock-a'], []);
    const stop = new AbortController();
    const second = setup(stopped, { lineToken: 'me', signal: stop.signal });
    second.clock.onSleep = (index) => {
      if (index === 1) stop.abort(new Error('SIGTERM'));
    };
    await expect(second.pool.run({ kind: 'acquire' })).rejects.toBeInstanceOf(CancelledError);
    // On a signal of its own: the run's has fired.
    expect(stopped.log).toContain('leave me');
    expect(stopped.line).toEqual([]);
  });

  it('keeps its place after a lost race: the claiming push takes it out only when it lands', async () => {
    const store = new FakeStore(['lock-a'], []);
    store.pushes = ['rejected', 'pushed'];
    const { pool, clock, reporter } = setup(store, { lineToken: 'me' });
    clock.onSleep = (index) => {
      if (index === 1) store.otherMoves('lock-a', 'unclaimed');
    };
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    expect(reporter.conflicts).toEqual(['lock-a']);
    // First in line as it joins: two polls at the front's pace (the first a random part of it),
    // then straight back to the next attempt after the lost race: no jitter for a put in line.
    expect(clock.sleeps).toEqual([FRONT_POLL_MS / 2, FRONT_POLL_MS]);
    expect(store.count('join')).toBe(1);
    expect(store.count('push leaving')).toBe(2);
    expect(store.line).toEqual([]);
  });

  it('joins the line as soon as it loses a race for a free lock, and its claim takes it out', async () => {
    const store = new FakeStore([], ['lock-a', 'lock-b']);
    // A put that started with it takes lock-a between its read and its push.
    store.beforePush = () => {
      store.beforePush = undefined;
      store.otherMoves('lock-a', 'claimed');
      store.pushes.unshift('rejected');
    };
    const { pool, reporter } = setup(store, { lineToken: 'me' });
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-b');
    expect(reporter.conflicts).toHaveLength(1);
    // In line before its next attempt: the puts that started with it and lost too try for the
    // locks left in their order, not all of them for each lock again.
    expect(store.log.slice(3, 6)).toEqual(['push', 'join', 'sync']);
    expect(store.log.at(-1)).toBe('push leaving');
    expect(store.line).toEqual([]);
  });

  it('starts again on the session after losing a race in line, the line told by the claims', async () => {
    const store = new FakeStore(['lock-a', 'lock-b'], []);
    store.tipWatched = true;
    const { pool, clock, reporter } = setup(store, { lineToken: 'me' });
    clock.onSleep = (index) => {
      if (index === 1) store.otherMoves('lock-a', 'unclaimed');
    };
    // Its claim of lock-a loses to the release of lock-b, which lands first.
    store.beforePush = () => {
      store.beforePush = undefined;
      store.otherMoves('lock-b', 'unclaimed');
      store.pushes.unshift('rejected');
    };
    expect((await pool.run({ kind: 'acquire' })).name).toMatch(/^lock-[ab]$/);
    expect(reporter.conflicts).toHaveLength(1);
    // In line since its first poll, having read the line there: it may tell the line itself.
    expect(store.lostRaceInfers).toEqual([true]);
    const lost = store.log.indexOf('push leaving');
    expect(store.log.slice(lost + 1, lost + 2)).toEqual(['fetch the winner']);
    // Its first sync alone: a poll fetched the tip it saw (syncTo), the lost race the winner.
    expect(store.log.filter((entry) => entry === 'sync')).toHaveLength(1);
    expect(store.line).toEqual([]);
  });

  it('reads the line on the server after a join that followed a lost race, session or not', async () => {
    const store = new FakeStore([], ['lock-a', 'lock-b']);
    store.tipWatched = true;
    store.beforePush = () => {
      store.beforePush = undefined;
      store.otherMoves('lock-a', 'claimed');
      store.pushes.unshift('rejected');
    };
    const { pool } = setup(store, { lineToken: 'me' });
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-b');
    // The puts it raced join too, some that started before it: only the server's line shows them.
    expect(store.lostRaceInfers).toEqual([false]);
    expect(store.log.slice(3, 6)).toEqual(['push', 'join', 'sync']);
  });

  it('after a join that followed a lost race, says its place from the next sync and watches from its first poll', async () => {
    const store = new FakeStore([], ['lock-a']);
    store.tipWatched = true;
    store.beforePush = () => {
      store.beforePush = undefined;
      store.otherMoves('lock-a', 'claimed');
      store.pushes.unshift('rejected');
    };
    const { pool, clock, reporter } = setup(store, { lineToken: 'me' });
    clock.onSleep = (index) => {
      if (index === 2) store.otherMoves('lock-a', 'unclaimed');
    };
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    // The attempt after the lost race read the line with this put in it: no poll reads it again.
    expect(store.log.filter((entry) => entry === 'sync' || entry === 'look')).toEqual([
      'sync',
      'sync',
    ]);
    expect(store.count('tipNow')).toBe(3);
    expect(reporter.lines).toEqual(['waiting in line for pool "envs": first']);
  });

  /**
   * Two locks freed at once, for this put and the put ahead of it, which claims one at the sleep
   * `claimsAt` unless this put pushes first (then at the same time: this put loses the race); or,
   * without `claimsAt`, never.
   */
  function servedWithThePutAhead(claimsAt?: number) {
    const store = new FakeStore(['lock-a', 'lock-b'], []);
    store.line = [waiting('ahead')];
    store.tipWatched = true;
    const setupResult = setup(store, { lineToken: 'me' });
    let aheadClaimed = false;
    const aheadClaims = () => {
      if (aheadClaimed) return;
      aheadClaimed = true;
      store.otherClaimsInLine('lock-a', 'ahead');
    };
    setupResult.clock.onSleep = (index) => {
      if (index === 1) {
        store.otherMoves('lock-a', 'unclaimed');
        store.otherMoves('lock-b', 'unclaimed');
      }
      if (index === claimsAt) aheadClaims();
    };
    if (claimsAt !== undefined)
      store.beforePush = () => {
        if (aheadClaimed) return;
        aheadClaims();
        store.pushes.unshift('rejected');
      };
    return { store, ...setupResult };
  }

  it('served at the same tip as the put ahead, lets its claim land first and claims after it', async () => {
    const { store, pool, reporter } = servedWithThePutAhead(2);
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-b');
    // One push, on the tip of the claim ahead: no race lost.
    expect(reporter.conflicts).toEqual([]);
    expect(store.count('push')).toBe(1);
    expect(store.line).toEqual([]);
  });

  it('served at the same tip as a put ahead that does not claim, claims once the lock stood free past a hand-over', async () => {
    const { store, pool, clock } = servedWithThePutAhead();
    const started = clock.now();
    expect((await pool.run({ kind: 'acquire' })).name).toMatch(/^lock-[ab]$/);
    // It waited on the put ahead for one tip only, and read the line on the server once before
    // it claimed; the put ahead, slow but not gone, is still in line.
    expect(store.log.filter((entry) => entry === 'sync')).toHaveLength(2);
    expect(clock.now() - started).toBeLessThan(GONE_AFTER_MS);
    expect(store.line.map((entry) => entry.token)).toEqual(['ahead']);
  });

  it('spreads puts in line over the free locks, so they do not race each other', async () => {
    const taken: string[] = [];
    for (const [token, ago] of [
      ['older', 2_000],
      ['newer', 1_000],
    ] as const) {
      const store = new FakeStore([], ['lock-a', 'lock-b']);
      store.line = [waiting('older', 2_000), waiting('newer', 1_000)];
      const clock = new FakeClock();
      clock.time -= ago;
      const { pool } = setup(store, { lineToken: token, clock });
      taken.push((await pool.run({ kind: 'acquire' })).name);
    }
    expect(new Set(taken)).toEqual(new Set(['lock-a', 'lock-b']));
  });
});

describe('LockPool in a line with puts that are gone', () => {
  /** An entry of a put that joined before this test's clock started and was killed since. */
  const dead = (token: string, ago: number, retryDelayMs = RETRY_DELAY_MS): WaitingEntry => ({
    since: 1_000_000 - ago,
    retryDelayMs,
    token,
    at: 'c0',
  });

  /** The holder releases lock-a at the given sleep; returns when (the fake clock's time). */
  function releaseAt(store: FakeStore, clock: FakeClock, index: number): { at: number } {
    const released = { at: Number.NaN };
    clock.onSleep = (i) => {
      if (i !== index) return;
      store.otherMoves('lock-a', 'unclaimed');
      store.commitTimes.set(store.remoteCommit, clock.time);
      released.at = clock.time;
    };
    return released;
  }

  it('takes out every put ahead that is gone at once, one grace after the lock became free', async () => {
    const store = new FakeStore(['lock-a'], []);
    store.line = [dead('gone-1', 3_000), dead('gone-2', 2_000), dead('gone-3', 1_000)];
    const { pool, clock, reporter } = setup(store, { lineToken: 'me' });
    const released = releaseAt(store, clock, 1);
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    expect(store.log.filter((entry) => entry.startsWith('leave'))).toEqual([
      'leave gone-1 gone-2 gone-3',
    ]);
    expect(reporter.lines).toContain(
      '3 puts ahead in line left a free lock untaken for 12s: taking them out of the line',
    );
    // One grace (its committer's clock gives the release to the second), not three in a row.
    const freeFor = clock.time - released.at;
    expect(freeFor).toBeGreaterThanOrEqual(GONE_AFTER_MS);
    expect(freeFor).toBeLessThanOrEqual(GONE_AFTER_MS + 1_000);
    expect(store.line).toEqual([]);
  });

  it('leaves in line a put ahead that shows it is alive, and takes out only the ones gone', async () => {
    const store = new FakeStore(['lock-a'], []);
    store.line = [dead('gone', 2_000), dead('alive', 1_000)];
    const { pool, clock } = setup(store, { lineToken: 'me' });
    const released = releaseAt(store, clock, 1);
    const onSleep = clock.onSleep!;
    clock.onSleep = (index) => {
      onSleep(index);
      const alive = store.line.find((entry) => entry.token === 'alive');
      // The live put moves its entry to the tip once the stall is half its grace old.
      if (alive && clock.time - released.at >= RETRY_DELAY_MS + 1_000)
        alive.at = store.remoteCommit;
      // It takes the put ahead of it out after its grace, as this one would, and the lock.
      if (alive && clock.time - released.at >= GONE_AFTER_MS + 1_000)
        store.line = store.line.filter((entry) => entry.token !== 'gone');
      if (alive && !store.line.some((entry) => entry.token === 'gone')) {
        store.line = store.line.filter((entry) => entry !== alive);
        store.otherMoves('lock-a', 'claimed');
      }
      if (clock.time - released.at > 3 * GONE_AFTER_MS && store.remote.claimed.has('lock-a'))
        store.otherMoves('lock-a', 'unclaimed');
    };
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    // Judged together with the put gone, it would have been taken out with it.
    expect(
      store.log.filter((entry) => entry.startsWith('leave') && entry.includes('alive')),
    ).toEqual([]);
    expect(store.remote.claimed.has('lock-a')).toBe(true);
  });

  it('shows it is alive in a stall by moving its entry to the tip, once, half a grace in', async () => {
    const store = new FakeStore(['lock-a'], []);
    store.line = [dead('gone', 1_000)];
    const { pool, clock } = setup(store, { lineToken: 'me' });
    const joins: { at: number; tip: string | undefined }[] = [];
    const join = store.join.bind(store);
    store.join = async (entry) => {
      const joined = await join(entry);
      joins.push({ at: clock.time, tip: store.line.find((e) => e.token === 'me')?.at });
      return joined;
    };
    const released = releaseAt(store, clock, 1);
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    expect(joins).toHaveLength(2);
    expect(joins[0]!.tip).toBe('c0');
    expect(joins[1]!.tip).toBe('other-1');
    expect(joins[1]!.at - released.at).toBeGreaterThanOrEqual(RETRY_DELAY_MS + 1_000);
    expect(joins[1]!.at - released.at).toBeLessThan(GONE_AFTER_MS);
  });

  it('takes out at once the puts gone long ago that a free lock waited for, and takes it', async () => {
    // Nobody came since they were killed: the tip was committed long before this put started.
    const store = new FakeStore([], ['lock-a', 'lock-b']);
    store.commitTimes.set('c0', 1_000_000 - 60_000);
    // They joined while the locks were held, at a tip before the releases.
    store.line = [70_000, 65_000].map((ago, n) => ({ ...dead(`gone-${n + 1}`, ago), at: 'c-old' }));
    const { pool, clock } = setup(store, { lineToken: 'me' });
    expect((await pool.run({ kind: 'acquire' })).name).toMatch(/^lock-/);
    expect(clock.sleeps).toEqual([]);
    expect(store.log).toContain('leave gone-1 gone-2');
    expect(store.line).toEqual([]);
  });

  it('leaves a put that joined since the tip alone, however old the tip', async () => {
    const store = new FakeStore([], ['lock-a', 'lock-b']);
    store.commitTimes.set('c0', 1_000_000 - 60_000);
    store.line = [{ ...dead('new', 500), at: 'c0' }];
    // It points at the tip: it joined (or showed life) after the tip was made.
    const { pool } = setup(store, { lineToken: 'me' });
    store.remoteCommit = 'c0';
    expect((await pool.run({ kind: 'acquire' })).name).toMatch(/^lock-/);
    expect(store.log.some((entry) => entry.startsWith('leave'))).toBe(false);
  });

  it('believes no more than three times its own retry_delay of an entry pushed claiming 1h', async () => {
    const store = new FakeStore(['lock-a'], []);
    store.line = [dead('by-hand', 1_000, 3_600_000)];
    const clock = new FakeClock();
    const reporter = new RecordingReporter();
    const pool = new LockPool(
      store,
      clock,
      reporter,
      { pool: 'envs', retryDelayMs: 200, lineToken: 'me', message: ({ subject }) => subject },
      new AbortController().signal,
    );
    const released = releaseAt(store, clock, 1);
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    expect(store.log).toContain('leave by-hand');
    // 2 × 3 × 200 ms + 2 s, and the committer's second.
    expect(clock.time - released.at).toBeLessThanOrEqual(3_200 + 1_000);
  });

  it('with retry_delay 0, polls no more often than every 100 ms', async () => {
    const store = new FakeStore(['lock-a'], []);
    store.line = [waiting('older', 2_000)];
    const clock = new FakeClock();
    const pool = new LockPool(
      store,
      clock,
      new RecordingReporter(),
      { pool: 'envs', retryDelayMs: 0, lineToken: 'me', message: ({ subject }) => subject },
      new AbortController().signal,
    );
    clock.onSleep = () => {
      if (clock.time >= 1_000_000 + 5_000 && store.remote.claimed.has('lock-a')) {
        store.line = [];
        store.otherMoves('lock-a', 'unclaimed');
      }
    };
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-a');
    expect(clock.sleeps.length).toBeGreaterThan(10);
    expect(Math.min(...clock.sleeps.slice(1))).toBeGreaterThanOrEqual(100);
    // Without a line too.
    const plain = new FakeStore(['lock-a'], []);
    const plainClock = new FakeClock();
    plainClock.onSleep = (index) => {
      if (index === 20) plain.otherMoves('lock-a', 'unclaimed');
    };
    const reference = new LockPool(
      plain,
      plainClock,
      new RecordingReporter(),
      { pool: 'envs', retryDelayMs: 0, message: ({ subject }) => subject },
      new AbortController().signal,
    );
    expect((await reference.run({ kind: 'acquire' })).name).toBe('lock-a');
    expect(Math.min(...plainClock.sleeps.slice(1))).toBeGreaterThanOrEqual(100);
  });
});

describe('LockPool taking several locks at once', () => {
  it('pushes one commit per lock in one push, and holds them as one claim', async () => {
    const store = new FakeStore([], ['lock-a', 'lock-b', 'lock-c']);
    const { pool } = setup(store);
    const outcome = await pool.run({ kind: 'acquire', count: 2 });
    expect(outcome.names).toHaveLength(2);
    expect(outcome).toEqual({ ref: 'c2', name: outcome.names[0], names: outcome.names });
    expect(store.count('push')).toBe(1);
    expect(store.messages).toEqual(outcome.names.map((name) => `claiming: ${name} [claiming]`));
    expect([...store.remote.claimed].sort()).toEqual([...outcome.names].sort());
    expect(pool.pendingClaims()).toEqual([
      {
        locks: outcome.names.map((name, index) => ({ name, commit: `c${index + 1}` })),
        parent: 'c0',
      },
    ]);
  });

  it('holds none of them while it waits for the rest', async () => {
    const store = new FakeStore(['lock-b'], ['lock-a']);
    const { pool, clock } = setup(store);
    clock.onSleep = (index) => {
      expect(store.remote.claimed).toEqual(new Set(['lock-b']));
      if (index === 1) store.otherMoves('lock-b', 'unclaimed');
    };
    const outcome = await pool.run({ kind: 'acquire', count: 2 });
    expect(outcome.names.sort()).toEqual(['lock-a', 'lock-b']);
    expect(store.count('commit')).toBe(2);
  });

  it('after a stop, the compensating release frees every lock of the set in one push', async () => {
    const store = new FakeStore([], ['lock-a', 'lock-b']);
    const { pool } = setup(store);
    await pool.run({ kind: 'claim', name: 'lock-a', names: ['lock-a', 'lock-b'] });
    const [claim] = pool.takePendingClaims();
    const pushes = store.count('push');
    const result = await releaseAbandonedClaim(
      store,
      claim!,
      (name) => `unclaiming: ${name}`,
      new AbortController().signal,
      new FakeClock(),
    );
    expect(result).toBe('released');
    expect(store.count('push')).toBe(pushes + 1);
    expect(store.remote.unclaimed).toEqual(new Set(['lock-a', 'lock-b']));
    expect(store.messages.slice(-2)).toEqual(['unclaiming: lock-a', 'unclaiming: lock-b']);
  });

  it('in line, a put for one waits behind a put for two until the two are served', async () => {
    const store = new FakeStore([], ['lock-a', 'lock-b']);
    store.line = [{ ...waiting('older'), count: 2 }];
    const { pool, clock } = setup(store, { lineToken: 'me' });
    clock.onSleep = (index) => {
      // Both free locks stay untaken by this put until the older put takes them both.
      expect(store.remote.claimed.size === 0 || store.line.length === 1).toBe(true);
      if (index === 1) {
        store.otherMoves('lock-a', 'claimed');
        store.otherMoves('lock-b', 'claimed');
        store.line = store.line.filter((entry) => entry.token !== 'older');
      }
      if (index === 3) store.otherMoves('lock-b', 'unclaimed');
    };
    expect((await pool.run({ kind: 'acquire' })).name).toBe('lock-b');
    expect(clock.sleeps.length).toBeGreaterThanOrEqual(4);
  });

  it('in line, a put for two is served once two locks are free for it, and not before', async () => {
    const store = new FakeStore(['lock-b'], ['lock-a']);
    const { pool, clock } = setup(store, { lineToken: 'me' });
    const waitingFor: (number | undefined)[] = [];
    clock.onSleep = (index) => {
      // Sleeps come only while it waits: it never holds lock-a alone meanwhile.
      expect(store.remote.claimed).toEqual(new Set(['lock-b']));
      waitingFor.push(store.line.find((entry) => entry.token === 'me')?.count);
      if (index === 1) store.otherMoves('lock-b', 'unclaimed');
    };
    const outcome = await pool.run({ kind: 'acquire', count: 2 });
    expect(outcome.names.sort()).toEqual(['lock-a', 'lock-b']);
    // Its entry says how many it waits for, so the puts behind leave it both.
    expect(waitingFor).toContain(2);
    expect(store.line).toEqual([]);
  });
});

describe('LockPool acquiring with match and match_name', () => {
  const eu = 'region: eu\nsize: large\n';
  const us = '{"region": "us", "size": "large"}';
  const matchEu: ResolvedOperation = {
    kind: 'acquire',
    filter: { match: new Map([['region', ['eu']]]) },
  };

  function envs(claimed: string[], unclaimed: string[], files: Record<string, string>) {
    const store = new FakeStore(claimed, unclaimed);
    store.files = new Map(Object.entries(files));
    return store;
  }

  it.each([
    [0, 'eu-1'],
    [0.99, 'eu-2'],
  ])('takes only a matching lock, at random among them (random %s)', async (random, name) => {
    const store = envs([], ['eu-1', 'eu-2', 'us-1', 'us-2'], {
      'eu-1': eu,
      'eu-2': eu,
      'us-1': us,
      'us-2': us,
    });
    const { pool } = setup(store, { clock: new FakeClock(random) });
    expect(await pool.run(matchEu)).toEqual({ ref: 'c1', name, names: [name] });
    expect(store.remote.claimed).toEqual(new Set([name]));
  });

  it('fails at once when no lock of the pool matches, claimed or not, committing nothing', async () => {
    const store = envs(['us-1'], ['us-2', 'odd'], { 'us-1': us, 'us-2': us, odd: '- a list\n' });
    const { pool, clock } = setup(store);
    const error = await pool.run(matchEu).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OperationError);
    expect(describeError(error)).toBe(
      'no lock in pool "envs" matches match {region: eu} (looked at 3 locks; 1 of them is not a YAML or JSON map)',
    );
    expect(store.count('commit')).toBe(0);
    expect(clock.sleeps).toEqual([]);
  });

  it('waits while every matching lock is claimed, a lock that does not match free, naming the matching', async () => {
    const store = envs(['eu-1', 'eu-2', 'us-1'], ['us-2'], {
      'eu-1': eu,
      'eu-2': eu,
      'us-1': us,
      'us-2': us,
    });
    const { pool, clock, reporter } = setup(store);
    clock.onSleep = (index) => {
      if (index === 1) store.otherMoves('eu-2', 'unclaimed');
    };
    expect(await pool.run(matchEu)).toEqual({ ref: 'c2', name: 'eu-2', names: ['eu-2'] });
    expect(reporter.waits[0]).toBe(
      'every lock in pool "envs" that matches match {region: eu} is claimed (2 matching locks)',
    );
    expect(reporter.wanted[0]).toEqual(['eu-1', 'eu-2']);
    expect(store.remote.unclaimed).toEqual(new Set(['us-2']));
  });

  it('filters on the name alone with match_name, reading no lock file', async () => {
    const store = envs([], ['db-1', 'env-1'], {});
    const { pool } = setup(store);
    const taken = await pool.run({ kind: 'acquire', filter: { matchName: 'env-*' } });
    expect(taken.name).toBe('env-1');
    expect(store.count('metadata')).toBe(0);
  });

  it('with match_name and match, reads only the files of the names the glob lets through', async () => {
    const store = envs([], ['db-eu', 'env-eu', 'env-us'], {
      'db-eu': eu,
      'env-eu': eu,
      'env-us': us,
    });
    const { pool } = setup(store);
    const taken = await pool.run({
      kind: 'acquire',
      filter: { matchName: 'env-*', match: new Map([['region', ['eu']]]) },
    });
    expect(taken.name).toBe('env-eu');
    expect(store.log.filter((entry) => entry.startsWith('metadata'))).toEqual([
      'metadata env-eu env-us',
    ]);
  });

  it('an acquire without a filter reads no lock file', async () => {
    const store = envs([], ['eu-1'], { 'eu-1': eu });
    const { pool } = setup(store);
    await pool.run({ kind: 'acquire' });
    expect(store.log).toEqual(['sync', 'apply move eu-1', 'commit c1', 'push']);
  });

  it('stays out of the waiting line: a put in line ahead does not hold back a lock it matches', async () => {
    const store = envs([], ['eu-1'], { 'eu-1': eu });
    store.line = [waiting('older')];
    const { pool, clock } = setup(store, { lineToken: 'me' });
    expect(await pool.run(matchEu)).toEqual({ ref: 'c1', name: 'eu-1', names: ['eu-1'] });
    expect(store.count('join')).toBe(0);
    expect(clock.sleeps).toEqual([]);
  });
});
