// Builds the one environment every git child gets: a private HOME, no system or user config,
// no prompts, our committer identity and the user's git_config. Credentials and transports
// (SSH, HTTPS) add their variables here, so nothing else decides what git sees.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  SSH_CONFIG_ENV,
  SSH_MUX_ENV,
  type HttpsTunnel,
  type SshTransportConfig,
} from '../transport/ssh-config.js';
import { startHttpRelay, type HttpRelay } from '../transport/http-relay.js';
import { isSshUri, rewritesUrls } from '../transport/ssh-args.js';
import { startSshMux, type SshMux } from '../transport/ssh-mux.js';
import type { DaemonSockets } from './daemon-command.js';
import { DaemonPushes } from './daemon-push.js';
import { sshChannels, type SshChannels } from './ssh-channel-command.js';
import { daemonTarget } from './daemon-refs.js';
import { sshCommand } from './ssh-command.js';

/** What git's environment is made from: the request's source (protocol/request.ts) fits it. */
export interface GitSettings {
  uri: string;
  privateKey?: string;
  privateKeyPassphrase?: string;
  privateKeyUser?: string;
  forwardAgent: boolean;
  username?: string;
  password?: string;
  gitConfig: readonly { name: string; value: string }[];
  httpsTunnel?: HttpsTunnel;
  skipSslVerification: boolean;
  knownHosts?: string;
  gitTimeoutMs: number;
}

export interface GitEnvironment {
  /** Private folder (HOME of every git child), removed by `dispose`. */
  readonly home: string;
  readonly env: Record<string, string>;
  /** simple-git's unsafe switches, enabled only for variables this module sets itself. */
  readonly unsafe: Record<string, boolean>;
  /**
   * The author and committer git will write (`Name <email>`), when no git_config entry can change
   * them: then nobody needs to ask git (`git var`). Undefined when the request sets identity keys.
   */
  readonly identity?: GitIdentity;
  /**
   * HTTP(S): the relay that gives the run one connection to the server, while `usable` (git/git.ts
   * adds its settings to each command that reaches the server); undefined where git connects on
   * its own.
   */
  readonly relay?: HttpRelay;
  /** SSH: the run's shared connections (git's SSH program relays through them); undefined where it could not listen. */
  readonly mux?: SshMux;
  /**
   * git://: where git's fetches and pushes go over connections the run opens, with Nagle's
   * algorithm off (git/daemon-command.ts); undefined for any other URI, and where a
   * url.<base>.insteadOf may send git elsewhere.
   */
  readonly daemon?: DaemonSockets;
  /**
   * SSH: where git's clones, fetches and pushes run on channels of the run's shared connection,
   * without git's SSH program (git/ssh-channel-command.ts); undefined where the run shares no
   * connection and where git_config may send git elsewhere or asks a protocol we do not know.
   */
  readonly ssh?: SshChannels;
  dispose(): Promise<void>;
}

export interface GitIdentity {
  author: string;
  committer: string;
}

/** Longest wait for an SSH connection (TCP, proxy, handshake, authentication). */
const SSH_CONNECT_TIMEOUT_MS = 30_000;

/**
 * git's credential helper for HTTP(S) basic auth: it answers from this request's environment, on
 * stdout. Not an askpass program: git names the user in its password prompt, the askpass
 * program's argv, and a token often stands in for the user name. git appends the operation
 * (`get`, `store`, `erase`) and runs it through `sh -c`; only `get` answers.
 */
const CREDENTIAL_HELPER =
  '!f() { test "$1" = get || return 0; ' +
  'printf \'username=%s\\npassword=%s\\n\' "$POOL_RESOURCE_GIT_USERNAME" "$POOL_RESOURCE_GIT_PASSWORD"; }; f';

/**
 * The transports git may use: a url.<base>.insteadOf in git_config may rewrite the URI, and
 * must never reach `ext::` (which runs a program) or any other remote helper.
 */
const ALLOWED_PROTOCOLS = 'file:git:ssh:http:https';

/**
 * Settings that come after the user's git_config, so no entry can turn them back: nothing the
 * request names is run (signing programs, hooks, fsmonitor), no cookie file is written and no gc
 * starts on its own.
 */
const SAFETY_CONFIG: [string, string][] = [
  ['commit.gpgSign', 'false'],
  ['tag.gpgSign', 'false'],
  ['push.gpgSign', 'false'],
  ['core.hooksPath', '/dev/null'],
  ['core.fsmonitor', 'false'],
  ['http.cookieFile', ''],
  ['http.saveCookies', 'false'],
  // A gc git starts on its own detaches from the run and would outlive it.
  ['gc.auto', '0'],
  ['gc.autoDetach', 'false'],
  // git 2.39's fetch starts `git maintenance run --auto` after every fetch, a process that then
  // finds nothing to do (gc.auto above): this spares it.
  ['maintenance.auto', 'false'],
];

