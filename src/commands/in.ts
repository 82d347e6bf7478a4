// `in`: fetches the lock a version's commit is about, with the "no longer acquired" safety check.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CommandContext } from '../run/context.js';
import { BranchHistory, type CommitClaim } from '../repo/branch-history.js';
import { ConfigurationError, OperationError } from '../base/errors.js';
import { lockNameProblem } from '../base/lock-name.js';
import { lockPath } from '../lock/pool-state.js';
import { formatInstant } from '../repo/lock-holders.js';
import { parseInRequest, type InRequest } from '../protocol/request.js';
import { keptRefsFor } from '../git/kept-refs.js';
import { keptSession, lockResponse, openSession, readRequest } from '../run/session.js';

/** Commits fetched from the tip at first (the window widens fourfold when a question needs it). */
const IN_WINDOW = 16;

/** Said when the folder argument is missing (main says it before reading stdin). */
export const IN_USAGE = 'usage: in DESTINATION_DIRECTORY';

export async function runIn(ctx: CommandContext) {
  const request = await readRequest(ctx, parseInRequest);
  const dest = ctx.args[0];
  if (!dest) throw new ConfigurationError([IN_USAGE]);
  const { source } = request;
  const { git, environment } = await openSession(source, ctx);
  const history = new BranchHistory(
    git,
    join(environment.home, 'repository'),
    source.uri,
    source.branch,
    {
      scratch: true,
      session: keptSession(source, ctx),
      // Over HTTP(S) the first fetch is asked on the relay's connection by the run itself.
      packs: keptRefsFor(git, source, ctx.signal)?.packs,
    },
  );
  return fetchLock(ctx, request, dest, history);
}

async function fetchLock(
  ctx: CommandContext,
  { source, version, depth }: InRequest,
  dest: string,
  history: BranchHistory,
) {
  // A window from the tip: a put's implicit get asks about (or near) the tip, so one fetch of a
  // few commits usually answers both the lock and the safety check. One commit deeper than
  // `depth`, since the version's own change needs its parent to diff against.
  await history.fetch(depth === undefined ? IN_WINDOW : depth + 1);
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
  // For fencing (SPEC §10): a release or renew from this folder acts only on this claim.
  const claim: CommitClaim = state === 'claimed' ? await history.claimOf(lockCommit, name) : {};
  const set =
    state === 'claimed'
      ? await claimedSet(history, lockCommit, source.pool, claim.trailers)
      : undefined;
  if (set) {
    await writeSet(history, dest, set);
    await writeLease(dest, claim.leaseExpires);
    ctx.log.info(
      `fetched locks: ${set.locks.map(({ name }) => name).join(', ')} (claimed together) from pool: ${source.pool}`,
    );
    const names = set.locks.map(({ name }) => name);
    return lockResponse(version, names[0]!, source.pool, names);
  }
  await mkdir(dest, { recursive: true });
  await history.writeBlob(lock.blob, join(dest, 'metadata'));
  await writeFile(join(dest, 'name'), `${name}\n`);
  if (claim.token) await writeFile(join(dest, 'claim_token'), `${claim.token}\n`);
  await writeLease(dest, claim.leaseExpires);
  ctx.log.info(`fetched lock: ${name} (${state}) from pool: ${source.pool}`);
  return lockResponse(version, name, source.pool);
}

/** `lease_expires`: when the claim's lease runs out, as last renewed (SPEC §10). */
async function writeLease(dest: string, lease: Date | undefined): Promise<void> {
  if (lease) await writeFile(join(dest, 'lease_expires'), `${formatInstant(lease)}\n`);
}

interface ClaimedSet {
  token: string | undefined;
  locks: { name: string; blob: string }[];
}

/**
 * The locks claimed together with the one `commit` claimed (its `Claim-Set` trailer), as far as
 * they are claimed at that commit: the put's version (the last commit of its push) has them all.
 * Undefined for a claim of one lock. Fails, as for one lock, when any of them changed since.
 */
async function claimedSet(
  history: BranchHistory,
  commit: string,
  pool: string,
  /** The commit's trailers, when claimOf's log already printed them. */
  trailers: string | undefined,
): Promise<ClaimedSet | undefined> {
  const [set] = await history.trailers(commit, 'Claim-Set', trailers);
  if (set === undefined) return undefined;
  const names = set.split(',').map((name) => name.trim());
  if (names.length < 2 || names.some((name) => lockNameProblem(name) !== undefined))
    return undefined;
  const locks: ClaimedSet['locks'] = [];
  for (const name of names) {
    const lock = await history.lockAt(commit, pool, name);
    // Claimed by a later commit of the same push: not part of this version yet.
    if (lock?.state !== 'claimed') continue;
    if (!lock.regular || (await history.touchedSince(commit, lockPath(pool, 'claimed', name))))
      throw new OperationError('error: lock instance is no longer acquired');
    locks.push({ name, blob: lock.blob });
  }
  if (locks.length < 2) return undefined;
  const [token] = await history.trailers(commit, 'Claim-Token', trailers);
  return { token, locks };
}

/** `name` and `metadata` of the first lock, `names`, `locks/NAME` of each, and `claim_token`. */
async function writeSet(history: BranchHistory, dest: string, set: ClaimedSet): Promise<void> {
  const first = set.locks[0]!;
  await mkdir(join(dest, 'locks'), { recursive: true });
  for (const { name, blob } of set.locks) await history.writeBlob(blob, join(dest, 'locks', name));
  await history.writeBlob(first.blob, join(dest, 'metadata'));
  await writeFile(join(dest, 'name'), `${first.name}\n`);
  await writeFile(join(dest, 'names'), set.locks.map(({ name }) => `${name}\n`).join(''));
  if (set.token !== undefined) await writeFile(join(dest, 'claim_token'), `${set.token}\n`);
}
