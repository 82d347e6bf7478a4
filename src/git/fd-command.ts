// git commands that speak to the lock repository over a connection the run made: git gets one end
// of a socket pair as its descriptor 3 and `fd::3` in place of the URI, and git's `fd::` transport
// (git-remote-fd) speaks the protocol on it. The run relays the other end: over git:// to a socket
// with Nagle's algorithm off (daemon-command.ts), over SSH to a channel of its shared connection
// (ssh-channel-command.ts), and on a put's kept session to the session (daemon-session.ts).
import { spawn } from 'node:child_process';
import type { KnownRef } from '../transport/kept-advertisements.js';
import type { PackedObject } from './pack-objects.js';

/** Where git finds the connection: its descriptor 3, as git-remote-fd names it. */
export const SOCKET_REMOTE = 'fd::3';

/** The service on the server each git command that can go over such a connection asks for. */
export type Service = 'git-upload-pack' | 'git-receive-pack';

const SERVICES: Record<string, Service> = {
  clone: 'git-upload-pack',
  fetch: 'git-upload-pack',
  push: 'git-receive-pack',
};

export interface CommandResult {
  /** null when git ended on a signal: `signal`. */
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  stderr: Buffer;
}

/** A command of git's that goes over a connection of the run's. */
export interface FdCommand {
  /** The URI the command named, which git's words name again in place of SOCKET_REMOTE. */
  uri: string;
  /** The command's arguments with the URI replaced by SOCKET_REMOTE. */
  args: string[];
  /**
   * Runs it; undefined, having started nothing, where the connection cannot be made (git then
   * connects itself and says why in its own words). Stopping git is the caller's, by signalling it.
   */
  run(options: FdRunOptions): Promise<CommandResult | undefined>;
}

export interface FdRunOptions {
  env: Record<string, string>;
  cwd: string;
  signal: AbortSignal;
  /** For a push: the refs it goes to as the run knows them on the server, the branch first. */
  pushesTo?: readonly KnownRef[];
  /**
   * For a push: every object it sends that the server may lack (none for refs moved to commits
   * it has), where the run knows them; over git:// the run then makes the push itself
   * (own-push.ts).
   */
  sends?: readonly PackedObject[];
}

/**
 * A clone, fetch or push that names `uri` once, as a command over a connection of the run's:
 * `run` gets its arguments with `uri` replaced by SOCKET_REMOTE and the service it asks the
 * server for. Undefined for any other command (a remote named `origin`, ls-remote, a local one).
 */
export function fdCommand(
  uri: string,
  args: readonly string[],
  run: (
    command: { args: string[]; service: Service },
    options: FdRunOptions,
  ) => Promise<CommandResult | undefined>,
): FdCommand | undefined {
  const service = SERVICES[args[0] ?? ''];
  const at = args.indexOf(uri);
  if (!service || at < 0 || args.indexOf(uri, at + 1) >= 0) return undefined;
  const command = { args: args.map((arg, index) => (index === at ? SOCKET_REMOTE : arg)), service };
  return { uri, args: command.args, run: (options) => run(command, options) };
}

/** Starts git with one end of a socket pair as its descriptor 3; the other is `child.stdio[3]`. */
export function spawnOnFd(
  args: readonly string[],
  options: FdRunOptions,
): ReturnType<typeof spawn> {
  // The `fd::` transport for this command alone: no URI a request gives may name it.
  const allowed = `${options.env.GIT_ALLOW_PROTOCOL ?? 'git'}:fd`;
  return spawn('git', args, {
    cwd: options.cwd,
    env: { ...options.env, GIT_ALLOW_PROTOCOL: allowed },
    stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
  });
}

/**
 * git's output and how it ended; its stderr after the lines `before` gives once git has ended
 * (what the remote command said, where the run relays it).
 */
export async function finished(
  child: ReturnType<typeof spawn>,
  before?: (exitCode: number | null) => Promise<Buffer>,
): Promise<CommandResult> {
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  child.stdout?.on('data', (chunk: Buffer) => stdout.push(chunk));
  child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk));
  const [exitCode, signal] = await new Promise<[number | null, NodeJS.Signals | null]>(
    (resolve, reject) => {
      child.once('error', reject);
      child.once('close', (code, signal) => resolve([code, signal]));
    },
  );
  const first = before ? [await before(exitCode)] : [];
  return {
    exitCode,
    signal,
    stdout: Buffer.concat(stdout),
    stderr: Buffer.concat([...first, ...stderr]),
  };
}
