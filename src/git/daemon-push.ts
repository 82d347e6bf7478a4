// A push to a git:// lock repository whose connection answers a lost race too. git daemon's
// receive-pack starts each connection by advertising the refs as they are then, and git's push
// refuses itself ("fetch first") when the branch is not where the commit it pushes was made on: a
// connection, a receive-pack and a git process, spent on learning that another build's push landed
// first. Here the run reads the advertisement itself before starting git:
// - where the branch stands where the push expects it, git starts on the connection, which the run
//   relays to it (daemon-command.ts), the advertisement first (git reads it as it would have);
// - where it moved, git does not start: the push is answered as git would answer it (`[rejected]
//   (fetch first)`), and the connection is kept for the next push, shortly after. The put learns the
//   new tip on its kept session, makes its commit again and pushes over the connection kept; a put
//   that joins the waiting line instead joins over it. A race lost before the push reached the
//   server then costs git daemon no connection of its own.
// receive-pack checks each ref against the value the push sends when it updates it (its old value,
// which git takes from the advertisement), so the branch's line in a kept advertisement is made to
// name the tip the put's commit was made on: more pushes may have landed since the advertisement,
// as when two locks are released at once and two claims follow. Where the branch stands elsewhere
// by then, the server refuses the push as it refuses any lost race.
import type { Socket } from 'node:net';
import type { KnownRef } from '../transport/kept-advertisements.js';
import { advertisedRefs, isFlush, MAX_ANSWER_BYTES, packets, packetText } from './ls-refs.js';
import { relayed } from './daemon-command.js';
import { ownPush, type Advertised } from './own-push.js';
import { SOCKET_REMOTE, type CommandResult, type FdRunOptions } from './fd-command.js';

/**
 * How long a connection whose advertisement showed a lost race is kept for the push that follows
 * it (a fetch on the kept session and a commit: tens of milliseconds); git daemon counts it
 * against its `--max-connections` meanwhile.
 */
const KEPT_MS = 1_000;

export class DaemonPushes {
  private kept: (Advertised & { timer: NodeJS.Timeout; closed: () => boolean }) | undefined;

  /**
   * Runs git's push (`args` naming SOCKET_REMOTE) on `connect`'s connection, or on the one kept
   * where its advertisement names the branch, told where the push expects it (`expected`, the
   * branch the push moves, as the commit pushed was made on). Undefined, having started nothing,
   * where no connection could be made.
   */
  async run(
    args: readonly string[],
    options: FdRunOptions,
    expected: KnownRef,
    connect: () => Promise<Socket | undefined>,
  ): Promise<CommandResult | undefined> {
    // The branch may have moved since the kept connection's advertisement, to the tip the put
    // has synced to since: git is told it stands there, and the server checks that it does.
    let advertised = this.take((refs) => refs.has(expected.ref));
    if (advertised) advertised = standingAt(advertised, expected);
    if (!advertised) {
      const socket = await connect();
      if (!socket) return undefined;
      advertised = await readAdvertisement(socket, options.signal);
      if (!advertised) return undefined;
    }
    const at = advertised.refs?.get(expected.ref);
    const pushing = args.find((arg) => arg.endsWith(`:${expected.ref}`));
    // git would refuse it before sending anything: unless the branch already is the commit pushed
    // (git says "up to date") or the advertisement was not read whole (git reads it itself).
    if (advertised.refs && at !== expected.id && !(at && pushing?.startsWith(`${at}:`))) {
      this.keep(advertised);
      return refusedBeforeSending(pushing ?? `:${expected.ref}`);
    }
    return this.pushOn(advertised, args, options);
  }

  /**
   * Runs any other push (`args` naming SOCKET_REMOTE): on the kept connection where the push only
   * creates refs that connection advertised none of (a put joining the waiting line after its
   * claim lost a race: its entry is new, and no other build writes it), else on `connect`'s, the
   * kept one let go (git daemon counts it against its `--max-connections`).
   */
  async runOther(
    args: readonly string[],
    options: FdRunOptions,
    connect: () => Promise<Socket | undefined>,
  ): Promise<CommandResult | undefined> {
    const created = createdRefs(args);
    const kept = this.take((refs) => !!created && created.every((ref) => !refs.has(ref)));
    if (kept) return this.pushOn(kept, args, options);
    const socket = await connect();
    if (!socket) return undefined;
    // The run makes the push itself once it has read the advertisement (own-push.ts).
    if (!options.sends) return relayed(args, options, socket);
    const advertised = await readAdvertisement(socket, options.signal);
    return advertised && this.pushOn(advertised, args, options);
  }

  /** The push `args` on `advertised`'s connection: the run's own where it can, else git's. */
  private async pushOn(advertised: Advertised, args: readonly string[], options: FdRunOptions) {
    const own = options.sends && (await ownPush(args, advertised, options.sends, options.signal));
    return own ?? relayed(args, options, advertised.socket, advertised.read);
  }

  /** Closes the kept connection, if any (the run ends). */
  close(): void {
    this.drop();
  }

