// A put's one kept session with a git:// lock repository, for what would otherwise cost git daemon
// a connection each: a poll of the branch tip, and a fetch of a commit by its id. git daemon
// serves one session per connection, and on a long-lived session upload-pack's ls-refs answers
// each ref from the values it read the first time (git 2.39: a push landing between two ls-refs on
// one protocol v2 session, the second named the old tip), so a look at the branch and the line is
// a connection of its own (daemon-refs.ts). Two things stay fresh on it:
// - HEAD: ls-refs resolves it afresh each time, through the branch it points at. Where the pool's
//   branch is the one HEAD names (a repository's default branch, where most pools live), the
//   session answers "has the branch moved?" as often as asked.
// - objects: protocol v2's fetch takes any object the repository has by its id, packs included
//   that landed after the session began.
// So the run's first fetch (whose refs, the first listed, are fresh) opens the session: the run
// lists the branch (and the line) and asks the pack of its first commits itself (session-pack.ts),
// or else git runs on it as on a connection of its own (pkt-session.ts). A put in line then asks
// HEAD on it at each poll, a run whose push lost its race asks it for the tip that won, and a
// commit so seen is asked on it by its id, by the run itself (session-pack.ts, written by
// pack-objects.ts) or else by git's fetch. A fetch that lists refs on a session that has listed
// some, and anything when the branch is not HEAD's (another branch, a detached or unborn HEAD), a
// v0 server or a session lost more than a few times, goes to a connection of its own as before.
import type { Socket } from 'node:net';
import { daemonCommand, type DaemonSockets } from './daemon-command.js';
import { daemonRequest, daemonTarget, type DaemonTarget } from './daemon-refs.js';
import { rewritesUrls } from '../transport/ssh-args.js';
import {
  SOCKET_REMOTE,
  fdCommand,
  finished,
  spawnOnFd,
  type CommandResult,
  type FdCommand,
  type FdRunOptions,
} from './fd-command.js';
import { lsRefsRequest, parseLsRefs, type AdvertisedRef } from './ls-refs.js';
import { PktSession } from './pkt-session.js';
import {
  packAnswerOf,
  packOf,
  packRequest,
  type PackSource,
  type ShallowPack,
} from './session-pack.js';

/** A session lost this many times (a server that ends idle connections) ends the watch. */
const MAX_SESSIONS = 3;

/**
 * A copy's first pack, at most: a lock repository's newest commits are a few KiB to a few hundred;
 * a larger one is left to git's fetch.
 */
const MAX_FIRST_PACK_BYTES = 8 * 1024 * 1024;

/** A put's kept session with a git:// lock repository. */
export interface KeptSession extends PackSource {
  /** False once it has ended, for the run (a fetch then makes a connection of its own). */
  readonly usable: boolean;
  /** The branch tip as the server has it now; undefined once the session cannot tell. */
  tip(): Promise<string | undefined>;
  /** Runs git's fetch (`args` naming fd::3) on the session; undefined where it cannot. */
  fetch(args: readonly string[], options: FdRunOptions): Promise<CommandResult | undefined>;
  /**
   * The pack of what commit `want` has beyond `haves`, asked on the session (session-pack.ts);
   * undefined where it cannot (no session to be had, an answer it cannot read or too long).
   */
  pack(want: string, haves: readonly string[], signal?: AbortSignal): Promise<Buffer | undefined>;
  /** PackSource.refs, on a session that has listed none (later lists would be stale). */
  refs(prefixes: readonly string[], signal?: AbortSignal): Promise<AdvertisedRef[] | undefined>;
  /** PackSource.firstPack, on the session. */
  firstPack(want: string, depth: number, signal?: AbortSignal): Promise<ShallowPack | undefined>;
  /**
   * Lets the session go until the next question (a put behind the first 16 in line: git daemon
   * counts it against `--max-connections`, 32 by default, and pauses a second when it is reached).
   */
  release(): void;
  close(): void;
}

/** A kept session for `branch` of a git:// URI; undefined for any other URI. */
export function daemonSession(
  settings: {
    uri: string;
    branch: string;
    gitTimeoutMs: number;
    gitConfig: readonly { name: string; value: string }[];
  },
  signal: AbortSignal,
): KeptSession | undefined {
  // url.<base>.insteadOf may send git elsewhere: the uri's HEAD would say nothing of that branch.
  if (rewritesUrls(settings.gitConfig)) return undefined;
  const target = daemonTarget(settings.uri);
  if (!target) return undefined;
  return new DaemonSession(target, `refs/heads/${settings.branch}`, settings.gitTimeoutMs, signal);
}

