// One SSH connection per server for a whole run, as OpenSSH's ControlMaster gives: this process
// runs every git command on a shared connection. git's clones, fetches and pushes reach it on
// their descriptor 3 (attach: git/ssh-channel-command.ts); anything else git runs over SSH, its
// SSH program (bin/ssh.ts) relays through a Unix socket in the run's private folder. An
// acquire's fetch and push, and every poll while it waits, then pay for one handshake instead of
// one each (on 127.0.0.1 with OpenSSH's sshd, and git's commands on channels, an acquire took
// 0.53× the time it took with a connection per command). ssh2 is loaded on the first command, so
// runs that never use SSH never load it.
import { createServer, type Server, type Socket } from 'node:net';
import { PassThrough, Writable, type Duplex, type Readable } from 'node:stream';
import type { ClientChannel } from 'ssh2';
import { SSH_STOPPED_IDLE_MS } from '../base/stop-budget.js';
import {
  decodeRequest,
  encodeFrame,
  FRAME_EXIT,
  FRAME_STDERR,
  FRAME_STDOUT,
  MAX_HEADER_BYTES,
} from './mux-frames.js';
import { parseSshArgs, type SshInvocation } from './ssh-args.js';
import { SSH_FAILED, type SshTransportConfig } from './ssh-config.js';
import type { SshConnection, SshStreams, SshTarget } from './ssh-session.js';

/** A command's streams here: git's stdin arrives on the socket, its output leaves as frames. */
type MuxStreams = SshStreams & { stdin: PassThrough };

/**
 * A connection nobody has used for this long is closed. Waiting puts poll every `retry_delay`
 * (10 s by default), so their polls keep using it.
 */
const IDLE_MS = 60_000;

export interface SshMux {
  /** The Unix socket git's SSH program connects to. */
  readonly path: string;
  /**
   * Runs a command of the run's own on the shared connection, as git's would run: `input` is all
   * its stdin. Resolves with its exit status and its stdout, whole; `signal` ends the command, and
   * so does a stdout over `maxBytes`, which rejects.
   */
  exec(
    invocation: SshInvocation,
    env: Record<string, string>,
    input: Buffer,
    signal: AbortSignal,
    maxBytes: number,
  ): Promise<{ status: number; stdout: Buffer }>;
  /**
   * Runs git's command on the shared connection with `socket` (the run's end of git's descriptor
   * 3) as its stdin and stdout, the remote command's stderr and any failure of ours (one `ssh: …`
   * line, as git's SSH program writes) on `stderr`. Ends `socket` once the command is over, so git
   * reads its end; resolves with the command's status.
   */
  attach(
    invocation: SshInvocation,
    env: Record<string, string>,
    socket: Duplex,
    stderr: Writable,
  ): Promise<number>;
  /** Drops every connection and every command in flight. */
  close(): void;
  /**
   * The run was stopped: every connection closes shortly after its last command, instead of a
   * minute. Commands still running keep theirs (their git is stopped by its own signal, or
   * allowed to finish, as a claim's push is), and the few a stop starts may still use one.
   */
  stop(): void;
}

interface Shared {
  connection: Promise<SshConnection>;
  /** Commands running on it; the idle timer runs while there are none. */
  running: number;
  idle?: NodeJS.Timeout;
}

type SshSession = typeof import('./ssh-session.js');
let sshSession: Promise<SshSession> | undefined;
const loadSshSession = () => (sshSession ??= import('./ssh-session.js'));

/**
 * Listens on `path`; undefined when it cannot (a TMPDIR too long for a socket path, say), and
 * git's SSH program then connects on its own, as it did before connections were shared.
 */
