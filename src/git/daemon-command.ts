// git's fetches and pushes to a git:// lock repository, over a connection the run opens. git and
// git daemon write each pkt-line with its own write() on sockets with Nagle's algorithm on, so an
// exchange split over small writes waits for the peer's delayed ACK, about 40 ms on Linux however
// near the server: a fetch's wants then its haves, a push's commands then its pack. Here the run
// connects with Nagle off, sends git daemon's request line itself (as git's connect.c writes it,
// protocol v0: environment.ts) and hands the socket to git as its descriptor 3, where git's `fd::`
// transport (git-remote-fd) speaks the protocol on it: git's writes then leave at once. Measured on
// 127.0.0.1 (git 2.39): a fetch of a new commit 61 ms by git's own connection, 18 ms on ours; a
// push 59 ms and 21 ms. A fetch with --depth still waits once, on git daemon's side (its shallow
// lines, then a flush): the lock repository fetches only what is new after its first fetch
// (repo/lock-repository.ts).
import { connect, type Socket } from 'node:net';
import { daemonRequest, type DaemonTarget } from './daemon-refs.js';
import { fdCommand, finished, spawnOnFd, type FdCommand, type Service } from './fd-command.js';

/** The git:// lock repository the run's commands go to over its own connections. */
export interface DaemonSockets extends DaemonTarget {
  /** The URI as the run's commands name it. */
  uri: string;
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
    const socket = await requested(daemon, service, options.signal);
    if (!socket) return undefined;
    try {
      return finished(spawnOnFd(replaced, options, socket));
    } finally {
      // git holds its own descriptor from here: closing ours neither ends nor resets the
      // connection.
      socket.destroy();
    }
  });
}

/**
 * A connection to git daemon with Nagle's algorithm off and git daemon's request for `service`
 * written on it; nothing read from it (git reads all the server says). Undefined when it fails.
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
    // Never read here: what the server sends is git's, once it has the socket.
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
    // Before git has it, a failure means git connects itself; after, the failure is git's to meet.
    socket.on('error', () => settle(undefined));
    socket.once('connect', () => {
      socket.write(daemonRequest(service, daemon), (error) => settle(error ? undefined : socket));
    });
  });
}
