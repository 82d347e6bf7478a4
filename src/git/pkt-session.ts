// One connection to git daemon kept open by the run (daemon-session.ts): questions of its own,
// read a pkt-line section (up to a flush) at a time, and git commands relayed over it. git gets
// the session as a socket pair on its descriptor 3 (`fd::3`), reads the capabilities the session
// opened with as if the server had just sent them, and its requests and the server's answers pass
// through unchanged, counted so the session is known to sit between answers when git is done.
import { connect, type Socket } from 'node:net';
import type { DaemonTarget } from './daemon-refs.js';
import { isFlush, packetText, packets } from './ls-refs.js';

/**
 * An answer about a ref or two is a few lines, a commit's pack a few KiB: a session that sends
 * this much is not answering (unless the request said more, see ask).
 */
const MAX_PENDING_BYTES = 64 * 1024;
/** Kicks (see PktSession.kick) per answer, at most: an answer is a few writes. */
const MAX_KICKS = 8;

/** A relayed command's end: whether it left the session between answers, ready for the next. */
export interface Relayed {
  settled(): boolean;
}

export class PktSession {
  private readonly socket: Socket;
  private pending = Buffer.alloc(0);
  private failure: Error | undefined;
  private wake: (() => void) | undefined;
  /**
   * Whose each answer still to come is, in the order the requests went: the session's own (read
   * with untilFlush), a relayed command's, or a kick's, which nobody reads (see kick).
   */
  private readonly owners: ('self' | 'git' | 'kick')[] = [];
  private readonly fromServer = new PktSplitter();
  /** The most of an answer of the session's own held at once (see MAX_PENDING_BYTES). */
  private maxPending = MAX_PENDING_BYTES;
  /** Where the answers owed to a relayed command go. */
  private toGit: ((packet: Buffer) => void) | undefined;

  constructor(target: DaemonTarget) {
    this.socket = connect({ host: target.host, port: target.port, noDelay: true });
    this.socket.on('data', (chunk: Buffer) => this.received(chunk));
    this.socket.on('error', (error) => this.fail(error));
    this.socket.once('close', () => this.fail(new Error('the server closed the connection')));
  }

  get failed(): boolean {
    return this.failure !== undefined;
  }

  /**
   * Sends a request of the session's own, whose answer untilFlush reads; `maxBytes`: the most it
   * may be (a copy's first pack).
   */
  ask(request: Buffer, maxBytes = MAX_PENDING_BYTES): void {
    this.maxPending = maxBytes;
    this.owners.push('self');
    this.socket.write(request);
  }

  close(): void {
    this.fail(new Error('closed'));
  }

  private fail(error: Error): void {
    this.failure ??= error;
    this.socket.destroy();
    this.wake?.();
  }

  private received(chunk: Buffer): void {
    const owed = this.owners.length;
    let packets: Buffer[];
    try {
      packets = this.fromServer.push(chunk);
    } catch (error) {
      return this.fail(error as Error);
    }
    for (const packet of packets) {
      const owner = this.owners[0];
      if (owner === undefined) return this.fail(new Error('an answer nobody asked for'));
      if (owner === 'git') this.toGit?.(packet);
      if (owner === 'self') this.pending = Buffer.concat([this.pending, packet]);
      if (isFlush(packet)) {
        this.owners.shift();
        this.kicks = 0;
      }
    }
    if (this.pending.length > this.maxPending) return this.fail(new Error('answer too long'));
    // Part of an answer that is waited for, and more of it to come: see kick.
    const open = this.owners.length === owed && this.owners[0] !== 'kick';
    if (open && this.kicks < MAX_KICKS && this.kickRequest.length > 0) this.kick();
    this.wake?.();
  }

  /** How many kicks the answer now coming has had, and the request each sends. */
  private kicks = 0;
  private kickRequest: Buffer = Buffer.alloc(0);

