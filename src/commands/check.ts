// `check`: the commits on the branch that touched the pool, oldest first (those of the kinds and
// locks that check_events and check_locks name, when set).
import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CommandContext } from '../run/context.js';
import { GitCommandError, describeError } from '../base/errors.js';
import { nodeCrypto } from '../base/lazy-builtins.js';
import { parseCheckRequest } from '../protocol/request.js';
import { keptSession, openSession, readRequest } from '../run/session.js';
import { BranchHistory, type CommitTest } from '../repo/branch-history.js';
import { takeCachedCopy } from '../repo/check-cache.js';
import { commitFilter } from '../repo/pool-events.js';

/**
 * Commits fetched from the tip. Checks run every minute or so, so the previous version is
 * nearly always inside; the window widens fourfold when it is not.
 */
const CHECK_WINDOW = 32;

export async function runCheck(ctx: CommandContext) {
  const request = await readRequest(ctx, parseCheckRequest);
  const { source, version } = request;
  const { git, environment } = await openSession(source, ctx);
  const matches = commitFilter(source.pool, {
    events: source.checkEvents,
    locks: source.checkLocks,
  });
  const cached = await takeCachedCopy(ctx.env.TMPDIR, source.uri, source.branch, () =>
    ctx.clock.now(),
  );
  ctx.onExit(async () => cached?.release());
  const reused = cached !== undefined && (await isRepository(cached.dir));
  const session = keptSession(source, ctx);
  try {
    return await answer(cached?.dir ?? join(environment.home, 'repository'));
  } catch (error) {
    if (!cached || !reused || !(error instanceof GitCommandError)) throw error;
    // A run killed mid-fetch can leave the copy unusable (a stale shallow.lock, say): drop it
    // and answer from nothing rather than fail every check from now on. When the remote is what
    // failed, starting afresh would only fail again: report the remote's own words.
    if (!(await reachable())) throw error;
    ctx.log.info(`the cached copy of the branch failed (${describeError(error)}): starting afresh`);
    await cached.discard();
    return await answer(cached.dir);
  } finally {
    await cached?.release();
  }

  async function reachable(): Promise<boolean> {
    return git.run(['ls-remote', '--heads', '--', source.uri]).then(
      () => true,
      () => false,
    );
  }

  async function answer(dir: string) {
    const history = new BranchHistory(git, dir, source.uri, source.branch, { session });
    if (matches) return answerFiltered(dir, history, matches);
    // A pool that is quiet while others keep the branch busy needs a wide window every time:
    // start from the one that answered last time (halving it when it proved wider than needed).
    const remembered = join(dir, `pool-resource-window-${hash(source.pool)}`);
    const start = cached ? await readWindow(remembered) : CHECK_WINDOW;
    await history.fetch(start);
    const commits = await history.poolCommits(source.pool, version);
    if (cached) {
      const next = history.window > start ? history.window : Math.floor(start / 2);
      await writeFile(remembered, `${Math.max(CHECK_WINDOW, next)}\n`);
    }
    return commits.map((ref) => ({ ref }));
  }

  /**
   * With check_events or check_locks. A filter that rarely matches would send every check back
   * through the whole history for its latest match; the cached copy keeps what the last check
   * found instead (the tip it read, the newest match up to it), so the next one reads only the
   * commits after that tip. Its own window and record: a resource with another filter, or none,
   * on the same branch shares the copy but not these.
   */
  async function answerFiltered(dir: string, history: BranchHistory, matches: CommitTest) {
    const key = hash(JSON.stringify([source.pool, source.checkEvents, source.checkLocks ?? null]));
    const remembered = join(dir, `pool-resource-window-${key}`);
    const recordFile = join(dir, `pool-resource-matches-${key}`);
    const record = cached ? await readMatchRecord(recordFile) : undefined;
    const start = cached ? await readWindow(remembered) : CHECK_WINDOW;
    await history.fetch(start);
    // Concourse asks from the newest version it has: the last match this resource reported. It
    // is on the branch when the tip recorded with it still is.
    const known = record && (version === undefined || version.toLowerCase() === record.latest);
    const since = known ? await history.matchingSince(source.pool, matches, record.tip) : undefined;
    let commits: string[];
    /** The newest match up to the tip ('' for none), when this check learnt it. */
    let latest: string | undefined;
    if (record && since) {
      latest = since.at(-1) ?? record.latest;
      commits = version === undefined ? [latest].filter(Boolean) : [record.latest, ...since];
    } else {
      const from = version === undefined ? undefined : await history.findOnBranch(version);
      if (from === undefined) {
        latest = (await history.latestMatching(source.pool, matches)) ?? '';
        commits = [latest].filter(Boolean);
      } else {
        commits = await history.matchingFrom(source.pool, matches, from);
        latest = commits.at(-1);
      }
    }
    if (cached) {
      if (latest !== undefined) await writeFile(recordFile, `${history.tip} ${latest}\n`);
      // A search that reached far back for the first match is not repeated: the record spares
      // the next check from it, so its window need not be remembered.
      const searched = since === undefined && latest !== undefined;
      const next = searched
        ? CHECK_WINDOW
        : history.window > start
          ? history.window
          : Math.floor(start / 2);
      await writeFile(remembered, `${Math.max(CHECK_WINDOW, next)}\n`);
    }
    return commits.map((ref) => ({ ref }));
  }
}

/** What a filtered check found: the tip it read, and the newest match up to it ('' for none). */
interface MatchRecord {
  tip: string;
  latest: string;
}

async function readMatchRecord(path: string): Promise<MatchRecord | undefined> {
  const text = await readFile(path, 'utf8').catch(() => '');
  const match = /^([0-9a-f]{40,64}) ([0-9a-f]{40,64})?\n$/.exec(text);
  return match ? { tip: match[1]!, latest: match[2] ?? '' } : undefined;
}

async function readWindow(path: string): Promise<number> {
  const text = await readFile(path, 'utf8').catch(() => '');
  const window = Number.parseInt(text, 10);
  return Number.isSafeInteger(window) && window >= CHECK_WINDOW ? window : CHECK_WINDOW;
}

function hash(text: string): string {
  return nodeCrypto().createHash('sha256').update(text).digest('hex').slice(0, 16);
}

async function isRepository(dir: string): Promise<boolean> {
  return stat(join(dir, 'HEAD')).then(
    () => true,
    () => false,
  );
}
