import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  appendCommits,
  claimCommit,
  otherPoolCommits,
  releaseCommit,
} from '../helpers/long-history.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { runScript, tempDir } from '../helpers/run-script.js';
import { source } from '../helpers/source.js';

let repo: LockRepo;
afterEach(async () => repo?.cleanup());

async function check(tmp: string, version?: string): Promise<string[]> {
  const result = await runScript(
    'check',
    { source: source(repo), ...(version ? { version: { ref: version } } : {}) },
    { tmpdir: tmp },
  );
  expect(result.code, result.stderr).toBe(0);
  return (JSON.parse(result.stdout) as { ref: string }[]).map((v) => v.ref);
}

async function cacheFolders(tmp: string): Promise<string[]> {
  return (await readdir(join(tmp, 'pool-resource-check'))).sort();
}

const claim = (name: string) => claimCommit('pool', name);
const release = (name: string) => releaseCommit('pool', name);

describe('check keeps its copy of the branch in TMPDIR', () => {
  it('reuses the copy across runs and sees new commits, oldest first', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a', 'b'] }, other: { unclaimed: ['x'] } });
    const tmp = await tempDir('pool-check-tmp-');
    const initial = await repo.tip();
    expect(await check(tmp)).toEqual([initial]);
    const [folder] = await cacheFolders(tmp);
    expect(folder).toMatch(/^[0-9a-f]{32}$/);
    // Something only a reused copy would still hold on the next run.
    await writeFile(join(tmp, 'pool-resource-check', folder!, 'kept-between-runs'), '');

    const [x1, x2] = otherPoolCommits('other', 'x', 2);
    const [claimA, , releaseA] = await appendCommits(repo.bare, repo.branch, [
      claim('a'),
      x1!,
      release('a'),
      x2!,
    ]);
    expect(await check(tmp, initial)).toEqual([initial, claimA, releaseA]);
    expect(await readdir(join(tmp, 'pool-resource-check', folder!))).toContain('kept-between-runs');
    // No version: only the latest commit that touched the pool.
    expect(await check(tmp)).toEqual([releaseA]);
    expect(await cacheFolders(tmp)).toEqual([folder]);
  });

  it('answers right after the branch was force-pushed', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a', 'b'] } });
    const tmp = await tempDir('pool-check-tmp-');
    const initial = await repo.tip();
    const [claimA, releaseA] = await appendCommits(repo.bare, repo.branch, [
      claim('a'),
      release('a'),
    ]);
    expect(await check(tmp, initial)).toEqual([initial, claimA, releaseA]);

    // Rewrite: back to the first commit, then a different history.
    await git(repo.bare, 'update-ref', `refs/heads/${repo.branch}`, initial);
    const [claimB] = await appendCommits(repo.bare, repo.branch, [claim('b')]);

    // The old version is gone from the branch: only the latest commit, as with no version.
    expect(await check(tmp, releaseA)).toEqual([claimB]);
    expect(await check(tmp, initial)).toEqual([initial, claimB]);
    expect(await check(tmp)).toEqual([claimB]);
  });

  it('reaches past its first window when the pool was quiet for long', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a'] }, other: { unclaimed: ['x'] } });
    const tmp = await tempDir('pool-check-tmp-');
    const [claimA, releaseA] = await appendCommits(repo.bare, repo.branch, [
      claim('a'),
      release('a'),
      ...otherPoolCommits('other', 'x', 300),
    ]);
    expect(await check(tmp)).toEqual([releaseA]);
    expect(await check(tmp, claimA)).toEqual([claimA, releaseA]);

    // Later runs start from the window that answered before, and stay right as it moves.
    const [, claimAgain] = await appendCommits(repo.bare, repo.branch, [
      ...otherPoolCommits('other', 'x', 1),
      claim('a'),
      ...otherPoolCommits('other', 'x', 201).slice(1),
    ]);
    expect(await check(tmp)).toEqual([claimAgain]);
    expect(await check(tmp, releaseA)).toEqual([releaseA, claimAgain]);
    expect(await check(tmp)).toEqual([claimAgain]);
    expect(await check(tmp, claimAgain)).toEqual([claimAgain]);
  });

  it('gives two checks running at once the same right answer', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a'] } });
    const tmp = await tempDir('pool-check-tmp-');
    const [, releaseA] = await appendCommits(repo.bare, repo.branch, [claim('a'), release('a')]);
    const answers = await Promise.all([check(tmp), check(tmp), check(tmp)]);
    expect(answers).toEqual([[releaseA], [releaseA], [releaseA]]);
    expect(await check(tmp)).toEqual([releaseA]);
  });

  it('starts afresh when the cached copy is broken', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a'] } });
    const tmp = await tempDir('pool-check-tmp-');
    const initial = await repo.tip();
    expect(await check(tmp)).toEqual([initial]);
    const [folder] = await cacheFolders(tmp);
    // What a check killed in the middle of a fetch leaves behind.
    await writeFile(join(tmp, 'pool-resource-check', folder!, 'shallow.lock'), '');
    const [claimA] = await appendCommits(repo.bare, repo.branch, [claim('a')]);
    expect(await check(tmp, initial)).toEqual([initial, claimA]);
  });
});
