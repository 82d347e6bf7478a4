// `in`: fetches the lock a version's commit is about, with the "no longer acquired" safety check.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CommandContext } from '../run/context.js';
import { BranchHistory } from '../repo/branch-history.js';
import { ConfigurationError, OperationError } from '../base/errors.js';
import { lockPath } from '../lock/pool-state.js';
import { formatInstant } from '../repo/lock-holders.js';
import { parseInRequest } from '../protocol/request.js';
import { lockResponse, openSession, readRequest } from '../run/session.js';

/** Commits fetched from the tip at first (the window widens fourfold when a question needs it). */
const IN_WINDOW = 16;

/** Said when the folder argument is missing (main says it before reading stdin). */
export const IN_USAGE = 'usage: in DESTINATION_DIRECTORY';

export async function runIn(ctx: CommandContext) {
  const request = await readRequest(ctx, parseInRequest);
  const dest = ctx.args[0];
  if (!dest) throw new ConfigurationError([IN_USAGE]);
  const { source, version } = request;
  const { git, environment } = await openSession(source, ctx);
  const history = new BranchHistory(
    git,
    join(environment.home, 'repository'),
    source.uri,
    source.branch,
  );

  // A window from the tip: a put's implicit get asks about (or near) the tip, so one fetch of a
  // few commits usually answers both the lock and the safety check. One commit deeper than
  // `depth`, since the version's own change needs its parent to diff against.
  await history.fetch(request.depth === undefined ? IN_WINDOW : request.depth + 1);
  const commit = await history.resolveOnBranch(version);
  const found = await history.lockCommitAt(commit, source.pool);
  if (!found)
    throw new OperationError(`commit ${version} is not about any lock in pool "${source.pool}"`);
  const { name, commit: lockCommit } = found;
  const lock = await history.lockAt(lockCommit, source.pool, name);

  if (lock === undefined) {
    ctx.log.info(
      `lock "${name}" was removed from pool "${source.pool}" by ${lockCommit.slice(0, 12)}: no files written`,
    );
    return lockResponse(version, name, source.pool);
  }
  const { state } = lock;
  if (
    state === 'claimed' &&
    (await history.touchedSince(lockCommit, lockPath(source.pool, 'claimed', name)))
  ) {
    throw new OperationError('error: lock instance is no longer acquired');
  }
  if (!lock.regular) {
    throw new OperationError(
      `lock "${name}" in pool "${source.pool}" is not a regular file at ${lockCommit.slice(0, 12)}: fix the lock repository`,
    );
  }
  await mkdir(dest, { recursive: true });
  await history.writeBlob(lock.blob, join(dest, 'metadata'));
  await writeFile(join(dest, 'name'), `${name}\n`);
  if (state === 'claimed') {
    // For fencing (SPEC §10): a release or renew from this folder acts only on this claim.
    const claim = await history.claimOf(lockCommit, name);
    if (claim.token) await writeFile(join(dest, 'claim_token'), `${claim.token}\n`);
    if (claim.leaseExpires)
      await writeFile(join(dest, 'lease_expires'), `${formatInstant(claim.leaseExpires)}\n`);
  }
  ctx.log.info(`fetched lock: ${name} (${state}) from pool: ${source.pool}`);
  return lockResponse(version, name, source.pool);
}
