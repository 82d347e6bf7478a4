// Runs one git command through simple-git with the request's environment, the run's cancellation
// signal and a per-command time limit. Every git invocation of the resource goes through here.
import { setTimeout as sleep } from 'node:timers/promises';
import { GitPluginError, simpleGit, type SimpleGit, type SimpleGitOptions } from 'simple-git';
import {
  AccessError,
  CancelledError,
  ConfigurationError,
  GitCommandError,
  GitTimeoutError,
} from '../base/errors.js';
import { GIT_KILL_GRACE_MS } from '../base/stop-budget.js';
import { accessFailure } from './access-failure.js';
import { daemonCommand } from './daemon-command.js';
import { keptSessionCommand, type KeptSession } from './daemon-session.js';
import { SOCKET_REMOTE, type FdCommand, type FdRunOptions } from './fd-command.js';
import { sshChannelCommand } from './ssh-channel-command.js';
import { GIT_STOP_SIGNAL, processesWithHome, signalProcessesWithHome } from './child-processes.js';
import type { GitEnvironment, GitIdentity } from './environment.js';
import type { HttpRelay } from '../transport/http-relay.js';
import type { KnownRef } from '../transport/kept-advertisements.js';
import type { SshMux } from '../transport/ssh-mux.js';

export interface GitRunOptions {
  /** Working directory; defaults to the environment's private folder. */
  cwd?: string;
  /** Overrides the run's signal (the compensating release runs after the run was cancelled). */
  signal?: AbortSignal;
  /** Bytes written to the command's standard input (git fast-import streams). */
  input?: Buffer;
  /**
   * Settings for this command alone, after every other (ours and the request's git_config). In
   * the environment as the others are, so the command line stays `git COMMAND …`.
   */
  config?: readonly (readonly [string, string])[];
  /**
   * For a push: the refs it goes to as the run knows them on the server. Through the run's relay
   * they answer git's request for the server's (transport/kept-advertisements.ts).
   */
  pushesTo?: readonly KnownRef[];
  /** For a push: what it sends, where the run knows it (FdRunOptions.sends). */
  sends?: FdRunOptions['sends'];
  /**
   * A git:// lock repository's kept session, which takes the fetches it can instead of a
   * connection of their own (daemon-session.ts).
   */
  session?: KeptSession;
}

/** The commands that talk to the lock repository itself, not only to the local copy. */
const REMOTE_COMMANDS = new Set(['clone', 'fetch', 'ls-remote', 'push']);

export class Git {
  /** Whether a command of this run reached the lock repository (see AccessFailure.missing). */
  private reachedRemote = false;
  /** Who git writes as, once asked. */
  private asked: Promise<GitIdentity> | undefined;

  constructor(
    private readonly environment: GitEnvironment,
    private readonly signal: AbortSignal,
    private readonly timeoutMs: number,
  ) {}

  /** Who git writes commits as: known without asking git unless git_config sets it (see GitEnvironment). */
  identity(): Promise<GitIdentity> {
    const known = this.environment.identity;
    if (known) return Promise.resolve(known);
    // Asked once; a failure (a stop, say) is not kept.
    this.asked ??= this.askIdentity().catch((error: unknown) => {
      this.asked = undefined;
      throw error;
    });
    return this.asked;
  }

  /**
   * `git var` applies the same config and environment rules as `git commit` would. In the
   * private home: the copy may not exist yet (this runs alongside the first clone).
   */
  private async askIdentity(): Promise<GitIdentity> {
    const out = await this.run(['var', '-l']);
    const read = (name: string) => {
      const line = out.split('\n').find((l) => l.startsWith(`${name}=`));
      const ident = line?.slice(name.length + 1).replace(/ \d+ [+-]\d{4}$/, '');
      if (!ident) throw new Error(`git var printed no ${name}`);
      return ident;
    };
    return { author: read('GIT_AUTHOR_IDENT'), committer: read('GIT_COMMITTER_IDENT') };
  }

