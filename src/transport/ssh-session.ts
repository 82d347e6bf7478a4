// The SSH transport git runs for ssh:// and scp-like URIs: connects with ssh2 (directly or
// through the CONNECT proxy), authenticates with the configured key or the caller's agent,
// checks the host key against known_hosts when given, runs git's remote command and relays its
// streams. Every failure is one `ssh: …` line on stderr and exit status 255, as OpenSSH does.
import { connect as tcpConnect, type Socket } from 'node:net';
import { userInfo } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import {
  Client,
  type ClientChannel,
  type ConnectConfig,
  type ExecOptions,
  type ServerHostKeyAlgorithm,
} from 'ssh2';
import { openTunnel, TunnelError } from './proxy-tunnel.js';
import { KeyAgent } from './key-agent.js';
import {
  blobType,
  hostName,
  parseKnownHosts,
  pinnedKeyTypes,
  verifyHostKey,
  type KnownHostEntry,
} from './known-hosts.js';
import { forwardedEnv, parseSshArgs, type SshInvocation } from './ssh-args.js';
import { SSH_FAILED, type SshTransportConfig } from './ssh-config.js';
import { fingerprint, readPrivateKey } from './ssh-key.js';

export interface SshStreams {
  stdin: Readable;
  stdout: Writable;
  stderr: Writable;
}

export interface SshIo extends SshStreams {
  args: readonly string[];
  env: Readonly<Record<string, string | undefined>>;
  config: SshTransportConfig;
  /** Fires when git is gone (our parent died): the connection is dropped at once. */
  signal: AbortSignal;
}

/** Where git's command runs: the server, and who we log in as there. */
export interface SshTarget {
  host: string;
  port: number;
  family?: 4 | 6;
  user: string;
}

/** An authenticated connection, ready to run commands. */
export interface SshConnection {
  client: Client;
  /** `[host]:port` as known_hosts and our messages name it. */
  where: string;
  /** Whether commands ask the server to forward our agent (forward_agent with an agent to serve). */
  forwardAgent: boolean;
}

const KEEPALIVE_MS = 15_000;
const KEEPALIVE_COUNT = 4;

export class SshFailure extends Error {
  override name = 'SshFailure';
}

/** Runs git's SSH command on a connection of its own: one `ssh: …` line and 255 on failure. */
export async function runSsh(io: SshIo): Promise<number> {
  try {
    const invocation = parseSshArgs(io.args);
    if ('problem' in invocation)
      throw new SshFailure(`cannot read git's arguments: ${invocation.problem}`);
    const connection = await openConnection(
      sshTarget(invocation, io.config),
      io.config,
      io.signal,
      (line) => io.stderr.write(`${line}\n`),
    );
    io.signal.addEventListener('abort', () => connection.client.destroy(), { once: true });
    try {
      return await runCommand(connection, invocation.command, forwardedEnv(invocation, io.env), io);
    } finally {
      connection.client.end();
    }
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    io.stderr.write(`ssh: ${message}\n`);
    return SSH_FAILED;
  }
}

/** The user is the URI's, else `private_key_user`, else ours, as OpenSSH would pick. */
export function sshTarget(invocation: SshInvocation, config: SshTransportConfig): SshTarget {
  const { host, port, family } = invocation;
  const user = invocation.user ?? config.user ?? userInfo().username;
  return { host, port, user, ...(family ? { family } : {}) };
}

/**
 * Connects (directly or through the CONNECT proxy), checks the host key and authenticates, all
 * within `config.connectTimeoutMs`; `signal` gives up at once. Failures are SshFailure, one line.
 * `warn` gets the one line saying a host key was accepted unchecked (no known_hosts).
 */
