// git's fetches and pushes to a git:// lock repository, over a connection the run opens. git and
// git daemon write each pkt-line with its own write() on sockets with Nagle's algorithm on, so an
// exchange split over small writes waits for the peer's delayed ACK, about 40 ms on Linux however
// near the server: a fetch's wants then its haves, a push's commands then its pack. Here the run
// connects with Nagle off, sends git daemon's request line itself (as git's connect.c writes it,
// protocol v0: environment.ts) and relays the connection to git's descriptor 3, one end of a socket
// pair, where git's `fd::` transport (git-remote-fd) speaks the protocol: git's writes then leave
// at once. Measured on 127.0.0.1 (git 2.39): a fetch of a new commit 61 ms by git's own connection,
// 18 ms on ours; a push 59 ms and 21 ms. A fetch with --depth still waits once, on git daemon's
// side (its shallow lines, then a flush): the lock repository fetches only what is new after its
// first fetch (repo/lock-repository.ts).
//
// The run relays rather than handing git the socket itself because of how git-remote-fd ends: a
// connection the server resets (git daemon drops a new connection so, unread, once it serves
// `--max-connections`) fails its read with an error, after which it waits for ever on git's
// side of the pipe while git waits on it (git 2.39), until git_timeout. The relay ends git's
// side with a plain end of file instead, and git fails at once in its own words.
import { connect, type Socket } from 'node:net';
import { daemonRequest, type DaemonTarget } from './daemon-refs.js';
import type { DaemonPushes } from './daemon-push.js';
import type { Duplex } from 'node:stream';
import {
  fdCommand,
  finished,
  spawnOnFd,
  type CommandResult,
  type FdCommand,
  type FdRunOptions,
  type Service,
} from './fd-command.js';

/** The git:// lock repository the run's commands go to over its own connections. */
export interface DaemonSockets extends DaemonTarget {
  /** The URI as the run's commands name it. */
  uri: string;
  /** The run's pushes that read the advertisement first (daemon-push.ts). */
  pushes: DaemonPushes;
}

/**
 * `args` as a command over a socket of the run's; undefined for a command that does not name the
 * URI (a remote named `origin`, a local command) and for ls-remote, which over protocol v0 sends
 * nothing after the server's refs and so waits on no delayed ACK (5 ms on 127.0.0.1).
 */
export function daemonCommand(
  daemon: DaemonSockets,
  args: readonly string[],
): FdCommand | undefined {
  return fdCommand(daemon.uri, args, async ({ args: replaced, service }, options) => {
    const connect = () => requested(daemon, service, options.signal);
    const branch = options.pushesTo?.[0];
    if (service === 'git-receive-pack')
      return branch
        ? daemon.pushes.run(replaced, options, branch, connect)
        : daemon.pushes.runOther(replaced, options, connect);
    const socket = await connect();
    return socket && relayed(replaced, options, socket);
  });
}

/**
 * git's command on a socket pair the run relays to `socket`, `read` (what the run has read from it
 * already) first.
 */
export function relayed(
  args: readonly string[],
  options: FdRunOptions,
  socket: Socket,
  read: Buffer = Buffer.alloc(0),
): Promise<CommandResult> {
  const child = spawnOnFd(args, options);
  const connection = child.stdio[3] as Duplex | null;
  if (connection) {
    // git ends its half once it has sent all it sends (git-remote-fd shuts its socket's writing
    // down), and then reads the server's answer on the other.
    (connection as { allowHalfOpen: boolean }).allowHalfOpen = true;
    if (read.length > 0) connection.write(read);
    socket.pipe(connection);
    connection.pipe(socket);
    // A connection reset or failed: git reads the end of it, never an error (see above).
    socket.on('error', () => connection.end());
    connection.on('error', () => socket.destroy());
  }
  // git gone, nothing is left to relay (and Node's 'close' for git waits on our end of the pair).
  const gone = () => {
    socket.destroy();
    connection?.destroy();
  };
  child.once('exit', gone);
  child.once('error', gone);
  return finished(child);
}

/**
 * A connection to git daemon with Nagle's algorithm off and git daemon's request for `service`
 * written on it; nothing read from it yet. Undefined when it fails.
 */
function requested(
  daemon: DaemonTarget,
  service: Service,
  signal: AbortSignal,
): Promise<Socket | undefined> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve(undefined);
      return;
    }
    const socket = connect({ host: daemon.host, port: daemon.port, noDelay: true });
    // Not read here: what the server sends is git's, or the push's (daemon-push.ts).
    socket.pause();
    let settled = false;
    const settle = (value: Socket | undefined) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      if (!value) socket.destroy();
      resolve(value);
    };
    const onAbort = () => settle(undefined);
    signal.addEventListener('abort', onAbort, { once: true });
    // Before git runs on it, a failure means git connects itself; after, git meets it.
    socket.on('error', () => settle(undefined));
    socket.once('connect', () => {
      socket.write(daemonRequest(service, daemon), (error) => settle(error ? undefined : socket));
    });
  });
}