/**
 * The git wire protocol for a URI. Over git://, git 2.39 and git daemon write each pkt-line with
 * its own write() on a socket with Nagle's algorithm on, so an exchange split over small writes
 * waits for the peer's delayed ACK (about 40 ms on Linux). Protocol v2 adds such an exchange to
 * every connection (ls-refs before fetch), v0 does not: measured on 127.0.0.1, ls-remote takes
 * 51 ms in v2 and 5 ms in v0, a depth-1 fetch 100 ms and 58 ms. v0 lists every ref of the
 * repository, which lock repositories keep few of, and serves all we ask (branch tips, --depth,
 * --deepen, --unshallow). SSH (our transport sets TCP_NODELAY), HTTP(S) (curl does) and local
 * paths (pipes) keep v2, where both versions measure the same.
 */
export function wireProtocolVersion(uri: string): '0' | '2' {
  return /^git:\/\//i.test(uri) ? '0' : '2';
}

/** The protocol.version git runs with (the user's git_config wins); undefined for one git would refuse. */
function askedProtocol(source: GitSettings): '0' | '1' | '2' | undefined {
  const asked = source.gitConfig.findLast(
    (entry) => entry.name.toLowerCase() === 'protocol.version',
  );
  const version = asked ? asked.value.trim() : wireProtocolVersion(source.uri);
  return version === '0' || version === '1' || version === '2' ? version : undefined;
}

export const DEFAULT_COMMITTER = { name: 'CI Pool Resource', email: 'ci-pool@localhost' };

/**
 * The config sections git reads the author and committer from (user.name, author.email,
 * user.useConfigOnly…). Git's own environment variables for them never reach git (see `fill`), and
 * git_config cannot include other files (protocol/git-config-keys.ts).
 */
const IDENTITY_SECTIONS = new Set(['user', 'author', 'committer']);

/** Who git writes as with our defaults, or undefined when git_config may change it. */
function knownIdentity(gitConfig: GitSettings['gitConfig']): GitIdentity | undefined {
  const changed = gitConfig.some(({ name }) =>
    IDENTITY_SECTIONS.has(name.slice(0, name.indexOf('.')).toLowerCase()),
  );
  if (changed) return undefined;
  const ident = `${DEFAULT_COMMITTER.name} <${DEFAULT_COMMITTER.email}>`;
  return { author: ident, committer: ident };
}

/** Variables passed through from our own environment: where to find programs and temp space, proxies. */
const PASS_THROUGH = [
  'PATH',
  'TMPDIR',
  'http_proxy',
  'https_proxy',
  'no_proxy',
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'NO_PROXY',
];

/**
 * `signal`: the run's cancellation; its abort lets the run's SSH connections close (see below).
 * `warn`: where the run's SSH connections say a host key was accepted unchecked (the log).
 */
export async function createGitEnvironment(
  source: GitSettings,
  parentEnv: NodeJS.ProcessEnv,
  signal?: AbortSignal,
  warn?: (line: string) => void,
): Promise<GitEnvironment> {
  const home = await mkdtemp(join(parentEnv.TMPDIR || tmpdir(), 'pool-resource-'));
  try {
    return await fill(home, source, parentEnv, signal, warn);
  } catch (error) {
    // Nobody will dispose of a folder whose environment was never handed out.
    await rm(home, { recursive: true, force: true });
    throw error;
  }
}