  async run(args: readonly string[], options: GitRunOptions = {}): Promise<string> {
    return this.execute(
      args,
      options,
      (git) => git.raw([...args]),
      (stdout) => stdout,
    );
  }

  /**
   * `git cat-file ARGS` with its output as bytes: lock files are free-form bytes, which text
   * output would mangle wherever they are not UTF-8 (and `--batch` counts its sizes in bytes).
   */
  async catFile(args: readonly string[], options: GitRunOptions = {}): Promise<Buffer> {
    return this.execute(['cat-file', ...args], options, (git) => git.binaryCatFile([...args]));
  }

  /** The run's shared SSH connections, where git's SSH program uses them. */
  get mux(): SshMux | undefined {
    return this.environment.mux;
  }

  /**
   * Whether git's fetches and pushes go over the run's own connections to a git:// lock
   * repository (daemon-command.ts). There a fetch of only what is new waits on no delayed ACK,
   * while a fetch with --depth still waits on git daemon's.
   */
  get overDaemonSockets(): boolean {
    return this.environment.daemon !== undefined;
  }

  /** The run's relay to an HTTP(S) lock repository, while git goes through it. */
  get relay(): HttpRelay | undefined {
    const { relay } = this.environment;
    return relay?.usable ? relay : undefined;
  }

  /**
   * `task` runs the command through simple-git. A command that returns its output as text
   * (`fromStdout`) and goes to a git:// or SSH lock repository runs on a connection of the run's
   * instead (daemon-command.ts, ssh-channel-command.ts), and through simple-git only where that
   * connection cannot be made.
   */
  private async execute<T>(
    args: readonly string[],
    options: GitRunOptions,
    task: (git: SimpleGit) => Promise<T>,
    fromStdout?: (stdout: string) => T,
  ): Promise<T> {
    const relay = this.relay;
    if (!relay || !REMOTE_COMMANDS.has(args[0] ?? ''))
      return this.attempt(args, options, task, [], fromStdout);
    try {
      relay.expectPush(options.pushesTo);
      return await this.attempt(args, options, task, relay.config);
    } catch (error) {
      if (relay.usable || error instanceof CancelledError || error instanceof GitTimeoutError)
        throw error;
      // The relay turned itself off during the command (transport/http-relay.ts): once more,
      // git straight to the server, so what stood in the way is told in git's own words.
      return this.attempt(args, options, task);
    }
  }