/**
 * `args` as a command on the kept session where it can take it (a fetch), else on a connection of
 * its own (daemon-command.ts); undefined for a command that names no git:// URI.
 */
export function keptSessionCommand(
  session: KeptSession,
  daemon: DaemonSockets,
  args: readonly string[],
): FdCommand | undefined {
  const own = daemonCommand(daemon, args);
  return fdCommand(daemon.uri, args, async ({ args: replaced, service }, options) => {
    const kept = service === 'git-upload-pack' ? await session.fetch(replaced, options) : undefined;
    return kept ?? own?.run(options);
  });
}

class DaemonSession implements KeptSession {
  private session: PktSession | undefined;
  /** Sessions lost (or refused) so far; one let go (release) is not lost. */
  private lost = 0;
  private ended = false;
  /** What the server said when the current session opened, which git reads as its own. */
  private capabilities = Buffer.alloc(0);
  /** The repository's object format, where its capabilities name one. */
  private format: string | undefined;
  /** Whether the current session has listed refs: later lists would be stale. */
  private listed = false;
  /** One conversation at a time on the session. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly target: DaemonTarget,
    private readonly branchRef: string,
    private readonly timeoutMs: number,
    private readonly signal: AbortSignal,
  ) {
    signal.addEventListener('abort', () => this.close(), { once: true });
  }

  get usable(): boolean {
    return !this.ended && !this.signal.aborted;
  }

  tip(): Promise<string | undefined> {
    return this.serialized(() => this.ask());
  }

  fetch(args: readonly string[], options: FdRunOptions): Promise<CommandResult | undefined> {
    return this.serialized(() => this.relay(args, options));
  }

  pack(want: string, haves: readonly string[], signal?: AbortSignal): Promise<Buffer | undefined> {
    return this.serialized(() => this.asked(packRequest(want, haves), packOf, signal));
  }

  refs(prefixes: readonly string[], signal?: AbortSignal): Promise<AdvertisedRef[] | undefined> {
    return this.serialized(() => this.list(prefixes, signal));
  }

  firstPack(want: string, depth: number, signal?: AbortSignal): Promise<ShallowPack | undefined> {
    const request = packRequest(want, [], depth);
    const maxBytes = MAX_FIRST_PACK_BYTES;
    return this.serialized(() => this.asked(request, packAnswerOf, signal, { maxBytes }));
  }

  release(): void {
    void this.serialized(async () => this.drop());
  }

  close(): void {
    this.ended = true;
    this.drop();
  }

  private serialized<T>(conversation: () => Promise<T>): Promise<T> {
    const turn = this.queue.then(conversation);
    this.queue = turn.catch(() => undefined);
    return turn;
  }

  private drop(): void {
    this.session?.close();
    this.session = undefined;
  }

  private async ask(): Promise<string | undefined> {
    if (!this.usable) return undefined;
    const timeout = AbortSignal.any([this.signal, AbortSignal.timeout(this.timeoutMs)]);
    const idle = this.session !== undefined && !this.session.failed;
    try {
      const session = (idle ? this.session : undefined) ?? (await this.open(timeout));
      session.ask(lsRefsRequest(['HEAD'], this.format, { symrefs: true }));
      // Listing HEAD reads every loose ref into upload-pack's cache.
      this.listed = true;
      const head = headLine((await session.untilFlush(timeout)).lines);
      // HEAD names another branch, or none: this session cannot see the pool's branch move.
      if (!head || head.target !== this.branchRef) this.close();
      return this.usable ? head?.id : undefined;
    } catch {
      // A session lost while idle is opened again, a few times at most; a failure on a fresh one
      // ends it for the run.
      this.drop();
      if (!idle || ++this.lost >= MAX_SESSIONS) this.close();
      return this.usable ? this.ask() : undefined;
    }
  }

  /** The session's own question, on the session it has or a new one; undefined where none. */
  private async asked<T>(
    request: Buffer,
    read: (answer: Buffer) => T,
    signal: AbortSignal | undefined,
    { maxBytes, listing = false }: { maxBytes?: number; listing?: boolean } = {},
  ): Promise<T | undefined> {
    if (!this.usable) return undefined;
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const stop = AbortSignal.any([...(signal ? [signal] : []), this.signal, timeout]);
    const idle = this.session && !this.session.failed ? this.session : undefined;
    // Refs listed on a session that has listed some would be stale.
    if (listing && idle && this.listed) return undefined;
    let session: PktSession;
    try {
      session = idle ?? (await this.open(stop));
    } catch {
      if (++this.lost >= MAX_SESSIONS) this.close();
      return undefined;
    }
    // Objects are written for SHA-1 repositories only (pack-objects.ts).
    if (this.format) return undefined;
    if (listing) this.listed = true;
    try {
      session.ask(request, maxBytes);
      return read((await session.untilFlush(stop)).raw);
    } catch {
      // Left in the middle of an answer, or one it could not read: of no more use.
      this.drop();
      return undefined;
    }
  }