export async function openConnection(
  target: SshTarget,
  config: SshTransportConfig,
  signal: AbortSignal,
  warn: (line: string) => void,
): Promise<SshConnection> {
  const { host, port, user } = target;
  const where = hostName(host, port);

  let key;
  if (config.privateKey !== undefined) {
    const read = readPrivateKey(config.privateKey, config.passphrase);
    if ('problem' in read) throw new SshFailure(read.problem);
    key = read;
  }
  let pins: KnownHostEntry[] | undefined;
  if (config.knownHosts !== undefined) {
    const parsed = parseKnownHosts(config.knownHosts);
    if ('problem' in parsed) throw new SshFailure(`known_hosts: ${parsed.problem}`);
    pins = parsed.entries;
  }

  const deadline = AbortSignal.any([signal, AbortSignal.timeout(config.connectTimeoutMs)]);
  const started = Date.now();
  let sock: Socket;
  try {
    sock = config.tunnel
      ? await openTunnel(config.tunnel, host, port, deadline)
      : await connectTcp(target, deadline);
  } catch (error) {
    if (error instanceof TunnelError) throw new SshFailure(error.message);
    throw error;
  }
  // git's protocol is small request/answer exchanges: with Nagle's algorithm on, each one split
  // over several SSH packets waits for the server's delayed ACK (about 40 ms), as OpenSSH avoids.
  sock.setNoDelay(true);

  // With a key, the forwarded agent is one we serve from it; without one, the caller's agent
  // (SSH_AUTH_SOCK) authenticates and is what gets forwarded, as OpenSSH would do.
  const agent = key
    ? config.forwardAgent
      ? new KeyAgent(key.key)
      : undefined
    : config.agentSocket;
  const authWith = key
    ? 'private_key'
    : agent
      ? 'the ssh agent at SSH_AUTH_SOCK'
      : 'no private_key configured';

  let hostKeyProblem: string | undefined;
  const client = new Client();
  // ssh2 may report more than one error for one failure (a timeout, then the lost connection);
  // the handshake below takes the first, and 'close' tells everyone else.
  client.on('error', () => undefined);
  const connectConfig: ConnectConfig = {
    sock,
    username: user,
    readyTimeout: Math.max(1, config.connectTimeoutMs - (Date.now() - started)),
    keepaliveInterval: KEEPALIVE_MS,
    keepaliveCountMax: KEEPALIVE_COUNT,
    ...(key ? { privateKey: key.text, passphrase: config.passphrase } : {}),
    ...(agent ? { agent } : {}),
    hostVerifier: (blob: Buffer) => {
      if (!pins) {
        warn(
          `warning: accepted the host key of ${where} unchecked (${blobType(blob) ?? 'key'} ${fingerprint(blob)}): set known_hosts to pin it`,
        );
        return true;
      }
      const verdict = verifyHostKey(pins, host, port, blob);
      if (verdict.ok) return true;
      const offered = `${blobType(blob) ?? 'key'} ${fingerprint(blob)}`;
      hostKeyProblem =
        verdict.reason === 'not-listed'
          ? `host key of ${where} not checked: known_hosts has no line for ${where} (server offered ${offered})`
          : verdict.reason === 'revoked'
            ? `host key of ${where} is marked @revoked in known_hosts (${offered})`
            : `host key of ${where} does not match known_hosts (server offered ${offered})`;
      return false;
    },
  };
  if (pins) {
    // Ask for a key type that is pinned first, as OpenSSH does, so a server with several host
    // keys presents the one known_hosts names.
    const preferred = pinnedKeyTypes(pins, host, port).flatMap(hostKeyAlgorithms);
    // ssh2 applies these in key order: take them out of the default list, then put them first.
    if (preferred.length > 0)
      connectConfig.algorithms = {
        serverHostKey: { remove: preferred, prepend: preferred, append: [] },
      };
  }

  const ready = new Promise<void>((resolve, reject) => {
    client.once('ready', resolve);
    client.once('error', (error: Error & { level?: string }) => {
      if (hostKeyProblem) return reject(new SshFailure(hostKeyProblem));
      if (error.level === 'client-authentication')
        return reject(new SshFailure(`authentication failed for ${user}@${where} (${authWith})`));
      if (error.level === 'client-timeout')
        return reject(new SshFailure(`no SSH handshake with ${where} in time`));
      reject(new SshFailure(`connection to ${where} failed: ${error.message}`));
    });
    client.once('close', () => reject(new SshFailure(`connection to ${where} closed`)));
  });
  let onAbort = () => {};
  const timedOut = new Promise<never>((_resolve, reject) => {
    onAbort = () => {
      client.destroy();
      const seconds = Math.round(config.connectTimeoutMs / 1000);
      reject(new SshFailure(`no SSH handshake with ${where} within ${seconds}s`));
    };
  });
  deadline.addEventListener('abort', onAbort, { once: true });
  try {
    client.connect(connectConfig);
    await Promise.race([ready, timedOut]);
  } catch (error) {
    client.destroy();
    if (signal.aborted) throw new SshFailure('stopped');
    throw error;
  } finally {
    deadline.removeEventListener('abort', onAbort);
  }
  return { client, where, forwardAgent: config.forwardAgent && agent !== undefined };
}

