// One operation through the lock policy, as `out` and the pool command both run it: a fresh
// working copy, progress on stderr, holder records on claims, and the compensating release.
import { join } from 'node:path';
import { describeFilter } from '../base/lock-match.js';
import { runReleasingAbandonedClaim } from './abandoned-claim.js';
import { commitMessage, type BuildInfo } from '../protocol/build-info.js';
import type { CommandContext } from './context.js';
import type { Git } from '../git/git.js';
import { holderLookup } from '../repo/lock-holders.js';
import type { ResolvedOperation } from '../lock/lock-operation.js';
import { LockPool, type Outcome } from '../lock/lock-pool.js';
import { LockRepository } from '../repo/lock-repository.js';
import { ProgressReporter } from './progress.js';
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
}

export async function runLockOperation(
  ctx: CommandContext,
  operation: ResolvedOperation,
  options: LockRunOptions,
): Promise<Outcome> {
  const { git, home, source, build, waitTimeoutMs } = options;
  const repository = new LockRepository(git, {
    uri: source.uri,
    branch: source.branch,
    pool: source.pool,
    workdir: join(home, 'repository'),
    // A put with a filter waits outside the line (see LockPool.run): it needs no line refs.
    line: operation.kind === 'acquire' && !operation.filter,
  });
  const token = ctx.newToken();
  const started = ctx.clock.now();
  const pool = new LockPool(
    repository,
    ctx.clock,
    new ProgressReporter(
      ctx.log,
      () => ctx.clock.now(),
      holderLookup(git, source, home, ctx.signal, waitTimeoutMs),
    ),
    {
      pool: source.pool,
      retryDelayMs: source.retryDelayMs,
      waitTimeoutMs,
      waitTimeoutSetting: options.waitTimeoutSetting,
      lineToken: token.replace(/[^0-9a-z]/gi, '').toLowerCase(),
      message: ({ subject, claiming, trailers }) =>
        commitMessage(
          subject,
          build,
          claiming
            ? {
                token,
                at: new Date(ctx.clock.now()),
                by: options.claimedBy,
                waitedMs: ctx.clock.now() - started,
              }
            : undefined,
          trailers,
        ),
    },
    ctx.signal,
  );
  const run = runReleasingAbandonedClaim(ctx, pool, source, build, options.claimer);
  ctx.log.info(startLine(operation, source.pool));
  const outcome = await run(operation);
  ctx.log.info(doneLine(operation, outcome.names.join(', '), outcome.ref, outcome.names.length));
  return outcome;
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
