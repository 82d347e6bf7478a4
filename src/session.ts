// Opens a request's git session: secrets registered with the logger, the private git
// environment, and a Git bound to the run's signal and time limit.
import type { CommandContext } from './context.js';
import { createGitEnvironment, type GitEnvironment } from './git/environment.js';
import { Git } from './git/git.js';
import { uriPassword } from './logger.js';
import type { Source } from './request.js';

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
    uriPassword(source.uri),
  ]) {
    ctx.log.addSecret(secret);
  }
}

export async function openSession(source: Source, ctx: CommandContext): Promise<Session> {
  const environment = await createGitEnvironment(source, ctx.env);
  ctx.onExit(() => environment.dispose());
  return { git: new Git(environment, ctx.signal, source.gitTimeoutMs), environment };
}

export function lockResponse(ref: string, name: string, pool: string) {
  return {
    version: { ref },
    metadata: [
      { name: 'lock_name', value: name },
      { name: 'pool_name', value: pool },
    ],
  };
}