export async function startSshMux(
  path: string,
  config: SshTransportConfig,
  {
    idleMs: runningIdleMs = IDLE_MS,
    warn = () => undefined,
  }: {
    idleMs?: number;
    /** Gets the line saying a host key was accepted unchecked: the run's own stderr. */
    warn?: (line: string) => void;
  } = {},
): Promise<SshMux | undefined> {
  let idleMs = runningIdleMs;
  const lifetime = new AbortController();
  const shared = new Map<string, Shared>();
  const sockets = new Set<Socket>();

  const drop = (key: string, entry: Shared) => {
    if (shared.get(key) === entry) shared.delete(key);
    clearTimeout(entry.idle);
    entry.connection.then(
      ({ client }) => client.destroy(),
      () => undefined,
    );
  };

  /** The connection for `target`, and whether this command is the one that opened it. */
  const connectionFor = async (target: SshTarget) => {
    const ssh = await loadSshSession();
    const key = JSON.stringify([target.user, target.host, target.port, target.family]);
    let entry = shared.get(key);
    const opened = entry === undefined;
    if (!entry) {
      const created: Shared = {
        connection: ssh.openConnection(target, config, lifetime.signal, warn),
        running: 0,
      };
      entry = created;
      shared.set(key, created);
      created.connection.then(
        ({ client }) => client.once('close', () => drop(key, created)),
        () => drop(key, created),
      );
    }
    return { key, entry, opened, connection: await entry.connection };
  };

  /**
   * Runs one command; a shared connection that has gone away is replaced once. `socket` is the
   * command's caller: its data is the command's stdin, and its closing ends the command.
   */
  const run = async (
    socket: Readable,
    invocation: SshInvocation,
    env: Record<string, string>,
    streams: MuxStreams,
  ) => {
    const ssh = await loadSshSession();
    const target = ssh.sshTarget(invocation, config);
    for (let attempt = 0; ; attempt++) {
      const { key, entry, opened, connection } = await connectionFor(target);
      if (socket.destroyed) return SSH_FAILED;
      let channel: ClientChannel;
      try {
        channel = await withinTime(
          ssh.openChannel(connection, invocation.command, env, streams.stderr),
          config.connectTimeoutMs,
          () => new ssh.SshFailure(`no answer from ${connection.where} in time`),
        );
      } catch (error) {
        drop(key, entry);
        // The server may close a connection between commands (idle limits, one command per
        // connection): what failed on a reused one gets one fresh connection.
        if (!opened && attempt === 0) continue;
        throw error;
      }
      if (socket.destroyed) {
        endChannel(channel);
        return SSH_FAILED;
      }
      entry.running++;
      clearTimeout(entry.idle);
      // git (and with it our program) went away: end its command, keep the connection.
      const onGone = () => endChannel(channel);
      socket.once('close', onGone);
      socket.pipe(streams.stdin);
      try {
        return await ssh.relay(channel, streams);
      } finally {
        socket.off('close', onGone);
        if (--entry.running === 0 && shared.get(key) === entry)
          entry.idle = setTimeout(() => drop(key, entry), idleMs).unref();
      }
    }
  };

  const serve = async (socket: Socket) => {
    const line = await readHeader(socket);
    if (line === undefined) return;
    const streams = {
      stdin: new PassThrough(),
      stdout: socketWriter(socket, (chunk) => encodeFrame(FRAME_STDOUT, chunk)),
      stderr: socketWriter(socket, (chunk) => encodeFrame(FRAME_STDERR, chunk)),
    };
    let status = SSH_FAILED;
    try {
      const request = decodeRequest(line);
      if ('problem' in request) throw new Error(request.problem);
      const invocation = parseSshArgs(request.args);
      if ('problem' in invocation)
        throw new Error(`cannot read git's arguments: ${invocation.problem}`);
      status = await run(socket, invocation, request.env, streams);
    } catch (error) {
      streams.stderr.write(failureLine(error));
    }
    // The status goes last, after everything the command wrote.
    await Promise.all([flushed(streams.stdout), flushed(streams.stderr)]);
    if (!socket.destroyed) socket.end(encodeFrame(FRAME_EXIT, Buffer.from([status & 0xff])));
  };

  // allowHalfOpen: git's EOF on stdin ends the program's half of the socket while the remote
  // command's answer is still coming back on ours.
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.once('close', () => sockets.delete(socket));
    // Whatever goes wrong with one command must not end the run: it ends that command.
    serve(socket).catch(() => socket.destroy());
  });
  if (!(await listen(server, path))) return undefined;
  // The run's own end decides when this process exits, not a socket nobody may use again.
  server.unref();
  const exec: SshMux['exec'] = async (invocation, env, input, signal, maxBytes) => {
    if (signal.aborted) throw new Error('cancelled');
    // Closed only when the caller gives up (no autoDestroy: its end is the command's EOF); its
    // closing ends the command's channel, which the server may take a while to confirm: the
    // caller does not wait for that.
    const caller = new PassThrough({ autoDestroy: false });
    const overflow = new AbortController();
    const ended = AbortSignal.any([signal, overflow.signal]);
    let onAbort!: () => void;
    const aborted = new Promise<never>((_resolve, reject) => {
      onAbort = () => {
        caller.destroy();
        reject(overflow.signal.aborted ? overflow.signal.reason : new Error('cancelled'));
      };
    });
    ended.addEventListener('abort', onAbort, { once: true });
    const chunks: Buffer[] = [];
    let size = 0;
    const collect = new Writable({
      write(chunk: Buffer, _encoding, done) {
        size += chunk.length;
        if (size <= maxBytes) chunks.push(chunk);
        else overflow.abort(new Error(`the answer is over ${maxBytes} bytes`));
        done();
      },
    });
    const discard = new Writable({ write: (_chunk, _encoding, done) => done() });
    caller.end(input);
    const running = run(caller, invocation, env, {
      stdin: new PassThrough(),
      stdout: collect,
      stderr: discard,
    });
    try {
      const status = await Promise.race([running, aborted]);
      return { status, stdout: Buffer.concat(chunks) };
    } finally {
      ended.removeEventListener('abort', onAbort);
      caller.destroy();
      // Whatever the command still does ends with its channel, or with the connection.
      running.catch(() => undefined);
      aborted.catch(() => undefined);
    }
  };
  const attach: SshMux['attach'] = async (invocation, env, socket, stderr) => {
    // git's EOF (its request sent) is the command's EOF; the answer still comes back on ours.
    socket.allowHalfOpen = true;
    socket.on('error', () => undefined);
    const stdout = socketWriter(socket, (chunk) => chunk);
    try {
      return await run(socket, invocation, env, { stdin: new PassThrough(), stdout, stderr });
    } catch (error) {
      stderr.write(failureLine(error));
      return SSH_FAILED;
    } finally {
      await flushed(stdout);
      socket.end();
    }
  };
  return {
    path,
    exec,
    attach,
    close: () => {
      lifetime.abort();
      server.close();
      for (const socket of sockets) socket.destroy();
      for (const [key, entry] of shared) drop(key, entry);
    },
    stop: () => {
      idleMs = Math.min(idleMs, SSH_STOPPED_IDLE_MS);
      for (const [key, entry] of shared) {
        if (entry.running > 0) continue;
        clearTimeout(entry.idle);
        entry.idle = setTimeout(() => drop(key, entry), idleMs).unref();
      }
    },
  };
}

