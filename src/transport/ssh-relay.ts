// git's SSH program when the run shares its connections (ssh-mux.ts): hands git's command to
// the run over its Unix socket and relays the streams, so this process never loads ssh2 nor
// makes a handshake. Failures are one `ssh: …` line and status 255, as in the direct program.
import { connect } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import { encodeRequest, FRAME_EXIT, FRAME_STDERR, FrameDecoder } from './mux-frames.js';
import { forwardedEnv, parseSshArgs } from './ssh-args.js';
import { SSH_FAILED } from './ssh-config.js';

export interface RelayIo {
  /** The run's socket (SSH_MUX_ENV). */
  socketPath: string;
  args: readonly string[];
  env: Readonly<Record<string, string | undefined>>;
  stdin: Readable;
  stdout: Writable;
  stderr: Writable;
  /** Fires when git is gone: the command is dropped at once. */
  signal: AbortSignal;
}

export function relayToMux(io: RelayIo): Promise<number> {
  return new Promise((resolve) => {
    let status: number | undefined;
    let settled = false;
    const settle = (code: number) => {
      if (settled) return;
      settled = true;
      io.signal.removeEventListener('abort', onAbort);
      io.stdin.unpipe(socket);
      // What the command wrote reaches git before we go.
      io.stdout.write('', () => resolve(code));
    };
    const onAbort = () => {
      socket.destroy();
      settle(SSH_FAILED);
    };
    const socket = connect(io.socketPath);
    io.signal.addEventListener('abort', onAbort, { once: true });
    let connected = false;
    socket.once('connect', () => {
      connected = true;
      // The run reads the variables git asked to forward from the request, not from its own
      // environment; arguments it cannot read it reports itself.
      const invocation = parseSshArgs(io.args);
      const env = 'problem' in invocation ? {} : forwardedEnv(invocation, io.env);
      socket.write(encodeRequest({ args: [...io.args], env }));
      io.stdin.pipe(socket);
    });
    const decoder = new FrameDecoder();
    socket.on('data', (chunk: Buffer) => {
      let frames;
      try {
        frames = decoder.push(chunk);
      } catch {
        io.stderr.write('ssh: malformed answer from the resource\n');
        socket.destroy();
        return settle(SSH_FAILED);
      }
      for (const frame of frames) {
        if (frame.type === FRAME_EXIT) status = frame.payload.readUInt8(0);
        else if (frame.type === FRAME_STDERR) io.stderr.write(frame.payload);
        else if (!io.stdout.write(frame.payload)) {
          // git reads slower than the server answers: hold the socket until it catches up.
          socket.pause();
          io.stdout.once('drain', () => socket.resume());
        }
      }
    });
    socket.on('error', (error: NodeJS.ErrnoException) => {
      if (!connected)
        io.stderr.write(
          `ssh: cannot reach the run's SSH connections: ${error.code ?? error.message}\n`,
        );
    });
    socket.once('close', () => {
      if (status === undefined && connected && !io.signal.aborted)
        io.stderr.write("ssh: the run's SSH connection closed before the command ended\n");
      settle(status ?? SSH_FAILED);
    });
  });
}