/** Runs `command` on the connection and relays its streams until it ends: its exit status. */
export async function runCommand(
  connection: SshConnection,
  command: string,
  env: Record<string, string>,
  streams: SshStreams,
): Promise<number> {
  const channel = await openChannel(connection, command, env, streams.stderr);
  return relay(channel, streams);
}

/** Starts `command`, with the agent forwarded when configured and the server allows it. */
export function openChannel(
  connection: SshConnection,
  command: string,
  env: Record<string, string>,
  stderr: Writable,
): Promise<ClientChannel> {
  const { client, where, forwardAgent } = connection;
  return exec(client, command, env, forwardAgent).catch((error: unknown) => {
    // Servers may refuse agent forwarding (OpenSSH's AllowAgentForwarding no); like OpenSSH,
    // carry on without it rather than fail the git command.
    if (!forwardAgent) throw error;
    stderr.write(`ssh: ${where} refused agent forwarding; continuing without it\n`);
    return exec(client, command, env, false);
  });
}

const HOST_KEY_ALGORITHMS: Record<string, ServerHostKeyAlgorithm[]> = {
  'ssh-ed25519': ['ssh-ed25519'],
  'ecdsa-sha2-nistp256': ['ecdsa-sha2-nistp256'],
  'ecdsa-sha2-nistp384': ['ecdsa-sha2-nistp384'],
  'ecdsa-sha2-nistp521': ['ecdsa-sha2-nistp521'],
  'ssh-rsa': ['rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa'],
};

function hostKeyAlgorithms(keyType: string): ServerHostKeyAlgorithm[] {
  return HOST_KEY_ALGORITHMS[keyType] ?? [];
}

function connectTcp(target: SshTarget, signal: AbortSignal): Promise<Socket> {
  const where = hostName(target.host, target.port);
  return new Promise((resolve, reject) => {
    const socket = tcpConnect({
      host: target.host,
      port: target.port,
      ...(target.family ? { family: target.family } : {}),
    });
    const onAbort = () => {
      socket.destroy();
      reject(new SshFailure(`cannot connect to ${where}: no answer in time`));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    socket.once('connect', () => {
      signal.removeEventListener('abort', onAbort);
      resolve(socket);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => {
      signal.removeEventListener('abort', onAbort);
      reject(new SshFailure(`cannot connect to ${where}: ${error.code ?? error.message}`));
    });
  });
}

function exec(
  client: Client,
  command: string,
  env: Record<string, string>,
  agentForward: boolean,
): Promise<ClientChannel> {
  // ssh2 reads `agentForward` from the exec options; its typings do not list it.
  const options: ExecOptions & { agentForward?: boolean } = { env, agentForward };
  return new Promise((resolve, reject) => {
    client.exec(command, options, (error, channel) => (error ? reject(error) : resolve(channel)));
  });
}

/** Relays git's stdin to the remote command and its output back, until the channel closes. */
export function relay(channel: ClientChannel, io: SshStreams): Promise<number> {
  return new Promise((resolve) => {
    let status = SSH_FAILED;
    // A channel's errors end it ('close' follows), and with it this command.
    channel.on('error', () => undefined);
    channel.on('exit', (code: number | null) => {
      if (typeof code === 'number') status = code;
    });
    // git closing its end (it has sent everything) becomes EOF on the channel; the remote
    // command finishes its answer and the channel closes.
    io.stdin.pipe(channel);
    // Our stdout stays open (process.stdout cannot be ended); the caller exits once it drained.
    channel.pipe(io.stdout, { end: false });
    channel.stderr.pipe(io.stderr, { end: false });
    channel.on('close', () => {
      io.stdin.unpipe(channel);
      io.stdout.write('', () => resolve(status));
    });
    io.stdout.on('error', () => resolve(SSH_FAILED));
  });
}
