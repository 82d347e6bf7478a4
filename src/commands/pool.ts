// `pool`: the command-line tool for people, over the same core as `out` (LockPool, LockRepository,
// decide) and the same `source`. Returns stdout's text; everything else goes to the logger.
import { readFile, writeFile } from 'node:fs/promises';
import { hostname, userInfo } from 'node:os';
import { join } from 'node:path';
import { commitMessage, type BuildInfo } from '../protocol/build-info.js';
import type { CommandContext } from '../run/context.js';
import { parseGoDuration } from '../base/duration.js';
import { ConfigurationError, formatMs } from '../base/errors.js';
import { lockFilter } from '../base/lock-match.js';
import type { Git } from '../git/git.js';
import {
  LockHolders,
  PROGRESS_MAX_DEPTH,
  formatInstant,
  type LockRecord,
} from '../repo/lock-holders.js';
import { printable, showable } from '../base/lock-name.js';
import { readPoolHistory } from '../repo/pool-history.js';
import { buildReport, reportHtml } from './pool/report.js';
import { shortHolder } from './pool/holder.js';
import type { ResolvedOperation } from '../lock/lock-operation.js';
import type { Source } from '../protocol/request.js';
import { lockResponse, openSession, reapResponse, registerSecrets } from '../run/session.js';
import { parsePoolArguments, type Invocation } from './pool/arguments.js';
import { initPool } from '../repo/pool-init.js';
import { sourceFromFlags } from './pool/source.js';
import { lineTable, statusEntries, statusTable } from './pool/status.js';
import { LockRepository } from '../repo/lock-repository.js';
import { goneAtRest } from '../lock/waiting-line.js';
import { runLockOperation } from '../run/lock-run.js';
import { ProgressReporter } from '../run/progress.js';

type Run = Exclude<Invocation, { kind: 'help' }>;

export async function runPool(ctx: CommandContext): Promise<string> {
  const invocation = parsePoolArguments(ctx.args);
  if (invocation.kind === 'help') return invocation.text;
  const { request: source, warnings } = await sourceFromFlags(invocation.source);
  registerSecrets(source, ctx);
  for (const warning of warnings) ctx.log.info(warning);
  const by = invocation.by ?? operator(ctx.env);
  // Everything the person typed is checked before any git work.
  const waitTimeoutMs = durationFlag('--wait-timeout', invocation.waitTimeout);
  const metadata = await metadataFile(invocation.metadataFile);
  const sinceMs = durationFlag('--since', invocation.since) ?? DEFAULT_REPORT_WINDOW_MS;
  const olderThanMs = durationFlag('--older-than', invocation.olderThan);

  const { git, environment } = await openSession(source, ctx);
  switch (invocation.kind) {
    case 'status':
      return status(ctx, git, source, environment.home, invocation);
    case 'report':
      return report(ctx, git, source, environment.home, {
        html: invocation.html,
        json: invocation.json,
        sinceMs: sinceMs,
      });
    case 'init':
      return init(ctx, git, source, environment.home, invocation.locks, by);
    case 'reap': {
      const outcome = await runLockOperation(
        ctx,
        { kind: 'reap', dryRun: invocation.dryRun, olderThanMs },
        {
          git,
          home: environment.home,
          source,
          build: handBuild(by),
          waitTimeoutMs: undefined,
          claimedBy: by,
          claimer: 'the pool command',
        },
      );
      return invocation.json
        ? `${JSON.stringify(reapResponse(outcome.ref, invocation.dryRun ? [] : outcome.names, source.pool))}\n`
        : '';
    }
    case 'acquire':
    case 'claim':
    case 'release':
    case 'remove':
    case 'add':
    case 'update': {
      const operation: ResolvedOperation =
        invocation.kind === 'acquire'
          ? acquiring(invocation, source)
          : invocation.kind === 'add'
            ? { kind: invocation.claimed ? 'add_claimed' : 'add', name: invocation.name, metadata }
            : invocation.kind === 'update'
              ? { kind: 'update', name: invocation.name, metadata }
              : { kind: invocation.kind, name: invocation.name };
      const session = { git, home: environment.home };
      // Whose claim a release ends, looked up before it is gone from the tip.
      const ended =
        invocation.kind === 'release'
          ? await claimOf(git, source, environment.home, invocation.name, ctx.signal)
          : undefined;
      if (invocation.kind === 'release' && !invocation.force)
        refuseLeasedRelease(invocation.name, ended, source.leaseGraceMs, ctx.clock.now());
      const printed = await change(ctx, session, source, operation, {
        ...invocation,
        by,
        waitTimeoutMs,
      });
      if (invocation.kind === 'release')
        ctx.log.info(releasedLine(invocation.name, ended, ctx.clock.now()));
      return printed;
    }
  }
}

