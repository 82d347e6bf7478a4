// The waiting line, end to end over a real git daemon: puts that wait for a lock take it in the
// order they started, and no put leaves its place behind, whether it acquired, timed out, was
// stopped or was killed outright.
import { chmod, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { startGitDaemon, type GitDaemon } from '../helpers/git-daemon.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { startScript, type RunningScript, type ScriptResult } from '../helpers/run-script.js';
import { stop } from '../helpers/stopping.js';
import { buildFolder, otherClone, refused } from '../helpers/steps.js';
import { renamed, source } from '../helpers/source.js';

let repo: LockRepo;
let daemon: GitDaemon;
const roots: LockRepo[] = [];

beforeAll(async () => {
  repo = await createLockRepo({ pool: { claimed: ['lock-a'] } });
  roots.push(repo);
  daemon = await startGitDaemon(repo.root);
});

afterAll(async () => {
  await daemon.stop();
  for (const root of roots) await root.cleanup();
});

afterEach(async () => {
  // Every test leaves lock-a claimed by the "holder" and nobody in line.
  expect(await lineRefs()).toEqual([]);
});

/** The waiting line's refs on the remote. */
async function lineRefs(): Promise<string[]> {
  const out = await git(repo.bare, 'for-each-ref', '--format=%(refname)', 'refs/pool-resource/');
  return out.split('\n').filter(Boolean);
}

async function acquire(build: string, params: Record<string, unknown> = {}, extra = {}) {
  const run = startScript(
    'out',
    {
      source: source(daemon.url(repo.bare), { retry_delay: '1s', ...extra }),
      params: { acquire: true, ...params },
    },
    { args: [await buildFolder()], env: { BUILD_URL: `https://ci/builds/${build}` } },
  );
  await run.waitForStderr(/waiting in line|waiting without a place/, 20_000);
  return run;
}

function lockName(result: ScriptResult): string {
  return (
    JSON.parse(result.stdout) as { metadata: { name: string; value: string }[] }
  ).metadata.find((item) => item.name === 'lock_name')!.value;
}

async function releaseByHand(): Promise<void> {
  await otherClone(repo).release('lock-a');
}

/** Releases lock-a by hand and expects the waiting put to end with it. */
async function releaseToWaiting(waiting: RunningScript): Promise<void> {
  await releaseByHand();
  const result = await waiting.done;
  expect(result.code, result.stderr).toBe(0);
  expect(lockName(result)).toBe('lock-a');
}

describe('the waiting line', () => {
  it('gives a released lock to the put that has waited longest, each in turn', async () => {
    const waiting: { build: string; run: RunningScript }[] = [];
    for (const build of ['1', '2', '3', '4']) {
      waiting.push({ build, run: await acquire(build) });
      // Polls at a random point of retry_delay: without the line, any of them could win.
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    expect(await lineRefs()).toHaveLength(4);
    const order: string[] = [];
    for (let turn = 0; turn < waiting.length; turn++) {
      await releaseByHand();
      const next = await Promise.race(
        waiting
          .filter(({ build }) => !order.includes(build))
          .map(({ build, run }) => run.done.then((result) => ({ build, result }))),
      );
      expect(next.result.code, next.result.stderr).toBe(0);
      expect(lockName(next.result)).toBe('lock-a');
      order.push(next.build);
    }
    expect(order).toEqual(['1', '2', '3', '4']);
    // The reference's phrase for what a waiting put waits for is kept.
    expect(waiting[3]!.run.stderrSoFar()).toContain(
      'waiting for lock: no unclaimed lock in pool "pool" (1 claimed, 0 unclaimed)',
    );
    expect(waiting[3]!.run.stderrSoFar()).toContain(
      'waiting in line for pool "pool": 3 puts ahead',
    );
  }, 60_000);

  it('takes out of the line a put killed outright, once it leaves a free lock untaken', async () => {
    const killed = await acquire('killed');
    const next = await acquire('next');
    killed.child.kill('SIGKILL');
    await killed.done;
    await releaseByHand();
    const started = Date.now();
    const result = await next.done;
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toMatch(
      /the put ahead in line left a free lock untaken for \S+: taking it out of the line/,
    );
    // Twice retry_delay and 2 s: the killed put could have been only slow until then.
    expect(Date.now() - started).toBeGreaterThanOrEqual(3_500);
  }, 30_000);

  it('hands a free lock over within one grace, however many killed puts stand ahead', async () => {
    const line: RunningScript[] = [];
    for (const build of ['k1', 'k2', 'k3', 'fourth', 'fifth']) {
      line.push(await acquire(build));
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    for (const killed of line.slice(0, 3)) {
      killed.child.kill('SIGKILL');
      await killed.done;
    }
    const [fourth, fifth] = line.slice(3) as [RunningScript, RunningScript];
    await releaseByHand();
    const released = Date.now();
    const result = await fourth.done;
    const freeFor = Date.now() - released;
    expect(result.code, result.stderr).toBe(0);
    expect(lockName(result)).toBe('lock-a');
    expect(result.stderr).toMatch(
      /3 puts ahead in line left a free lock untaken for \S+: taking them out of the line/,
    );
    // One grace (twice retry_delay and 2 s: 4 s) from the release, plus the poll that notices it
    // (a second here, or the release's commit time to the second) and the claim's own time; one
    // after another, the three took 12 s and more.
    process.stderr.write(`a lock freed behind three killed puts was taken after ${freeFor} ms\n`);
    expect(freeFor).toBeGreaterThanOrEqual(3_500);
    expect(freeFor).toBeLessThan(4_000 + 2_000);
    // The fifth, alive and waiting all along, is still in line and is served next.
    expect(await lineRefs()).toHaveLength(1);
    await releaseToWaiting(fifth);
  }, 60_000);

  it('believes an entry no more than three times its own retry_delay, whatever it claims', async () => {
    // An entry pushed by hand (or left by a killed put) claiming `retry_delay: 1h`.
    const tip = (await git(repo.bare, 'rev-parse', 'refs/heads/master')).trim();
    const byHand = `refs/pool-resource/waiting/master/pool/${Date.now() - 60_000}-3600000-byhand`;
    await git(repo.bare, 'update-ref', byHand, tip);
    const waiting = await acquire('behind-1h', {}, { retry_delay: '200ms' });
    expect(waiting.stderrSoFar()).toContain('waiting in line for pool "pool": 1 put ahead');
    await releaseByHand();
    const released = Date.now();
    const result = await Promise.race([
      waiting.done,
      new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 15_000)),
    ]);
    expect(result, 'still waiting after 15 s').toBeDefined();
    expect(result!.code, result!.stderr).toBe(0);
    // 2 × 3 × 200 ms + 2 s (README), plus the claim's own time.
    expect(Date.now() - released).toBeLessThan(3_200 + 1_500);
  }, 30_000);

  it('polls no more often than every 100 ms with retry_delay 0', async () => {
    const connections = () => (daemon.log().match(/Connection from /g) ?? []).length;
    // HEAD names no branch: no kept session sees the branch move, each poll is a connection.
    await git(repo.bare, 'symbolic-ref', 'HEAD', 'refs/heads/elsewhere');
    let polls: number;
    let waiting: RunningScript;
    try {
      waiting = await acquire('no-delay', {}, { retry_delay: '0s' });
      const before = connections();
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      polls = connections() - before;
    } finally {
      await git(repo.bare, 'symbolic-ref', 'HEAD', 'refs/heads/master');
    }
    // Ten a second at most (a spinning put made hundreds).
    expect(polls).toBeLessThanOrEqual(22);
    expect(polls).toBeGreaterThan(0);
    await releaseToWaiting(waiting);
  });

  it('waits behind a held lock at one connection to git daemon, and is served when it is freed', async () => {
    const sessions = () => (daemon.log().match(/Request upload-pack /g) ?? []).length;
    const waiting = await acquire('kept-session', {}, { retry_delay: '100ms' });
    const before = sessions();
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    // Twenty polls, on one upload-pack session kept for the wait (git/daemon-session.ts).
    expect(sessions() - before).toBeLessThanOrEqual(1);
    await releaseToWaiting(waiting);
  });

  it('follows the puts ahead taking their turns on its kept session, with no look at the line', async () => {
    const uploads = () => (daemon.log().match(/Request upload-pack /g) ?? []).length;
    const line: RunningScript[] = [];
    for (const build of ['turn-1', 'turn-2', 'turn-3'])
      line.push(await acquire(build, {}, { retry_delay: '100ms' }));
    const before = uploads();
    // Each release goes to the put first in line; the puts behind it read its claim (and its
    // leaving the line, in the same push) from the commits they fetch on their sessions.
    for (const put of line) await releaseToWaiting(put);
    expect(uploads() - before).toBe(0);
  });

  it('leaves the line when stopped, still ending within a second', async () => {
    const waiting = await acquire('stopped');
    expect(await lineRefs()).toHaveLength(1);
    const stopped = await stop(waiting, 'SIGTERM');
    expect(stopped.code).toBe(143);
    expect(stopped.eofAfterSignal).toBeLessThan(1000);
  });

  it('stopped while it waits on its kept session, ends within a second and leaves no session open', async () => {
    /** git daemon's children (one per connection) that have not said they disconnected. */
    const open = () => {
      const log = daemon.log();
      const pids = (pattern: RegExp) => new Set([...log.matchAll(pattern)].map((m) => m[1]));
      const ended = pids(/\[(\d+)\] Disconnected/g);
      return [...pids(/\[(\d+)\] Connection from/g)].filter((pid) => !ended.has(pid));
    };
    const waiting = await acquire('stopped-on-session', {}, { retry_delay: '100ms' });
    // Polls on the session a while: the put's one open connection.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(open()).toHaveLength(1);
    const stopped = await stop(waiting, 'SIGTERM');
    expect(stopped.code).toBe(143);
    expect(stopped.exitAfterSignal).toBeLessThan(1000);
    expect(stopped.eofAfterSignal).toBeLessThan(1000);
    // Its leaving push came and went; the session's upload-pack ended with the put.
    expect(await eventually(() => open().length === 0, 2_000)).toBe(true);
  });

  it('leaves the line when wait_timeout ends the wait', async () => {
    const waiting = await acquire('timed-out', { wait_timeout: '2s' });
    const result = await waiting.done;
    refused(result, /timed out after 2s \(params.wait_timeout\) waiting/);
  });
});

describe('refs in the line that no put made', () => {
  it('are no entries, and never taken for the branch tip', async () => {
    // An unrelated commit under the line's prefix, named unlike any entry.
    const stray = 'refs/pool-resource/waiting/master/pool/stray';
    const commit = (await git(repo.work, 'commit-tree', '-m', 'stray', 'HEAD^{tree}')).trim();
    await git(repo.work, 'push', '--quiet', 'origin', `${commit}:${stray}`);
    try {
      const waiting = await acquire('beside-stray');
      expect(waiting.stderrSoFar()).toContain('waiting in line for pool "pool": first');
      await releaseToWaiting(waiting);
      expect((await repo.subjects())[0]).toBe('claiming: lock-a');
    } finally {
      await git(repo.bare, 'update-ref', '-d', stray);
    }
  });
});

describe('an entry whose claim the branch already carries', () => {
  it('is no put ahead: a listing that ran while that claim landed still showed it', async () => {
    // The tip is the claim of a put in line, whose push took its entry out with it; a listing of
    // the refs taken while that push landed shows the new tip with the entry still there.
    const hand = otherClone(repo);
    await hand.add('lock-b');
    await hand.add('lock-c');
    await repo.commit('claiming: lock-c\n\nClaim-Token: gone-1', async (work) =>
      rename(join(work, 'pool/unclaimed/lock-c'), join(work, 'pool/claimed/lock-c')),
    );
    const entry = `refs/pool-resource/waiting/master/pool/${Date.now() - 60_000}-1000-gone1`;
    await git(repo.bare, 'update-ref', entry, await repo.tip());
    try {
      const result = await startScript(
        'out',
        {
          source: source(daemon.url(repo.bare), { retry_delay: '1s' }),
          params: { acquire: true },
        },
        { args: [await buildFolder()], env: { BUILD_URL: 'https://ci/builds/beside-gone' } },
      ).done;
      // Served at once: not held back for the put that is gone, nor taken for gone after a grace.
      expect(result.code, result.stderr).toBe(0);
      expect(lockName(result)).toBe('lock-b');
      expect(result.stderr).not.toMatch(/waiting in line|taking it out of the line/);
    } finally {
      await git(repo.bare, 'update-ref', '-d', entry);
      await hand.remove('lock-b');
      await hand.remove('lock-c');
    }
  });
});

describe('a lock repository without atomic pushes', () => {
  it('claims first and then leaves the line in a push of its own', async () => {
    await git(repo.bare, 'config', 'receive.advertiseAtomic', 'false');
    try {
      const waiting = await acquire('no-atomic');
      expect(await lineRefs()).toHaveLength(1);
      await releaseToWaiting(waiting);
    } finally {
      await git(repo.bare, 'config', '--unset', 'receive.advertiseAtomic');
    }
  });
});

describe('the puts further back in line over git://', () => {
  /** The connections git daemon saw that asked for protocol v2: git itself asks v0 over git://. */
  const v2Sessions = () => daemon.log().match(/"protocol": version=2/g)?.length ?? 0;

  /**
   * Four puts wait 1.6 s behind the holder of lock-a while the branch moves three times (commits
   * that free nothing), then stop; the v2 sessions meanwhile. The repository's HEAD names another
   * branch: no kept session can follow the pool's (git/daemon-session.ts), so the puts look.
   */
  async function lookedWithoutGit(extra: Record<string, unknown> = {}): Promise<number> {
    await git(repo.bare, 'symbolic-ref', 'HEAD', 'refs/heads/elsewhere');
    try {
      const waiting: RunningScript[] = [];
      for (const build of ['a', 'b', 'c', 'd'])
        waiting.push(await acquire(`back-${build}`, {}, { retry_delay: '200ms', ...extra }));
      const before = v2Sessions();
      for (let move = 0; move < 3; move++) {
        await new Promise((resolve) => setTimeout(resolve, 400));
        await repo.commit('a change that frees no lock', async () => undefined);
      }
      await new Promise((resolve) => setTimeout(resolve, 400));
      const sessions = v2Sessions() - before;
      for (const run of waiting) expect((await stop(run, 'SIGTERM')).code).toBe(143);
      return sessions;
    } finally {
      await git(repo.bare, 'symbolic-ref', 'HEAD', 'refs/heads/master');
    }
  }

  it('look at the branch and the line without git, a v2 session each', async () => {
    // Each put's first fetch opened a session, before these; its first question ended it.
    expect(await lookedWithoutGit()).toBeGreaterThanOrEqual(2);
  });

  it('leave the looks to git when git_config may send git elsewhere (url.<base>.insteadOf)', async () => {
    // The same daemon under another name: git goes where the rewrite says, and so must the looks.
    expect(await lookedWithoutGit(renamed(daemon.url(repo.bare)))).toBe(0);
  });
});

describe('a lock repository that refuses the line', () => {
  it('still hands the lock over, waiting as the reference does', async () => {
    const hook = join(repo.bare, 'hooks', 'pre-receive');
    await writeFile(
      hook,
      [
        '#!/bin/sh',
        'while read old new ref; do',
        '  case "$ref" in refs/pool-resource/*) echo "only branches here" >&2; exit 1;; esac',
        'done',
      ].join('\n'),
    );
    await chmod(hook, 0o755);
    try {
      const waiting = await acquire('no-line');
      expect(waiting.stderrSoFar()).toContain("the lock repository refused the waiting line's ref");
      await releaseToWaiting(waiting);
    } finally {
      await writeFile(hook, '#!/bin/sh\nexit 0\n');
    }
  });
});
