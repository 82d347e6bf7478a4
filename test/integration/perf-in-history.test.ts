import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  appendCommits,
  claimCommit,
  otherPoolCommits,
  releaseCommit,
} from '../helpers/long-history.js';
import { createLockRepo, type LockRepo } from '../helpers/lock-repo.js';
import { runScript, tempDir } from '../helpers/run-script.js';
import { source } from '../helpers/source.js';

let repo: LockRepo;
afterEach(async () => repo?.cleanup());

async function get(version: string, params: Record<string, unknown> = {}) {
  const dest = await tempDir('pool-in-');
  const result = await runScript(
    'in',
    { source: source(repo), version: { ref: version }, params },
    { args: [dest] },
  );
  const read = (file: string) => readFile(join(dest, file)).catch(() => undefined);
  return { result, name: await read('name'), metadata: await read('metadata') };
}

const claim = (name: string) => claimCommit('pool', name);
const release = (name: string) => releaseCommit('pool', name);

describe('in, deep in a long history', () => {
  it('finds a claim hundreds of commits back and knows it is still held', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a', 'b'] }, other: { unclaimed: ['x'] } });
    const [claimA] = await appendCommits(repo.bare, repo.branch, [claim('a')]);
    // Much later: the other lock and another pool keep the branch busy, `a` is untouched.
    await appendCommits(repo.bare, repo.branch, [
      ...otherPoolCommits('other', 'x', 400),
      claim('b'),
      release('b'),
    ]);

    for (const params of [{}, { depth: 1 }, { depth: 5 }]) {
      const { result, name } = await get(claimA!, params);
      expect(result.code, result.stderr).toBe(0);
      expect(JSON.parse(result.stdout)).toEqual({
        version: { ref: claimA },
        metadata: [
          { name: 'lock_name', value: 'a' },
          { name: 'pool_name', value: 'pool' },
        ],
      });
      expect(name?.toString()).toBe('a\n');
    }
  });

  it('says a claim long ago released is no longer acquired', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a'] }, other: { unclaimed: ['x'] } });
    const [claimA] = await appendCommits(repo.bare, repo.branch, [
      claim('a'),
      ...otherPoolCommits('other', 'x', 200),
      release('a'),
      ...otherPoolCommits('other', 'x', 100),
    ]);
    for (const params of [{}, { depth: 1 }]) {
      const { result, name } = await get(claimA!, params);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain('error: lock instance is no longer acquired');
      expect(name).toBeUndefined();
    }
  });

  it('walks back past commits about other pools to the lock the version stands for', async () => {
    repo = await createLockRepo({
      pool: { unclaimed: { a: 'metadata of a\n' } },
      other: { unclaimed: ['x'] },
    });
    const commits = await appendCommits(repo.bare, repo.branch, [
      claim('a'),
      release('a'),
      ...otherPoolCommits('other', 'x', 150),
    ]);
    // The version is a commit about another pool, 150 commits after a's release.
    const version = commits.at(-1)!;
    const { result, name, metadata } = await get(version, { depth: 1 });
    expect(result.code, result.stderr).toBe(0);
    expect(name?.toString()).toBe('a\n');
    expect(metadata?.toString()).toBe('metadata of a\n');
  });

  it('refuses a version that is not on the branch', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a'] } });
    await appendCommits(repo.bare, repo.branch, otherPoolCommits('pool', 'a', 100));
    const { result } = await get('0123456789abcdef0123456789abcdef01234567');
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('is not a commit on branch');
  });

  it('writes metadata byte for byte', async () => {
    const bytes = Buffer.from([0, 1, 2, 0xff, 0xfe, 0x80, 10, 13, 10]);
    repo = await createLockRepo({ pool: { unclaimed: ['a'] } });
    await repo.commit('updating: a', (work) => writeFile(join(work, 'pool/unclaimed/a'), bytes));
    const [claimA] = await appendCommits(repo.bare, repo.branch, [claim('a')]);
    const { result, metadata } = await get(claimA!);
    expect(result.code, result.stderr).toBe(0);
    expect(metadata).toEqual(bytes);
  });
});
