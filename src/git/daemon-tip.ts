// Watching a git:// lock repository's branch tip without a connection per poll. git daemon serves
// one session per connection, and on a long-lived session upload-pack's ls-refs answers each ref
// from the values it read the first time (git 2.39: a push landing between two ls-refs on one
// protocol v2 session, the second named the old tip), so a look at the branch is a connection of
// its own (daemon-refs.ts). HEAD is the exception: ls-refs resolves it afresh each time, through
// the branch it points at. Where the pool's branch is the one HEAD names (a repository's default
// branch, where most pools live), one session kept for the whole wait answers "has the branch
// moved?" as often as asked: the server sees one connection for the wait, not one per poll.
// Anything else (another branch, a detached or unborn HEAD, a server that speaks no v2, a session
// lost more than a few times) ends the watch for the run, and the caller looks as before.
import { connect, type Socket } from 'node:net';
import { daemonRequest, daemonTarget, type DaemonTarget } from './daemon-refs.js';
import { rewritesUrls } from './environment.js';
import { lsRefsRequest } from './ls-refs.js';

/** The branch tip, read without a new connection to the server. */
export interface TipWatch {
  /** The tip as the server has it now; undefined once the watch cannot tell (for the run). */
  tip(): Promise<string | undefined>;
  close(): void;
}

/** A session lost this many times (a server that ends idle connections) ends the watch. */
const MAX_SESSIONS = 3;
/** An answer about one ref is a line; a session that sends this much is not answering that. */
const MAX_PENDING_BYTES = 64 * 1024;

/** A watch of `branch` for a git:// URI; undefined for any other URI. */
export function daemonTipWatch(
  settings: {
    uri: string;
    branch: string;
    gitTimeoutMs: number;
    gitConfig: readonly { name: string; value: string }[];
  },
  signal: AbortSignal,
): TipWatch | undefined {
  // url.<base>.insteadOf may send git elsewhere: the uri's HEAD would say nothing of that branch.
  if (rewritesUrls(settings.gitConfig)) return undefined;
  const target = daemonTarget(settings.uri);
  if (!target) return undefined;
  return new DaemonTip(target, `refs/heads/${settings.branch}`, settings.gitTimeoutMs, signal);
}

class DaemonTip implements TipWatch {
  private session: PktSession | undefined;
  private sessions = 0;
  private ended = false;
  /** The repository's object format, where its capabilities name one. */
  private format: string | undefined;
  /** One question at a time on the session. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly target: DaemonTarget,
    private readonly branchRef: string,
    private readonly timeoutMs: number,
    private readonly signal: AbortSignal,
  ) {
    signal.addEventListener('abort', () => this.close(), { once: true });
  }

  tip(): Promise<string | undefined> {
    const answer = this.queue.then(() => this.ask());
    this.queue = answer;
    return answer;
  }

  close(): void {
    this.ended = true;
    this.session?.close();
    this.session = undefined;
  }

  private async ask(): Promise<string | undefined> {
    if (this.ended || this.signal.aborted) return undefined;
    const timeout = AbortSignal.any([this.signal, AbortSignal.timeout(this.timeoutMs)]);
    try {
      const session = this.session ?? (await this.open(timeout));
      session.write(lsRefsRequest(['HEAD'], this.format, { symrefs: true }));
      const head = headLine(await session.untilFlush(timeout));
      // HEAD names another branch, or none: this session cannot see the pool's branch move.
      if (!head || head.target !== this.branchRef) this.close();
      return this.ended ? undefined : head?.id;
    } catch {
      // A session lost between questions is opened again, a few times at most; a failure on a
      // fresh one ends the watch.
      const lostIdle = this.session !== undefined;
      this.session?.close();
      this.session = undefined;
      if (!lostIdle || this.sessions >= MAX_SESSIONS) this.close();
      return this.ended || this.signal.aborted ? undefined : this.ask();
    }
  }

  /** A new session: git daemon's request for upload-pack in protocol v2, and its capabilities. */
  private async open(signal: AbortSignal): Promise<PktSession> {
    if (this.sessions >= MAX_SESSIONS) throw new Error('too many sessions');
    this.sessions++;
    const session = new PktSession(this.target);
    try {
      session.write(daemonRequest('git-upload-pack', this.target, true));
      const capabilities = await session.untilFlush(signal);
      if (capabilities[0] !== 'version 2') throw new Error('the server speaks no protocol v2');
      const format = capabilities.find((line) => line?.startsWith('object-format='))?.slice(14);
      this.format = format === 'sha1' ? undefined : format;
    } catch (error) {
      session.close();
      throw error;
    }
    this.session = session;
    return session;
  }
}

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

/** One connection to git daemon, read a pkt-line section (up to a flush) at a time. */
class PktSession {
  private readonly socket: Socket;
  private pending = Buffer.alloc(0);
  private failure: Error | undefined;
  private wake: (() => void) | undefined;

  constructor(target: DaemonTarget) {
    this.socket = connect({ host: target.host, port: target.port, noDelay: true });
    this.socket.on('data', (chunk: Buffer) => {
      this.pending = Buffer.concat([this.pending, chunk]);
      if (this.pending.length > MAX_PENDING_BYTES) this.fail(new Error('answer too long'));
      this.wake?.();
    });
    this.socket.on('error', (error) => this.fail(error));
    this.socket.once('close', () => this.fail(new Error('the server closed the connection')));
  }

  write(data: Buffer): void {
    this.socket.write(data);
  }

  close(): void {
    this.fail(new Error('closed'));
  }

  private fail(error: Error): void {
    this.failure ??= error;
    this.socket.destroy();
    this.wake?.();
  }

  /** The pkt-lines up to the next flush (null), which ends them. */
  async untilFlush(signal: AbortSignal): Promise<(string | null)[]> {
    const onAbort = () => this.fail(new Error('cancelled'));
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      for (;;) {
        const lines = this.section();
        if (lines) return lines;
        if (this.failure) throw this.failure;
        if (signal.aborted) throw new Error('cancelled');
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** Takes the lines up to and including a flush off `pending`, if it holds one whole. */
  private section(): (string | null)[] | undefined {
    const lines: (string | null)[] = [];
    let offset = 0;
    while (offset + 4 <= this.pending.length) {
      const header = this.pending.subarray(offset, offset + 4).toString('latin1');
      if (!/^[0-9a-f]{4}$/.test(header)) throw new Error('not a pkt-line');
      const length = Number.parseInt(header, 16);
      if (length === 0) {
        lines.push(null);
        this.pending = this.pending.subarray(offset + 4);
        return lines;
      }
      // 0001 (delim) and 0002 (response-end) carry nothing: not in the answers read here.
      if (length < 4) throw new Error('unexpected pkt-line');
      if (offset + length > this.pending.length) return undefined;
      const text = this.pending.subarray(offset + 4, offset + length).toString('utf8');
      lines.push(text.replace(/\n$/, ''));
      offset += length;
    }
    return undefined;
  }
}
