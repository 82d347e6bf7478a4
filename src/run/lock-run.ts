// One operation through the lock policy, as `out` and the pool command both run it: a fresh
// working copy, progress on stderr, holder records on claims, and the compensating release.
import { join } from 'node:path';
import { describeFilter } from '../base/lock-match.js';
import { runReleasingAbandonedClaim } from './abandoned-claim.js';
import { buildLabel, commitMessage, type BuildInfo } from '../protocol/build-info.js';
import type { CommandContext } from './context.js';
import type { Git } from '../git/git.js';
import { holderLookup } from '../repo/holder-lookup.js';
import { BranchHistory } from '../repo/branch-history.js';
import type { Reclaim } from '../lock/leases.js';
import type { ResolvedOperation } from '../lock/lock-operation.js';
import { LockPool, type Outcome } from '../lock/lock-pool.js';
import { LockRepository } from '../repo/lock-repository.js';
import { FetchById } from '../repo/branch-copy.js';
import { lineTokenOf } from '../repo/line-claims.js';
import { keptRefsFor } from '../git/kept-refs.js';
import { wireProtocolVersion } from '../git/environment.js';
import { ProgressReporter } from './progress.js';
import { keptSession } from './session.js';
import type { Source } from '../protocol/request.js';

export interface LockRunOptions {
  git: Git;
  /** The run's private folder: the working copies live below it. */
  home: string;
  source: Source;
  build: BuildInfo;
  waitTimeoutMs: number | undefined;
  /** What the caller calls its wait timeout (default `params.wait_timeout`; see LockPoolOptions). */
  waitTimeoutSetting?: string;
  /** Who a claim names in Claimed-By when it is not the build (the pool command's operator). */
  claimedBy?: string;
  /** Who claims, for the compensating release's message: "the put", "the pool command". */
  claimer: string;
  /** The lease a claim gets (SPEC §10); none when undefined. */
  leaseMs?: number;
}

export async function runLockOperation(
  ctx: CommandContext,
  operation: ResolvedOperation,
  options: LockRunOptions,
): Promise<Outcome> {
  const { git, home, source, build, waitTimeoutMs } = options;
  const refs = keptRefsFor(git, source, ctx.signal);
  // A put that keeps its place in line.
  const line = operation.kind === 'acquire' && !operation.filter;
  // Over git://, the session of the run's first fetch: a put in line waits with it too, and a
  // push that lost its race asks it for the tip that won.
  const session = keptSession(source, ctx);
  // Over protocol v2 a tip already seen (by a look, or by the put's own fetch) is fetched by its
  // id, the refs not listed again; over v0 (git://) the server advertises every ref on each
  // connection anyway, and a commit is asked by its id on the kept session only.
  const fetchById = new FetchById(wireProtocolVersion(source.uri) === '2');
  const repository = new LockRepository(git, {
    uri: source.uri,
    branch: source.branch,
    pool: source.pool,
    workdir: join(home, 'repository'),
    // A put with a filter waits outside the line (see LockPool.run): it needs no line refs.
    line,
    refs,
    fetchById,
    session,
    // A put from a get's folder checks the lock is still its claim (fencing): the commits since
    // the claim, fetched with the tip, usually tell without a fetch of their own.
    keepHistory: 'token' in operation && operation.token !== undefined,
  });
  const token = ctx.newToken();
  const started = ctx.clock.now();
  const pool = new LockPool(
    repository,
    ctx.clock,
    new ProgressReporter(
      ctx.log,
      () => ctx.clock.now(),
      holderLookup(
        git,
        source,
        home,
        ctx.signal,
        waitTimeoutMs,
        fetchById,
        // Where the put's copy keeps every commit it fetched, the holders are read from it.
        () => repository.keptCopy,
        (tip) => repository.poolRead(tip),
        (tip, wanted, signal) => repository.heldInWindow(tip, wanted, signal),
      ),
    ),
    {
      pool: source.pool,
      retryDelayMs: source.retryDelayMs,
      waitTimeoutMs,
      waitTimeoutSetting: options.waitTimeoutSetting,
      lineToken: lineTokenOf(token),
      lineWho: options.claimedBy ?? buildLabel(build),
      leaseGraceMs: source.leaseGraceMs,
      reclaimedBy: options.claimedBy ?? build.url ?? 'unknown',
      message: ({ subject, claiming, trailers }) => {
        const now = ctx.clock.now();
        return commitMessage(
          subject,
          build,
          claiming
            ? {
                token,
                at: new Date(now),
                by: options.claimedBy,
                waitedMs: now - started,
                leaseExpires:
                  options.leaseMs === undefined ? undefined : new Date(now + options.leaseMs),
              }
            : undefined,
          trailers,
        );
      },
    },
    ctx.signal,
  );
  const run = runReleasingAbandonedClaim(ctx, pool, source, build, options.claimer);
  ctx.log.info(startLine(operation, source.pool));
  const outcome = await run(operation).finally(() => refs?.close());
  // One line per reclaimed lock (SPEC §10): whose claim went, and why.
  for (const reclaim of outcome.reclaimed ?? []) ctx.log.info(reclaimLine(operation, reclaim));
  if (operation.kind === 'reap' && (outcome.names.length === 0 || operation.dryRun)) {
    // Nothing committed: the answer is still the last commit that touched the pool.
    const history = new BranchHistory(git, join(home, 'history.git'), source.uri, source.branch);
    await history.fetch(16);
    const [last] = await history.poolCommits(source.pool, undefined);
    if (last) outcome.ref = last;
  }
  ctx.log.info(
    operation.kind === 'reap'
      ? reapedLine(operation.dryRun === true, outcome)
      : doneLine(operation, outcome.names.join(', '), outcome.ref, outcome.names.length),
  );
  return outcome;
}