/** An acquire and its filter: each of --match and --match-name replaces the source file's. */
function acquiring(invocation: Run, source: Source): ResolvedOperation {
  const filter = lockFilter(
    invocation.match ?? source.match,
    invocation.matchName ?? source.matchName,
  );
  return {
    kind: 'acquire',
    ...(invocation.count === undefined ? {} : { count: invocation.count }),
    ...(filter ? { filter } : {}),
    // reclaim_expired from the --source file, as for a put of that resource.
    ...(source.reclaimExpired ? { reclaimExpired: true } : {}),
  };
}

/** Who a claim made by hand belongs to: `$USER@HOSTNAME` unless --by says otherwise. */
function operator(env: CommandContext['env']): string {
  let user = env.USER || env.LOGNAME;
  if (!user) {
    try {
      user = userInfo().username;
    } catch {
      user = 'unknown';
    }
  }
  return `${user}@${hostname()}`;
}

/** Commits made by hand carry no build URL; the line says where they came from instead. */
function handBuild(by: string): BuildInfo {
  return { url: `none (pool command by ${by})` };
}

function durationFlag(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const parsed = parseGoDuration(value);
  if ('error' in parsed)
    throw new ConfigurationError([`error: ${flag}: ${printable(parsed.error)}`]);
  if (parsed.ms <= 0) throw new ConfigurationError([`error: ${flag} must be more than zero`]);
  return parsed.ms;
}

async function metadataFile(path: string | undefined): Promise<Buffer> {
  if (path === undefined) return Buffer.alloc(0);
  try {
    return await readFile(path);
  } catch (error) {
    const code = (error as { code?: string }).code ?? 'unreadable';
    throw new ConfigurationError([`error: cannot read --metadata "${printable(path)}" (${code})`]);
  }
}

async function status(
  ctx: CommandContext,
  git: Git,
  source: Source,
  home: string,
  options: { json: boolean; wide: boolean },
): Promise<string> {
  const { json, wide } = options;
  // The whole history if need be: a person asked, once, and wants every holder.
  const holders = new LockHolders(git, {
    uri: source.uri,
    branch: source.branch,
    pool: source.pool,
    gitDir: join(home, 'holders.git'),
  });
  await holders.refresh();
  const entries = statusEntries(await holders.records(await holders.locks()));
  if (json) return `${JSON.stringify(entries, null, 2)}\n`;
  if (entries.length === 0) ctx.log.info(`pool "${source.pool}" has no locks`);
  const now = ctx.clock.now();
  const table = statusTable(entries, now, wide);
  // The waiting line: one ls-remote, and the tip's time from the copy just fetched.
  const { tip, line } = await new LockRepository(git, {
    uri: source.uri,
    branch: source.branch,
    pool: source.pool,
    workdir: join(home, 'repository'),
  }).look();
  if (line.length === 0 || tip === undefined) return table;
  const committed = await git
    .run(['show', '--no-patch', '--format=%ct', tip], { cwd: join(home, 'holders.git') })
    .then(
      (out) => Number(out.trim()) * 1000 || undefined,
      () => undefined,
    );
  // What out can take: a file whose name out refuses is not a free lock.
  const free = entries.filter((entry) => entry.state === 'unclaimed' && !entry.problem).length;
  const gone = goneAtRest(line, { free, tip, tipTime: committed }, now, source.retryDelayMs);
  return `${table}\n${lineTable(line, gone, now, wide)}`;
}

/** `pool report`'s window when --since is not given: a week, long enough to see the habits. */
const DEFAULT_REPORT_WINDOW_MS = 7 * 24 * 3_600_000;

async function report(
  ctx: CommandContext,
  git: Git,
  source: Source,
  home: string,
  options: { html: string | undefined; json: boolean; sinceMs: number },
): Promise<string> {
  const until = ctx.clock.now();
  const since = until - options.sinceMs;
  // The current holders as `pool status` finds them (a claim may predate the window), bounded as
  // the progress of a waiting put is, so a long history costs no more than a few fetches.
  const lookup = new LockHolders(git, {
    uri: source.uri,
    branch: source.branch,
    pool: source.pool,
    gitDir: join(home, 'holders.git'),
    maxDepth: PROGRESS_MAX_DEPTH,
  });
  await lookup.refresh(ctx.signal);
  const locks = await lookup.locks(ctx.signal);
  const records = await lookup.records(
    locks.filter((lock) => lock.state === 'claimed'),
    ctx.signal,
  );
  const holders = await Promise.all(
    records.map(async (record) => ({
      name: record.name,
      by: record.by,
      since: record.since,
      leaseExpires: record.leaseExpires,
      trailers: record.commit
        ? await git.run(['log', '-1', '--format=%(trailers:only,unfold)', record.commit], {
            cwd: join(home, 'holders.git'),
            signal: ctx.signal,
          })
        : '',
    })),
  );
  const history = await readPoolHistory(
    git,
    {
      uri: source.uri,
      branch: source.branch,
      pool: source.pool,
      gitDir: join(home, 'history.git'),
      since,
    },
    ctx.signal,
  );
  const { line } = await new LockRepository(git, {
    uri: source.uri,
    branch: source.branch,
    pool: source.pool,
    workdir: join(home, 'repository'),
  }).look();
  const built = buildReport({ pool: source.pool, history, locks, holders, line, since, until });
  if (options.html !== undefined) {
    try {
      await writeFile(options.html, reportHtml(built));
    } catch (error) {
      const code = (error as { code?: string }).code ?? 'unwritable';
      throw new ConfigurationError([
        `error: cannot write --html "${printable(options.html)}" (${code})`,
      ]);
    }
    ctx.log.info(
      `wrote the report of pool "${source.pool}" since ${built.figures.since} to ${printable(options.html)} (${history.commits} commits read)`,
    );
  }
  return options.json ? `${JSON.stringify(built.figures, null, 2)}\n` : '';
}