  private async attempt<T>(
    args: readonly string[],
    options: GitRunOptions,
    task: (git: SimpleGit) => Promise<T>,
    relayed: readonly (readonly [string, string])[] = [],
    fromStdout?: (stdout: string) => T,
  ): Promise<T> {
    const parent = options.signal ?? this.signal;
    if (parent.aborted) throw new CancelledError(parent.reason);
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const signal = AbortSignal.any([parent, timeout]);
    // simple-git wraps whatever `errors` returns in its own error type, so the structured
    // failure is kept here and rethrown as is.
    let failure: GitCommandError | undefined;
    const env = withConfig(this.environment.env, [...relayed, ...(options.config ?? [])]);
    const cwd = options.cwd ?? this.environment.home;
    const direct = fromStdout && this.fdCommand(args, options.session);
    // git names the address it used: the relay's or the socket's, which the user never gave.
    const words = (output: Buffer[]) => {
      const text = Buffer.concat(output).toString('utf8');
      if (direct) return text.replaceAll(SOCKET_REMOTE, direct.uri);
      return this.environment.relay?.unrelay(text) ?? text;
    };
    const gitOptions: Partial<SimpleGitOptions> = {
      baseDir: cwd,
      abort: signal,
      // simple-git refuses GIT_* variables unless they are listed: these are the ones we built.
      allowEnvironment: Object.keys(env).filter((key) => key.startsWith('GIT_')),
      unsafe: this.environment.unsafe,
      ...(options.input === undefined ? {} : { input: () => options.input }),
      errors: (error, result) => {
        if (result.exitCode === 0 && error === undefined) return undefined;
        if (signal.aborted) return error instanceof Error ? error : new Error('aborted');
        failure = new GitCommandError(
          args,
          result.exitCode,
          words(result.stdOut),
          words(result.stdErr),
        );
        return failure;
      },
    };
    // Registered before simple-git's own listener, which sends git the same signal. Not SIGKILL
    // at once: git removes its lock files on the signal (a local receive-pack would otherwise
    // leave the remote's ref locked). What is still there after the grace period is killed, even
    // a git that never ends on the signal and so would keep this command from ever settling.
    let reaping: Promise<void> | undefined;
    const stopProcesses = () => {
      signalProcessesWithHome(this.environment.home, GIT_STOP_SIGNAL);
      reaping = this.reapProcesses();
    };
    signal.addEventListener('abort', stopProcesses, { once: true });
    try {
      const { pushesTo, sends } = options;
      const socketRun = direct && (await direct.run({ env, cwd, signal, pushesTo, sends }));
      let output: T;
      if (socketRun && fromStdout) {
        if (socketRun.exitCode !== 0) {
          const { exitCode, signal, stdout, stderr } = socketRun;
          failure = new GitCommandError(
            args,
            exitCode,
            words([stdout]),
            words([stderr]),
            signal ?? undefined,
          );
          throw failure;
        }
        output = fromStdout(socketRun.stdout.toString('utf8'));
      } else {
        output = await task(simpleGit(gitOptions).env(env));
      }
      if (REMOTE_COMMANDS.has(args[0] ?? '')) this.reachedRemote = true;
      return output;
    } catch (error) {
      if (parent.aborted) throw new CancelledError(parent.reason);
      if (timeout.aborted) throw new GitTimeoutError(args, this.timeoutMs);
      if (failure) {
        // Refused credentials or host key, no repository at the uri: fail once, clearly,
        // instead of retrying.
        const access = accessFailure(failure.stderr);
        if (access && !(access.missing && this.reachedRemote))
          throw new AccessError(args, access.reason);
        throw failure;
      }
      // simple-git refuses settings that make git run programs (core.sshCommand, hooks, …):
      // only the user's git_config can bring those, so it is a request that can never work.
      if (
        error instanceof GitPluginError &&
        error.plugin !== 'abort' &&
        error.plugin !== 'timeout'
      ) {
        throw new ConfigurationError([`invalid payload (git_config: ${error.message})`]);
      }
      throw error;
    } finally {
      signal.removeEventListener('abort', stopProcesses);
      // Never return while the reaping goes on: it would kill the next command's processes.
      await reaping;
    }
  }

  /** `args` as a command on a connection of the run's, where the URI allows one. */
  private fdCommand(args: readonly string[], session?: KeptSession): FdCommand | undefined {
    const { daemon, ssh } = this.environment;
    if (daemon && session) return keptSessionCommand(session, daemon, args);
    return (daemon && daemonCommand(daemon, args)) || (ssh && sshChannelCommand(ssh, args));
  }

  /**
   * From a cancelled or timed-out command's stop signal: waits briefly for what got it to exit,
   * then SIGKILLs what is left, so no process of ours outlives the command or the run.
   */
  private async reapProcesses(): Promise<void> {
    const { home } = this.environment;
    for (let waited = 0; waited < GIT_KILL_GRACE_MS; waited += 20) {
      if (processesWithHome(home).length === 0) return;
      await sleep(20);
    }
    signalProcessesWithHome(home, 'SIGKILL');
  }
}

/** `env` with `config` added to the settings it passes git (GIT_CONFIG_COUNT and its pairs). */
function withConfig(
  env: Record<string, string>,
  config: readonly (readonly [string, string])[],
): Record<string, string> {
  if (config.length === 0) return env;
  const count = Number(env.GIT_CONFIG_COUNT ?? '0');
  const added: Record<string, string> = { GIT_CONFIG_COUNT: String(count + config.length) };
  config.forEach(([key, value], index) => {
    added[`GIT_CONFIG_KEY_${count + index}`] = key;
    added[`GIT_CONFIG_VALUE_${count + index}`] = value;
  });
  return { ...env, ...added };
}
