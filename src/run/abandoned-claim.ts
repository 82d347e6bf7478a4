// When a stopped run may have left its claim on the remote: release it from a working copy of its
// own (the run's may be half-way through a killed git command, or already removed when the
// signal came after the result was written), or say exactly what is left claimed.
import { join } from 'node:path';
import { commitMessage, type BuildInfo } from '../protocol/build-info.js';
import type { CommandContext } from './context.js';
import { CancelledError, describeError } from '../base/errors.js';
import { createGitEnvironment, type GitEnvironment } from '../git/environment.js';
import { Git } from '../git/git.js';
import type { ResolvedOperation } from '../lock/lock-operation.js';
import type { LockPool, Outcome } from '../lock/lock-pool.js';
import type { Claim } from '../lock/lock-store.js';
import {
  releaseAbandonedClaim,
  type AbandonedClaimResult,
  type PendingClaim,
} from '../lock/pending-claims.js';
import { LockRepository } from '../repo/lock-repository.js';
import { displayUri } from '../base/logger.js';
import { FAILURE_RELEASE_MS } from '../base/stop-budget.js';
import type { Source } from '../protocol/request.js';

/**
 * Runs `operation` through `pool` so that a claim it may have pushed is never left behind: on
 * the run's abort (a stop signal) and when the run fails after a push whose result is unknown,
 * the claim is looked for on the remote and released.
 */
export function runReleasingAbandonedClaim(
  ctx: CommandContext,
  pool: LockPool,
  source: Source,
  build: BuildInfo,
  /** Who claimed, for the release's message: "the put", "the pool command". */
  claimer: string,
): (operation: ResolvedOperation) => Promise<Outcome> {
  /** Claims taken over from the pool for releasing, not yet found released or absent. */
  let releasing: PendingClaim[] = [];
  const leftClaimed = (claim: Claim) =>
    `"${claim.name}" in pool "${source.pool}" may still be claimed by commit ${claim.commit} on refs/heads/${source.branch} of ${displayUri(source.uri)}`;
  /** The one release of a run: a signal during the release after a failure waits for it. */
  let ongoing: Promise<void> | undefined;
  const release = (signal: AbortSignal, what: 'aborted' | 'failed') =>
    (ongoing ??= releaseAll(signal, what));
  const releaseAll = async (signal: AbortSignal, what: 'aborted' | 'failed') => {
    releasing = pool.takePendingClaims();
    // At most one of them can be on the remote (see PendingClaims).
    while (releasing.length > 0) {
      const claim = releasing[0]!;
      try {
        const result = await releaseOne(claim, signal, what);
        if (result === 'released') releasing = [];
        else releasing = releasing.slice(1);
      } catch (error) {
        for (const left of releasing)
          for (const lock of left.locks)
            ctx.log.error(
              `error releasing abandoned lock: ${leftClaimed(lock)}; release it by hand (${describeError(error)})`,
            );
        releasing = [];
      }
    }
  };
  const releaseOne = async (
    claim: PendingClaim,
    signal: AbortSignal,
    what: 'aborted' | 'failed',
  ): Promise<AbandonedClaimResult> => {
    const names = claim.locks.map(({ name }) => `"${name}"`).join(', ');
    ctx.log.info(`the claim of ${names} may have reached the remote: checking, to release it`);
    let environment: GitEnvironment | undefined;
    try {
      environment = await createGitEnvironment(source, ctx.env, signal, (line) =>
        ctx.log.info(line),
      );
      const repository = new LockRepository(new Git(environment, signal, source.gitTimeoutMs), {
        uri: source.uri,
        branch: source.branch,
        pool: source.pool,
        workdir: join(environment.home, 'repository'),
        keepHistory: true,
      });
      const result = await releaseAbandonedClaim(
        repository,
        claim,
        (name) =>
          `${commitMessage(`unclaiming: ${name}`, build)}\nReleased because ${claimer} that claimed it was ${what}.\n`,
        signal,
        ctx.clock,
      );
      ctx.log.info(
        result === 'released'
          ? `released ${names}: this run no longer holds ${claim.locks.length === 1 ? 'it' : 'them'}`
          : `${names} ${claim.locks.length === 1 ? 'was' : 'were'} not claimed by this run on the remote: nothing to release`,
      );
      return result;
    } finally {
      await environment?.dispose();
    }
  };
  ctx.onAbort((signal) => release(signal, 'aborted'));
  ctx.onForcedExit(() => {
    for (const claim of [...pool.pendingClaims(), ...releasing])
      for (const lock of claim.locks)
        ctx.log.error(`exiting at once: ${leftClaimed(lock)}; release it by hand if so`);
  });
  return async (operation) => {
    try {
      return await pool.run(operation);
    } catch (error) {
      if (!(error instanceof CancelledError))
        await release(AbortSignal.timeout(FAILURE_RELEASE_MS), 'failed');
      throw error;
    }
  };
}
