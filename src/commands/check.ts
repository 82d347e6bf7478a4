// `check`: the commits on the branch that touched the pool, oldest first.
import { createHash } from 'node:crypto';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CommandContext } from '../run/context.js';
import { GitCommandError, describeError } from '../base/errors.js';
import { parseCheckRequest } from '../protocol/request.js';
import { openSession, readRequest } from '../run/session.js';
import { BranchHistory } from '../repo/branch-history.js';
import { takeCachedCopy } from '../repo/check-cache.js';

/**
 * Commits fetched from the tip. Checks run every minute or so, so the previous version is
 * nearly always inside; the window widens fourfold when it is not.
 */
const CHECK_WINDOW = 32;

export async function runCheck(ctx: CommandContext) {
  const request = await readRequest(ctx, parseCheckRequest);
  const { source, version } = request;
  const { git, environment } = await openSession(source, ctx);
  const cached = await takeCachedCopy(ctx.env.TMPDIR, source.uri, source.branch, () =>
    ctx.clock.now(),
  );
  ctx.onExit(async () => cached?.release());
  const reused = cached !== undefined && (await isRepository(cached.dir));
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
    const history = new BranchHistory(git, dir, source.uri, source.branch);
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
}

async function readWindow(path: string): Promise<number> {
  const text = await readFile(path, 'utf8').catch(() => '');
  const window = Number.parseInt(text, 10);
  return Number.isSafeInteger(window) && window >= CHECK_WINDOW ? window : CHECK_WINDOW;
}

function hash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 16);
}

async function isRepository(dir: string): Promise<boolean> {
  return stat(join(dir, 'HEAD')).then(
    () => true,
    () => false,
  );
}
