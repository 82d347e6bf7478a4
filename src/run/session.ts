// Opens a request's git session: secrets registered with the logger, the private git
// environment, and a Git bound to the run's signal and time limit.
import type { CommandContext } from './context.js';
import { createGitEnvironment, type GitEnvironment } from '../git/environment.js';
import { Git } from '../git/git.js';
import { daemonSession, type KeptSession } from '../git/daemon-session.js';
import { basicCredentials } from '../base/basic-auth.js';
import { uriSecrets, userNameSecrets } from '../base/logger.js';
import type { Parsed, Source } from '../protocol/request.js';
import { requestSecrets } from '../protocol/request-secrets.js';

export interface Session {
  git: Git;
  environment: GitEnvironment;
}

export function registerSecrets(source: Source, ctx: CommandContext): void {
  for (const secret of [
    source.privateKey,
    source.privateKeyPassphrase,
    source.password,
    source.httpsTunnel?.proxyPassword,
    ...uriSecrets(source.uri),
    // A token often stands in for the user name (`https://TOKEN@host/…`, moved here by request.ts).
    ...userNameSecrets(source.username),
    basicCredentials(source.username, source.password),
    basicCredentials(source.httpsTunnel?.proxyUser, source.httpsTunnel?.proxyPassword),
    // Headers and tokens set through git_config (e.g. http.extraHeader with a bearer token).
    ...source.gitConfig
      .filter(({ name }) => /extraheader|password|token|secret/i.test(name))
      .map(({ value }) => value),
  ]) {
    ctx.log.addSecret(secret);
  }
}

/**
 * Parses a script's request: its secrets are masked first (even when parsing fails, so a
 * password pasted into the wrong field is never quoted back), then its warnings are shown.
 */
export async function readRequest<T extends { source: Source }>(
  ctx: CommandContext,
  parse: (text: string) => Promise<Parsed<T>>,
): Promise<T> {
  for (const secret of requestSecrets(ctx.stdin)) ctx.log.addSecret(secret);
  const { request, warnings } = await parse(ctx.stdin);
  registerSecrets(request.source, ctx);
  for (const warning of warnings) ctx.log.info(warning);
  return request;
}

export async function openSession(source: Source, ctx: CommandContext): Promise<Session> {
  const environment = await createGitEnvironment(source, ctx.env, ctx.signal, (line) =>
    ctx.log.info(line),
  );
  ctx.onExit(() => environment.dispose());
  return { git: new Git(environment, ctx.signal, source.gitTimeoutMs), environment };
}

/**
 * Over git://, the session the run's first fetch opens (git/daemon-session.ts), closed when the
 * run ends: on a connection of git's own, a fetch of a window waits once on a delayed ACK
 * (docs/benchmarks.md). Undefined for any other URI.
 */
export function keptSession(source: Source, ctx: CommandContext): KeptSession | undefined {
  const session = daemonSession(source, ctx.signal);
  if (session) ctx.onExit(async () => session.close());
  return session;
}

/** The answer about a lock, or a set of locks (`names`, more than one: they are named too). */
export function lockResponse(
  ref: string,
  name: string,
  pool: string,
  names: readonly string[] = [],
) {
  const metadata = [
    { name: 'lock_name', value: name },
    { name: 'pool_name', value: pool },
  ];
  if (names.length > 1)
    metadata.push(
      { name: 'lock_names', value: names.join(',') },
      { name: 'lock_count', value: String(names.length) },
    );
  return { version: { ref }, metadata };
}

/** A reap's answer: the pool's last commit, and the locks it reclaimed (SPEC §10). */
export function reapResponse(ref: string, reclaimed: readonly string[], pool: string) {
  return {
    version: { ref },
    metadata: [
      { name: 'pool_name', value: pool },
      { name: 'reclaimed', value: reclaimed.length > 0 ? reclaimed.join(', ') : 'none' },
    ],
  };
}