  /** The kept connection, where it is still open and its advertisement `fits`; else let go. */
  private take(fits: (refs: Map<string, string>) => boolean): Advertised | undefined {
    const kept = this.kept;
    if (!kept) return undefined;
    this.kept = undefined;
    clearTimeout(kept.timer);
    if (kept.closed() || !kept.refs || !fits(kept.refs)) {
      kept.socket.destroy();
      return undefined;
    }
    kept.socket.ref();
    return kept;
  }

  private keep(advertised: Advertised): void {
    this.drop();
    const { socket } = advertised;
    // Nothing of the run waits on it: it never keeps the run from ending.
    socket.unref();
    const timer = setTimeout(() => this.drop(), KEPT_MS);
    timer.unref();
    // Ended by the server meanwhile: git would find nothing to read on it.
    let closed = false;
    const ended = () => (closed = true);
    socket.once('end', ended);
    socket.once('close', ended);
    socket.on('error', ended);
    this.kept = { ...advertised, timer, closed: () => closed };
  }

  private drop(): void {
    if (!this.kept) return;
    clearTimeout(this.kept.timer);
    this.kept.socket.destroy();
    this.kept = undefined;
  }
}

/**
 * `advertised` as if it named the branch at `expected.id`: its line rewritten, in what git reads
 * first. Undefined, the connection let go, where that line cannot be found.
 */
function standingAt(advertised: Advertised, expected: KnownRef): Advertised | undefined {
  const was = advertised.refs?.get(expected.ref);
  if (was === expected.id) return advertised;
  const id = Buffer.from(expected.id, 'latin1');
  // `<id> <ref>`, the first line with a NUL and the capabilities after it.
  const line = `${was} ${expected.ref}`;
  const parts: Buffer[] = [];
  let end = 0;
  let found = false;
  // Rewritten in place: an id of another length would be another object format.
  if (was?.length === id.length)
    for (const packet of packets(advertised.read)) {
      end += packet.length;
      const text = packet.subarray(4).toString('latin1');
      if (!found && text.startsWith(line) && '\0\n'.includes(text[line.length] ?? '\n')) {
        found = true;
        parts.push(Buffer.concat([packet.subarray(0, 4), id, packet.subarray(4 + id.length)]));
      } else parts.push(packet);
      if (isFlush(packet)) break;
    }
  if (!found) {
    advertised.socket.destroy();
    return undefined;
  }
  const refs = new Map(advertised.refs);
  refs.set(expected.ref, expected.id);
  const read = Buffer.concat([...parts, advertised.read.subarray(end)]);
  return { socket: advertised.socket, read, refs };
}

/**
 * Reads receive-pack's advertisement (up to its flush) from `socket`; the refs are undefined where
 * the server said something else (an `ERR` line, a connection ended early, more than an answer
 * holds), which git then reads as it would have. Undefined, the socket destroyed, when stopped.
 */
export function readAdvertisement(
  socket: Socket,
  signal: AbortSignal,
): Promise<Advertised | undefined> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (refs: Map<string, string> | undefined) => {
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.off('error', onEnd);
      signal.removeEventListener('abort', onAbort);
      socket.pause();
      resolve({ socket, read: Buffer.concat(chunks), refs });
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      const ended = advertisementEnd(Buffer.concat(chunks));
      if (ended !== 'more') done(ended);
      else if (size > MAX_ANSWER_BYTES) done(undefined);
    };
    const onEnd = () => done(undefined);
    const onAbort = () => {
      socket.off('data', onData);
      socket.destroy();
      resolve(undefined);
    };
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    socket.on('data', onData);
    socket.once('end', onEnd);
    socket.once('error', onEnd);
    socket.resume();
  });
}

/**
 * The refs of a v0 advertisement that `data` holds whole, by name (advertisedRefs: an empty
 * repository's line of zeros names none), 'more' while it is not whole, undefined for anything
 * else (an `ERR` line).
 */
function advertisementEnd(data: Buffer): Map<string, string> | undefined | 'more' {
  const lines: string[] = [];
  try {
    for (const packet of packets(data)) {
      if (isFlush(packet)) {
        const refs = advertisedRefs(lines);
        return refs && new Map(refs.map(({ ref, id }) => [ref, id]));
      }
      lines.push(packetText(packet));
    }
  } catch {
    return undefined;
  }
  return 'more';
}

/**
 * The refs a push's refspecs (after SOCKET_REMOTE) write, where each names a source (`+id:ref`):
 * undefined for a push that deletes any.
 */
function createdRefs(args: readonly string[]): string[] | undefined {
  const refspecs = args.slice(args.indexOf(SOCKET_REMOTE) + 1);
  const refs = refspecs.map((refspec) => /^\+?[^:]+:(.+)$/.exec(refspec)?.[1]);
  return refs.length > 0 && refs.every((ref) => ref !== undefined) ? (refs as string[]) : undefined;
}

/**
 * What `git push --porcelain` prints, and its exit code, when the advertisement shows that the
 * branch moved since the commit pushed was made (git's transport.c and send-pack.c, git 2.39).
 */
function refusedBeforeSending(refspec: string): CommandResult {
  return {
    exitCode: 1,
    signal: null,
    stdout: Buffer.from(`To ${SOCKET_REMOTE}\n!\t${refspec}\t[rejected] (fetch first)\nDone\n`),
    stderr: Buffer.from(`error: failed to push some refs to '${SOCKET_REMOTE}'\n`),
  };
}