async function fill(
  home: string,
  source: GitSettings,
  parentEnv: NodeJS.ProcessEnv,
  signal: AbortSignal | undefined,
  warn: ((line: string) => void) | undefined,
): Promise<GitEnvironment> {
  const env: Record<string, string> = {};
  for (const key of PASS_THROUGH) {
    const value = parentEnv[key];
    if (value !== undefined) env[key] = value;
  }
  env.PATH ??= '/usr/local/bin:/usr/bin:/bin';
  Object.assign(env, {
    HOME: home,
    XDG_CONFIG_HOME: join(home, '.config'),
    LANG: 'C',
    LC_ALL: 'C',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    // Pool and lock names are literal paths, never globs or pathspec magic.
    GIT_LITERAL_PATHSPECS: '1',
  });
  const config: [string, string][] = [
    ['user.name', DEFAULT_COMMITTER.name],
    ['user.email', DEFAULT_COMMITTER.email],
    ['advice.detachedHead', 'false'],
    ['init.defaultBranch', 'main'],
    ['protocol.version', wireProtocolVersion(source.uri)],
  ];
  if (source.skipSslVerification) config.push(['http.sslVerify', 'false']);
  // The user's entries come after our defaults, so their identity or settings win over them,
  // and before our safety settings, which nothing may turn back.
  for (const entry of source.gitConfig) config.push([entry.name, entry.value]);
  config.push(...SAFETY_CONFIG);
  env.GIT_ALLOW_PROTOCOL = ALLOWED_PROTOCOLS;
  const unsafe: Record<string, boolean> = {
    // GIT_CONFIG_COUNT carries our settings and the user's git_config without a shell or a
    // config file; simple-git refuses it unless asked, since it can name program-running keys
    // (git-config-keys.ts lets through only the keys it lists).
    allowUnsafeConfigEnvCount: true,
    // Ours, in SAFETY_CONFIG: hooks and fsmonitor turned off.
    allowUnsafeHooksPath: true,
    allowUnsafeFsMonitor: true,
    // url.<base>.insteadOf, allowed in git_config: GIT_ALLOW_PROTOCOL bounds where it leads.
    allowUnsafeUrlRewrite: true,
    // GIT_SSH_COMMAND below is ours: the SSH transport program shipped with the resource.
    allowUnsafeSshCommand: true,
  };

  // SSH: git runs our ssh2-based program, never with a secret in argv. It hands each command to
  // this process, which holds the settings (key included) in memory; only where that cannot be
  // set up do the settings go in git's environment (never a file). git runs GIT_SSH_COMMAND
  // through a shell, so both paths are single-quoted. The variant makes git pass `-p PORT` and
  // `-o SendEnv=GIT_PROTOCOL`.
  const sshConfig: SshTransportConfig = {
    privateKey: source.privateKey,
    passphrase: source.privateKeyPassphrase,
    user: source.privateKeyUser,
    forwardAgent: source.forwardAgent,
    agentSocket: parentEnv.SSH_AUTH_SOCK || undefined,
    knownHosts: source.knownHosts,
    tunnel: source.httpsTunnel,
    // Half of git_timeout at most, so a silent server is reported as such, not as a git timeout.
    connectTimeoutMs: Math.min(SSH_CONNECT_TIMEOUT_MS, Math.ceil(source.gitTimeoutMs / 2)),
  };
  env.GIT_SSH_COMMAND = sshCommand().map(shellQuote).join(' ');
  env.GIT_SSH_VARIANT = 'ssh';

  // HTTP(S) basic auth (from username/password or the URI's userinfo, see request.ts) through
  // our credential helper, answered from the environment: never in argv nor in a file.
  if (source.username !== undefined || source.password !== undefined) {
    config.push(['credential.helper', CREDENTIAL_HELPER]);
    env.POOL_RESOURCE_GIT_USERNAME = source.username ?? '';
    env.POOL_RESOURCE_GIT_PASSWORD = source.password ?? '';
    // The helper is ours (above); simple-git refuses credential.helper otherwise.
    unsafe.allowUnsafeCredentialHelper = true;
  }

  env.GIT_CONFIG_COUNT = String(config.length);
  config.forEach(([key, value], index) => {
    env[`GIT_CONFIG_KEY_${index}`] = key;
    env[`GIT_CONFIG_VALUE_${index}`] = value;
  });
  // The variables git gets (a proxy among them), so the relay goes where git would.
  const relay = await startHttpRelay(source, env);
  // The run shares one connection per server among its git commands (ssh-mux.ts); where it
  // cannot listen, the program connects on its own from the settings in its environment. Only
  // where git may go over SSH: an SSH uri, or a url.<base>.insteadOf that may lead there. Last,
  // so that nothing after it can fail and leave it listening.
  const mayUseSsh = isSshUri(source.uri) || rewritesUrls(source.gitConfig);
  const mux = mayUseSsh
    ? await startSshMux(join(home, 'ssh.sock'), sshConfig, { warn }).catch((error: unknown) => {
        relay?.close();
        throw error;
      })
    : undefined;
  if (mux) {
    env[SSH_MUX_ENV] = mux.path;
    // A stop closes each connection a second after its last command (ssh-mux.ts), not at once:
    // a claim's push under its grace (base/stop-budget.ts, PUSH_GRACE_MS) must not lose its connection,
    // or whether the claim landed is unknown, and the put leaving the waiting line may still use
    // one. A claim to release gets an environment of its own.
    signal?.addEventListener('abort', () => mux.stop(), { once: true });
  } else if (mayUseSsh) {
    env[SSH_CONFIG_ENV] = JSON.stringify(sshConfig);
  }
  const identity = knownIdentity(source.gitConfig);
  // The run's own connections go where the URI says: a url.<base>.insteadOf leaves them to git.
  const direct = !rewritesUrls(source.gitConfig);
  const target = direct ? daemonTarget(source.uri) : undefined;
  const daemon: DaemonSockets | undefined = target && {
    ...target,
    uri: source.uri,
    pushes: new DaemonPushes(),
  };
  const protocolVersion = askedProtocol(source);
  const ssh: SshChannels | undefined =
    direct && mux && protocolVersion ? sshChannels(source.uri, mux, protocolVersion) : undefined;
  return {
    home,
    env,
    unsafe,
    ...(identity ? { identity } : {}),
    ...(relay ? { relay } : {}),
    ...(mux ? { mux } : {}),
    ...(daemon ? { daemon } : {}),
    ...(ssh ? { ssh } : {}),
    dispose: () => {
      mux?.close();
      relay?.close();
      daemon?.pushes.close();
      return rm(home, { recursive: true, force: true });
    },
  };
}

function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}
