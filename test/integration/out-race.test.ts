// Two builds racing for one free lock over git://, as the reference's own test does: exactly one
// gets it, the other waits and gets it after the release, and neither says "err" (losing a race
// is normal, and pipelines grep their logs for it).
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startGitDaemon, type GitDaemon } from '../helpers/git-daemon.js';
import { createLockRepo, type LockRepo } from '../helpers/lock-repo.js';
import {
  runScript,
  startScript,
  type RunningScript,
  type ScriptResult,
} from '../helpers/run-script.js';
import { buildFolder, lockResponse, otherClone, refused, succeeded } from '../helpers/steps.js';
import { source as lockSource } from '../helpers/source.js';

let repo: LockRepo;
let daemon: GitDaemon;

beforeEach(async () => {
  repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
  daemon = await startGitDaemon(repo.root);
});
afterEach(async () => {
  await daemon.stop();
  await repo.cleanup();
});

// Integer nanoseconds, as the reference's own tests send it (100ms).
const source = () => lockSource(daemon.url(repo.bare), { retry_delay: 100_000_000 });

/** Starts `count` acquiring puts at the same moment. */
async function acquirers(count: number): Promise<RunningScript[]> {
  const folders = await Promise.all(Array.from({ length: count }, () => buildFolder()));
  return folders.map((src) =>
    startScript('out', { source: source(), params: { acquire: true } }, { args: [src] }),
  );
}

/** Resolves with the first of the runs to exit, and its index. */
function firstToFinish(runs: RunningScript[]) {
  return Promise.race(runs.map((run, index) => run.done.then((result) => ({ result, index }))));
}

describe('two acquirers on one free lock over git daemon', () => {
  it('exactly one gets it; the other waits, then gets it after the release', async () => {
    const runs = await acquirers(2);
    const first = await firstToFinish(runs);
    const winner = first.result;
    const loser = runs[1 - first.index]!;

    expect(succeeded(winner)).toEqual(lockResponse(await repo.tip(), 'lock-a'));
    expect(await repo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });
    // The other one is still running, waiting for a lock to come free.
    await loser.waitForStderr(/waiting for lock/);
    expect(loser.child.exitCode).toBeNull();
    expect(await repo.subjects()).toEqual(['claiming: lock-a', 'initial pools']);

    const release = await runScript(
      'out',
      { source: source(), params: { release: 'held' } },
      { args: [await buildFolder({ held: { name: 'lock-a' } })] },
    );
    succeeded(release);
    const second = await loser.done;
    expect(succeeded(second)).toEqual(lockResponse(await repo.tip(), 'lock-a'));
    expect(await repo.subjects()).toEqual([
      'claiming: lock-a',
      'unclaiming: lock-a',
      'claiming: lock-a',
      'initial pools',
    ]);

    for (const result of [winner, second, release]) expect(result.stderr).not.toMatch(/err/i);
    expect(second.stderr).toContain('acquired!');
  });

  it('stays exact when several builds race at once', async () => {
    // Three locks, four builds: three get one each, none gets the same lock twice.
    await repo.commit('more locks', async (work) => {
      await writeFile(join(work, 'pool', 'unclaimed', 'lock-b'), 'b\n');
      await writeFile(join(work, 'pool', 'unclaimed', 'lock-c'), 'c\n');
    });
    const runs = await acquirers(4);
    // Wait until three have finished; the fourth must be waiting.
    const settled: ScriptResult[] = [];
    await new Promise<void>((resolve) => {
      for (const run of runs)
        void run.done.then((result) => {
          if (settled.push(result) === 3) resolve();
        });
    });
    const finished = settled
      .slice(0, 3)
      .map((result) => (succeeded(result) as ReturnType<typeof lockResponse>).metadata[0]!.value);
    expect(finished.sort()).toEqual(['lock-a', 'lock-b', 'lock-c']);
    expect(await repo.state('pool')).toEqual({
      claimed: ['lock-a', 'lock-b', 'lock-c'],
      unclaimed: [],
    });
    const waiting = runs.filter((run) => run.child.exitCode === null);
    expect(waiting).toHaveLength(1);
    await waiting[0]!.waitForStderr(/waiting for lock/);
    for (const run of runs) expect(run.stderrSoFar()).not.toMatch(/err/i);
    waiting[0]!.child.kill('SIGTERM');
    await waiting[0]!.done;
  });
});

describe('two releases at once over git daemon', () => {
  it('both land: the one that loses the race starts again from the new tip, fetched on its session', async () => {
    await otherClone(repo).claim('lock-a');
    await repo.commit('adding claimed: lock-b', (work) =>
      writeFile(join(work, 'pool', 'claimed', 'lock-b'), 'b\n'),
    );
    // Each push waits on the server before its update: the two releases push from the same tip,
    // and the second update finds the branch moved.
    const hook = join(repo.bare, 'hooks', 'pre-receive');
    await writeFile(hook, '#!/bin/sh\nsleep 1\n', { mode: 0o755 });
    const releases = await Promise.all(
      ['lock-a', 'lock-b'].map(async (name) =>
        runScript(
          'out',
          { source: source(), params: { release: 'held' } },
          { args: [await buildFolder({ held: { name } })] },
        ),
      ),
    );
    for (const result of releases) succeeded(result);
    expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a', 'lock-b'] });
    const lost = releases.filter((result) => result.stderr.includes('the pool changed'));
    expect(lost).toHaveLength(1);
    // One fetch each, on the session of its first: the loser asks for the tip that won on it.
    expect(daemon.log().match(/Request upload-pack /g)).toHaveLength(2);
    expect((await repo.subjects()).slice(0, 2).sort()).toEqual([
      'unclaiming: lock-a',
      'unclaiming: lock-b',
    ]);
  });
});

describe('when the git server is unreachable', () => {
  it('retries a bounded number of times, then reports git’s own message', async () => {
    const uri = daemon.url(repo.bare);
    await daemon.stop();
    const result = await runScript(
      'out',
      { source: { ...source(), uri }, params: { acquire: true } },
      { args: [await buildFolder()] },
    );
    refused(
      result,
      // An acquire's first fetch brings the tip and the waiting line (a clone could not).
      /gave up after 5 attempts: git fetch failed \(exit 128\): .*Connection refused/,
    );
    expect(result.stderr.match(/trying again in/g)).toHaveLength(4);
    expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a'] });
  });
});