  private list(prefixes: readonly string[], signal: AbortSignal | undefined) {
    return this.asked(
      lsRefsRequest(prefixes, this.format),
      (answer) => {
        const refs = parseLsRefs(answer);
        if (!refs) throw new Error('an ls-refs answer it cannot read');
        return refs;
      },
      signal,
      { listing: true },
    );
  }

  /** git's fetch on the session; undefined where it must make a connection of its own. */
  private async relay(
    args: readonly string[],
    options: FdRunOptions,
  ): Promise<CommandResult | undefined> {
    if (!this.usable) return undefined;
    // A fetch by id lists no refs; one that does asks a session that has listed none (a fresh
    // one: the put's first fetch).
    const refspecs = args.slice(args.indexOf(SOCKET_REMOTE) + 1);
    const listing = args[0] !== 'fetch' || !refspecs.every((spec) => byId.test(spec));
    const idle = this.session && !this.session.failed ? this.session : undefined;
    if (listing && idle && this.listed) return undefined;
    let session: PktSession;
    try {
      session = idle ?? (await this.open(AbortSignal.any([options.signal, this.signal])));
    } catch {
      if (++this.lost >= MAX_SESSIONS) this.close();
      return undefined;
    }
    if (listing) this.listed = true;
    const child = spawnOnFd(args, options);
    const socket = child.stdio[3] as Socket;
    // Once git has gone, nothing more is read from it or passed to it.
    child.once('exit', () => socket.destroy());
    const relayed = session.relay(socket, this.capabilities);
    const result = await finished(child);
    // A session left in the middle of an answer is of no more use.
    if (!relayed.settled()) this.drop();
    return result;
  }

  /** A new session: git daemon's request for upload-pack in protocol v2, and its capabilities. */
  private async open(signal: AbortSignal): Promise<PktSession> {
    // One still here ended without being let go.
    if (this.session) this.lost++;
    this.drop();
    if (this.lost >= MAX_SESSIONS) throw new Error('too many sessions lost');
    this.listed = false;
    const session = new PktSession(this.target);
    try {
      session.ask(daemonRequest('git-upload-pack', this.target, true));
      const { lines, raw } = await session.untilFlush(signal);
      if (lines[0] !== 'version 2') throw new Error('the server speaks no protocol v2');
      const format = lines.find((line) => line?.startsWith('object-format='))?.slice(14);
      this.format = format === 'sha1' ? undefined : format;
      this.capabilities = Buffer.from(raw);
      // A request whose answer nobody reads (PktSession.kick): one write, a flush, as no ref
      // starts with HEAD^.
      session.kickWith(lsRefsRequest(['HEAD^'], this.format));
    } catch (error) {
      session.close();
      throw error;
    }
    this.session = session;
    return session;
  }
}

/** A fetch refspec whose source is a commit id: `[+]<id>[:<ref>]`. */
const byId = /^\+?(?:[0-9a-f]{40}|[0-9a-f]{64})(?::|$)/;

/** HEAD's id and the branch it names, from an ls-refs answer asked with symrefs. */
function headLine(lines: readonly (string | null)[]): { id: string; target?: string } | undefined {
  for (const line of lines) {
    const match = /^([0-9a-f]{40}|[0-9a-f]{64}) HEAD(?: (.*))?$/.exec(line ?? '');
    if (!match) continue;
    const target = /(?:^| )symref-target:(\S+)/.exec(match[2] ?? '')?.[1];
    return { id: match[1]!, ...(target ? { target } : {}) };
  }
  return undefined;
}
