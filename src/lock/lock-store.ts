// The lock policy's view of the git mechanism, in lock vocabulary: what LockPool and the
// compensating release ask of the branch copy (repo/lock-repository.ts implements it).
import type { LockMetadata } from '../base/lock-match.js';
import type {
  ClaimFacts,
  HoldHistory,
  LockState,
  PoolState,
  Change,
  ReclaimFacts,
} from './pool-state.js';
import type { WaitingEntry } from './line-entry.js';

/**
 * What a push did: landed, lost a race (the branch moved), or changed nothing. The store reads it
 * from git (git/push-outcome.ts); the policy knows only these words.
 */
export type PushOutcome = 'pushed' | 'rejected' | 'up-to-date';

/** The git mechanism, in lock vocabulary. */
export interface LockStore {
  /** Fetches the branch tip into the working copy; returns its commit id. */
  sync(): Promise<string>;
  /**
   * The same as `sync` for a tip and line a look has just seen, fetching that commit alone where
   * the server allows (one round trip less); returns the commit id synced. With `since`, a tip
   * synced before, at which or after which the line was seen: the line is inferred, without the
   * puts whose claims landed after `since` (their pushes took them out of it; lineInferred).
   */
  syncTo(seen: { tip: string; line: WaitingEntry[]; since?: string }): Promise<string>;
  /**
   * After a push lost its race at the synced tip: the tip that won, synced where the store can
   * read and fetch it without a new connection to the server (over git://, on the run's kept
   * session: git/daemon-session.ts). The line is inferred as syncTo's `since` infers it, and only
   * where `inferLine`; undefined, having fetched nothing, where it cannot (the next attempt syncs).
   */
  syncAfterLostRace(inferLine: boolean): Promise<string | undefined>;
  /** The pool's waiting line as the last sync found it (an acquire's store fetches it). */
  syncedLine(): WaitingEntry[];
  /**
   * Whether the synced line was inferred (syncTo with `since`), not read from the server: it may
   * still hold puts that left without a claim, and miss puts that joined since.
   */
  readonly lineInferred: boolean;
  /**
   * Whether `look` asks on a kept connection (no new connection to the server each time): a poll
   * near the front of the line then looks, and fetches only once the tip has moved.
   */
  readonly looksAreCheap: boolean;
  /** The remote branch tip and the pool's waiting line, without fetching (cheap polling). */
  look(): Promise<{ tip: string | undefined; line: WaitingEntry[] }>;
  /**
   * The remote branch tip, where the store can read it without a new connection to the server
   * (over git://, on a session kept for the wait: git/daemon-session.ts); undefined where it cannot.
   */
  tipNow(): Promise<string | undefined>;
  /**
   * No tipNow for a while (a put behind the first KEPT_SESSIONS in line): lets go of what answers
   * it, a connection.
   */
  unwatch(): void;
  /**
   * When `commit` (a tip synced in this run) was committed (ms, to the second; its committer's
   * clock), if known.
   */
  commitTime(commit: string): Promise<number | undefined>;
  /**
   * When the locks claimed at the synced tip were claimed, how long recent holds lasted, and when
   * each claim was made, as far as the commits the working copy holds tell (nothing, where it
   * holds the tip alone).
   */
  holdHistory(): Promise<HoldHistory>;
  /**
   * Puts an entry in the waiting line at the synced tip, or moves it there; false when the
   * remote refuses the line's refs.
   */
  join(entry: WaitingEntry): Promise<boolean>;
  /** Takes entries out of the line: this put's own, or those of puts that are gone. */
  leave(entries: readonly WaitingEntry[], signal?: AbortSignal): Promise<void>;
  pool(): Promise<PoolState>;
  /** The lock files of these locks as the last `pool()` listed them, read for `match`. */
  metadata(names: readonly string[]): Promise<Map<string, LockMetadata>>;
  /** Stages a change for a commit of its own. */
  apply(change: Change): Promise<void>;
  /** Whether a staged change changes anything. */
  hasStagedChanges(): Promise<boolean>;
  /**
   * Commits the staged changes, one commit each with the message of the same place, in a row;
   * returns their ids. The next push sends them all.
   */
  commit(messages: readonly string[]): Promise<string[]>;
  /**
   * `signal` replaces the store's own cancellation for this push (see base/stop-budget.ts, PUSH_GRACE_MS); `leaving`
   * takes that entry out of the line in the same, atomic, push.
   */
  push(signal?: AbortSignal, leaving?: WaitingEntry): Promise<PushOutcome>;
  /** The newest commit that touched this lock's file (answer of an update that changed nothing). */
  lastCommitOf(state: LockState, name: string): Promise<string>;
  /**
   * Whether the synced tip still carries this claim (its commit, and no later change to the
   * lock). With the tip the claim was made on (`parent`), history older than that need not be
   * fetched to tell.
   */
  holds(claim: Claim & { parent?: string }): Promise<boolean>;
  /**
   * The current claim of each of these claimed locks at the synced tip, read from their claiming
   * commits and renewals; undefined when the branch moved meanwhile (the attempt starts again).
   */
  claims(names: readonly string[]): Promise<Map<string, ClaimFacts> | undefined>;
  /** The reclaim of lock `name`'s claim with `token`, when the branch's history has one. */
  reclaimOf(name: string, token: string): Promise<ReclaimFacts | undefined>;
}

export interface Claim {
  name: string;
  commit: string;
}
