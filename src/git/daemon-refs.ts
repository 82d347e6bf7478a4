// Looking at a git:// lock repository's refs without git: a put at the back of the line polls
// with a look, and `git ls-remote` starts git each time and, over protocol v0 (which git://
// speaks here: environment.ts), reads every ref the server has, patterns or not. A look here is
// still one connection to git daemon, as git's would be (git daemon serves one session per
// connection, and a session answers from refs it read once), but it asks protocol v2's ls-refs
// for the branch and the line only (session-refs.ts), sent in one write: the stall that makes
// git's v2 slow over git:// (its small writes waiting on delayed ACKs) never starts.
import { connect } from 'node:net';
import { MAX_ANSWER_BYTES, pktLine } from './ls-refs.js';
import { SessionRefs, type UploadPackSession } from './session-refs.js';

/** git daemon's port when the URI names none. */
const DEFAULT_PORT = 9418;

export interface DaemonTarget {
  host: string;
  port: number;
  /** The host as the URI gives it, port included: git daemon's `host=` (virtual hosting). */
  hostHeader: string;
  path: string;
}

/** Where a git:// URI leads; undefined for any other URI. */
export function daemonTarget(uri: string): DaemonTarget | undefined {
  const match = /^git:\/\/((\[[^\]/]+\]|[^:/[\]]+)(?::(\d+))?)(\/.*)$/i.exec(uri);
  if (!match) return undefined;
  const [, hostHeader = '', host = '', port, path = ''] = match;
  const number = port ? Number(port) : DEFAULT_PORT;
  if (!host || number < 1 || number > 65535) return undefined;
  return { host: host.replace(/^\[|\]$/g, ''), port: number, hostHeader, path };
}

/**
 * git daemon's request for `service` at `target`, as git's connect.c writes it: in protocol v0, or
 * asking for protocol v2 with `v2`.
 */
export function daemonRequest(
  service: 'git-upload-pack' | 'git-receive-pack',
  target: DaemonTarget,
  v2 = false,
): Buffer {
  return pktLine(
    `${service} ${target.path}\0host=${target.hostHeader}\0${v2 ? '\0version=2\0' : ''}`,
  );
}

/** Looks for a git:// lock repository; undefined for any other URI (git is asked). */
export function daemonRefsFor(
  settings: { uri: string; gitTimeoutMs: number },
  signal: AbortSignal,
): SessionRefs | undefined {
  const target = daemonTarget(settings.uri);
  return target ? new SessionRefs(daemonSession(target), settings, signal) : undefined;
}

/**
 * One connection to git daemon: the request for upload-pack in protocol v2 (as git's connect.c
 * writes it) and the session's input, in one write, then the end of ours; what upload-pack writes
 * until it closes.
 */
export function daemonSession(target: DaemonTarget): UploadPackSession {
  return (input, signal) =>
    new Promise((resolve, reject) => {
      if (signal.aborted) {
        reject(new Error('cancelled'));
        return;
      }
      const request = daemonRequest('git-upload-pack', target, true);
      const socket = connect({ host: target.host, port: target.port });
      socket.setNoDelay(true);
      const chunks: Buffer[] = [];
      let size = 0;
      const fail = (error: Error) => {
        signal.removeEventListener('abort', onAbort);
        socket.destroy();
        reject(error);
      };
      const onAbort = () => fail(new Error('cancelled'));
      signal.addEventListener('abort', onAbort, { once: true });
      socket.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_ANSWER_BYTES)
          fail(new Error(`the answer is over ${MAX_ANSWER_BYTES} bytes`));
        else chunks.push(chunk);
      });
      const finish = (status: number) => {
        signal.removeEventListener('abort', onAbort);
        socket.destroy();
        resolve({ status, stdout: Buffer.concat(chunks) });
      };
      socket.once('error', (error: NodeJS.ErrnoException) => {
        // An upload-pack that gives up (a sha256 repository asked in sha1, a v0 one asked in v2)
        // exits with our request unread, and its end comes as a reset: what it said before that
        // is its answer, a failed one.
        if (error.code === 'ECONNRESET' && size > 0) finish(1);
        else fail(error);
      });
      socket.once('end', () => finish(0));
      socket.end(Buffer.concat([request, input]));
    });
}