  /** The request a kick sends (none is sent before one is given). */
  kickWith(request: Buffer): void {
    this.kickRequest = request;
  }

  /**
   * A request whose answer nobody reads, sent so that the server's last segment is acknowledged
   * at once. On a session kept for long, Linux acknowledges a lone segment only after its delayed
   * ACK timer (40 ms), and upload-pack writes an answer in several small writes with Nagle's
   * algorithm on, each after the one before is acknowledged: a fetch of one commit took 50-60 ms
   * on 127.0.0.1, against 10-20 ms on a fresh connection, which acknowledges its first segments at
   * once. Data sent back carries the acknowledgement: `kick`, a request answered after git's,
   * best one whose answer is one write (a flush: ls-refs of a prefix nothing has).
   */
  private kick(): void {
    this.kicks++;
    this.owners.push('kick');
    this.socket.write(this.kickRequest);
  }

  /** The pkt-lines up to the next flush (null, which ends them), and their bytes. */
  async untilFlush(signal: AbortSignal): Promise<{ lines: (string | null)[]; raw: Buffer }> {
    const onAbort = () => this.fail(new Error('cancelled'));
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      for (;;) {
        const section = this.section();
        if (section) return section;
        if (this.failure) throw this.failure;
        if (signal.aborted) throw new Error('cancelled');
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** Takes the lines up to and including a flush off `pending`, if it holds them whole. */
  private section(): { lines: (string | null)[]; raw: Buffer } | undefined {
    const lines: (string | null)[] = [];
    let offset = 0;
    for (const packet of packets(this.pending)) {
      offset += packet.length;
      if (isFlush(packet)) {
        const raw = this.pending.subarray(0, offset);
        this.pending = this.pending.subarray(offset);
        return { lines: [...lines, null], raw };
      }
      lines.push(packetText(packet));
    }
    return undefined;
  }

  /**
   * Relays the conversation of the git command on `git` (its descriptor 3) to the session: first
   * `capabilities` (what the server said when the session opened), then each request to the
   * server and each answer back. A lone flush where a request would start is git ending its
   * session: not passed on, so upload-pack goes on serving this one. git shuts down its side once
   * it has asked its last (a fetch's `done`) and reads the answer after: its side is ended once
   * every answer has passed.
   */
  relay(git: Socket, capabilities: Buffer): Relayed {
    const fromGit = new PktSplitter();
    let inRequest = false;
    let gitEnded = false;
    let garbled = false;
    (git as { allowHalfOpen: boolean }).allowHalfOpen = true;
    const gitOwed = () => this.owners.includes('git');
    const endGit = () => {
      if (gitEnded && !gitOwed()) git.end();
    };
    // A git that needs nothing from the server (it has the commit) exits without reading.
    git.on('error', () => undefined);
    git.on('data', (chunk: Buffer) => {
      try {
        for (const packet of fromGit.push(chunk)) {
          if (isFlush(packet) && !inRequest) continue;
          this.socket.write(packet);
          inRequest = !isFlush(packet);
          if (!inRequest) this.owners.push('git');
        }
      } catch {
        garbled = true;
        git.destroy();
      }
    });
    git.on('end', () => {
      gitEnded = true;
      endGit();
    });
    this.toGit = (packet) => {
      git.write(packet);
      if (isFlush(packet)) setImmediate(endGit);
    };
    git.write(capabilities);
    return {
      settled: () => {
        this.toGit = undefined;
        return !garbled && !this.failure && !gitOwed() && !inRequest;
      },
    };
  }
}

/** Splits a stream of pkt-lines into whole packets (header included). */
class PktSplitter {
  private buffered = Buffer.alloc(0);

  push(chunk: Buffer): Buffer[] {
    this.buffered = Buffer.concat([this.buffered, chunk]);
    const whole = [...packets(this.buffered)];
    const used = whole.reduce((sum, packet) => sum + packet.length, 0);
    this.buffered = this.buffered.subarray(used);
    return whole;
  }
}