function reapedLine(dryRun: boolean, outcome: Outcome): string {
  const count = outcome.reclaimed?.length ?? 0;
  const locks = `${count} expired ${count === 1 ? 'lock' : 'locks'}`;
  const at = `(commit ${outcome.ref.slice(0, 12)})`;
  return dryRun ? `dry run: ${locks} to reclaim ${at}` : `reaped! ${locks} reclaimed ${at}`;
}

function reclaimLine(operation: ResolvedOperation, reclaim: Reclaim): string {
  const dry = operation.kind === 'reap' && operation.dryRun;
  const holder = reclaim.by ? `, claimed by ${reclaim.by}` : '';
  return `${dry ? 'would reclaim' : 'reclaimed'} lock: ${reclaim.name} (${reclaim.reason}${holder})`;
}

function startLine(operation: ResolvedOperation, pool: string): string {
  switch (operation.kind) {
    case 'acquire': {
      const count = operation.count ?? 1;
      const what = count > 1 ? `${count} locks on: ${pool}` : `lock on: ${pool}`;
      const filter = operation.filter
        ? ` (${count > 1 ? 'ones' : 'one'} that ${count > 1 ? 'match' : 'matches'} ${describeFilter(operation.filter)})`
        : '';
      return `acquiring ${what}${filter}`;
    }
    case 'renew':
      return `renewing the lease of lock: ${operation.name} on: ${pool}`;
    case 'reap':
      return `reclaiming expired locks on: ${pool}${operation.dryRun ? ' (dry run: nothing is committed)' : ''}`;
    case 'claim':
    case 'release': {
      const verb = operation.kind === 'claim' ? 'claiming' : 'releasing';
      return operation.names
        ? `${verb} locks: ${operation.names.join(', ')} on: ${pool}`
        : `${verb} lock: ${operation.name} on: ${pool}`;
    }
    case 'remove':
      return `removing lock: ${operation.name} on: ${pool}`;
    case 'add':
    case 'add_claimed':
      return `adding lock: ${operation.name} on: ${pool}`;
    case 'update':
      return `updating lock: ${operation.name} on: ${pool}`;
    case 'check':
      return `checking that lock: ${operation.name} on: ${pool} is unclaimed`;
    case 'check_unclaimed':
      return `checking that lock: ${operation.name} on: ${pool} is claimed`;
  }
}

function doneLine(operation: ResolvedOperation, name: string, ref: string, count: number): string {
  const at = `(commit ${ref.slice(0, 12)})`;
  const lock = count > 1 ? 'locks' : 'lock';
  switch (operation.kind) {
    case 'acquire':
      return `acquired! ${lock}: ${name} ${at}`;
    case 'claim':
      return `claimed! ${lock}: ${name} ${at}`;
    case 'renew':
      return `renewed! lock: ${name} ${at}`;
    case 'reap':
      return `reaped! ${at}`;
    case 'release':
      return `released! ${lock}: ${name} ${at}`;
    case 'remove':
      return `removed! lock: ${name} ${at}`;
    case 'add':
    case 'add_claimed':
      return `added! lock: ${name} ${at}`;
    case 'update':
      return `updated! lock: ${name} ${at}`;
    case 'check':
      return `unclaimed! lock: ${name} ${at}`;
    case 'check_unclaimed':
      return `claimed! lock: ${name} ${at}`;
  }
}