/**
 * Longest Unix socket path: sun_path holds 108 bytes with the final NUL. Node 20's libuv does not
 * refuse a longer one, it cuts it (measured: a socket named by the first 107 bytes appeared in
 * a parent folder), so a long path must never reach `listen`.
 */
const MAX_SOCKET_PATH_BYTES = 107;

function listen(server: Server, path: string): Promise<boolean> {
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH_BYTES) return Promise.resolve(false);
  return new Promise((resolve) => {
    server.once('error', () => resolve(false));
    try {
      server.listen(path, () => resolve(true));
    } catch {
      resolve(false);
    }
  });
}

/** The request line; undefined if the program went away first or sent no line. */
function readHeader(socket: Socket): Promise<string | undefined> {
  return new Promise((resolve) => {
    let buffered = Buffer.alloc(0);
    const finish = (line: string | undefined) => {
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.off('close', onEnd);
      resolve(line);
    };
    const onEnd = () => finish(undefined);
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      const newline = buffered.indexOf(0x0a);
      if (newline < 0) {
        if (buffered.length > MAX_HEADER_BYTES) {
          socket.destroy();
          finish(undefined);
        }
        return;
      }
      // What follows the line is git's stdin: hand it back for the command.
      socket.pause();
      if (newline + 1 < buffered.length) socket.unshift(buffered.subarray(newline + 1));
      finish(buffered.subarray(0, newline).toString('utf8'));
    };
    socket.on('data', onData);
    socket.once('end', onEnd);
    socket.once('close', onEnd);
  });
}

/** A stream whose writes go to `socket`, each as `wrap` makes it; dropped once the socket is gone. */
function socketWriter(socket: Duplex, wrap: (chunk: Buffer) => Buffer): Writable {
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      if (socket.destroyed || socket.writableEnded) return done();
      socket.write(wrap(chunk), () => done());
    },
  });
}

/** A command's failure as git's SSH program says it: one `ssh: …` line. */
function failureLine(error: unknown): string {
  return `ssh: ${error instanceof Error ? error.message : String(error)}\n`;
}

/** Closes a command's channel; on a connection already gone there is nothing left to close. */
function endChannel(channel: ClientChannel): void {
  try {
    channel.destroy();
  } catch {
    // The connection's own 'close' ends the channel.
  }
}

function flushed(stream: Writable): Promise<void> {
  return new Promise((resolve) => stream.write('', () => resolve()));
}

function withinTime<T>(promise: Promise<T>, ms: number, failure: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(failure()), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
