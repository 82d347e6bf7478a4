// `in`: fetches the lock a version's commit is about, with the "no longer acquired" safety check.
import { copyFile, lstat, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CommandContext } from '../context.js';
import { BranchHistory } from '../branch-history.js';
import { ConfigurationError, OperationError } from '../errors.js';
import { lockPath } from '../pool-state.js';
import { parseInRequest } from '../request.js';
import { requestSecrets } from '../request-secrets.js';
import { lockResponse, openSession, registerSecrets } from '../session.js';

export async function runIn(ctx: CommandContext) {
  for (const secret of requestSecrets(ctx.stdin)) ctx.log.addSecret(secret);
  const { request, warnings } = parseInRequest(ctx.stdin);
  registerSecrets(request.source, ctx);
  for (const warning of warnings) ctx.log.info(warning);
  const dest = ctx.args[0];
  if (!dest) throw new ConfigurationError(['usage: in DESTINATION_DIRECTORY']);
  const { source, version } = request;
  const { git, environment } = await openSession(source, ctx);
  const history = new BranchHistory(
    git,
    join(environment.home, 'repository'),
    source.uri,
    source.branch,
  );

  await history.fetch(request.depth);
  const commit = await history.resolveOnBranch(version);
  const found = await history.lockCommitAt(commit, source.pool);
  if (!found)
    throw new OperationError(`commit ${version} is not about any lock in pool "${source.pool}"`);
  const { name, commit: lockCommit } = found;
  const state = await history.stateAt(lockCommit, source.pool, name);

  if (state === undefined) {
    ctx.log.info(
      `lock "${name}" was removed from pool "${source.pool}" by ${lockCommit.slice(0, 12)}: no files written`,
    );
    return lockResponse(version, name, source.pool);
  }
  if (
    state === 'claimed' &&
    (await history.touchedSince(lockCommit, lockPath(source.pool, 'claimed', name)))
  ) {
    throw new OperationError('error: lock instance is no longer acquired');
  }
  const metadata = await history.materialise(lockCommit, lockPath(source.pool, state, name));
  // A symlink "lock" would make copyFile read whatever it points at on this machine.
  if (!(await lstat(metadata)).isFile()) {
    throw new OperationError(
      `lock "${name}" in pool "${source.pool}" is not a regular file at ${lockCommit.slice(0, 12)}: fix the lock repository`,
    );
  }
  await mkdir(dest, { recursive: true });
  await writeFile(join(dest, 'name'), `${name}\n`);
  await copyFile(metadata, join(dest, 'metadata'));
  ctx.log.info(`fetched lock: ${name} (${state}) from pool: ${source.pool}`);
  return lockResponse(version, name, source.pool);
}