/** The claim a release is about to end, as the claiming commit tells it. */
async function claimOf(
  git: Git,
  source: Source,
  home: string,
  name: string,
  signal: AbortSignal,
): Promise<LockRecord | undefined> {
  const lookup = new LockHolders(git, {
    uri: source.uri,
    branch: source.branch,
    pool: source.pool,
    gitDir: join(home, 'released.git'),
    maxDepth: PROGRESS_MAX_DEPTH,
  });
  try {
    await lookup.refresh(signal);
    const [record] = await lookup.records([{ name, state: 'claimed' }], signal);
    return record?.by ? record : undefined;
  } catch {
    // The release itself says what is wrong (not claimed, no such pool, no access).
    return undefined;
  }
}

/**
 * A claim under a lease that has not run out belongs to a build that may still be working (SPEC
 * §10): releasing it by hand would let another build take the lock under it. --force says so.
 */
function refuseLeasedRelease(
  name: string,
  claim: LockRecord | undefined,
  graceMs: number,
  now: number,
): void {
  const lease = claim?.leaseExpires;
  if (!lease || now > lease.getTime() + graceMs) return;
  throw new ConfigurationError([
    `error: lock "${showable(name)}" is claimed by ${showable(shortHolder(claim.by ?? 'unknown'))} under a lease until ${formatInstant(lease)}: its holder renews or releases it (pool reap takes it once the lease is over); --force releases it anyway`,
  ]);
}

/** `released "a" (claimed by team/pipeline/job #12 since 2026-…Z, 3m ago)`. */
function releasedLine(name: string, claim: LockRecord | undefined, now: number): string {
  const released = `released "${showable(name)}"`;
  if (!claim?.by) return `${released} (its claiming commit was not found)`;
  const since = claim.since
    ? ` since ${formatInstant(claim.since)}, ${formatMs(Math.max(0, now - claim.since.getTime()))} ago`
    : '';
  return `${released} (claimed by ${showable(shortHolder(claim.by))}${since})`;
}

async function init(
  ctx: CommandContext,
  git: Git,
  source: Source,
  home: string,
  locks: string[],
  by: string,
): Promise<string> {
  ctx.log.info(`initializing pool: ${source.pool}`);
  const reporter = new ProgressReporter(ctx.log, () => ctx.clock.now());
  const result = await initPool(
    git,
    {
      uri: source.uri,
      branch: source.branch,
      pool: source.pool,
      locks,
      workdir: join(home, 'repository'),
      message: commitMessage(`initializing pool: ${source.pool}`, handBuild(by)),
    },
    {
      clock: ctx.clock,
      signal: ctx.signal,
      onTransient: (error, attempt, delayMs) => reporter.transient(error, attempt, delayMs),
    },
  );
  if (result.kind === 'unchanged') {
    ctx.log.info(
      `pool "${source.pool}" already exists on branch "${source.branch}": nothing to do`,
    );
    return '';
  }
  const details = [
    result.createdBranch ? `created branch "${source.branch}"` : undefined,
    result.added.length > 0 ? `added unclaimed ${result.added.join(', ')}` : undefined,
  ].filter(Boolean);
  ctx.log.info(
    `initialized! pool: ${source.pool}${details.length ? ` (${details.join('; ')})` : ''} (commit ${result.ref.slice(0, 12)})`,
  );
  return '';
}

async function change(
  ctx: CommandContext,
  session: { git: Git; home: string },
  source: Source,
  operation: ResolvedOperation,
  options: Run & { by: string; waitTimeoutMs: number | undefined },
): Promise<string> {
  const { git, home } = session;
  const outcome = await runLockOperation(ctx, operation, {
    git,
    home,
    source,
    build: handBuild(options.by),
    waitTimeoutMs: options.waitTimeoutMs,
    // Here the person typed a flag, not the put's parameter.
    waitTimeoutSetting: '--wait-timeout',
    claimedBy: options.by,
    claimer: 'the pool command',
    leaseMs: source.leaseMs,
  });
  return options.json
    ? `${JSON.stringify(lockResponse(outcome.ref, outcome.name, source.pool, outcome.names))}\n`
    : '';
}
