// `pool init` writes only regular files it creates: a symlink committed to the branch (a
// .gitkeep or a lock name pointing outside the repository) is never written through.
import { mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { runScript, tempDir } from '../helpers/run-script.js';

let repo: LockRepo;
let outside: string | undefined;
afterEach(async () => {
  await repo?.cleanup();
  if (outside) await rm(outside, { recursive: true, force: true });
});

/** A branch whose pool `envs` has a committed symlink at `path` to a file outside the repository. */
async function repoWithSymlink(path: string): Promise<string> {
  outside = await tempDir('pool-outside-');
  const target = join(outside, 'precious');
  await writeFile(target, 'precious data\n');
  repo = await createLockRepo({ other: { unclaimed: ['x'] } });
  await repo.commit('a symlink in the pool', async (work) => {
    await mkdir(join(work, 'envs', 'claimed'), { recursive: true });
    await mkdir(join(work, 'envs', 'unclaimed'), { recursive: true });
    await symlink(target, join(work, path));
  });
  return target;
}

function init(locks: string[]) {
  const flags = ['--uri', repo.bare, '--branch', repo.branch, '--pool', 'envs'];
  return runScript('pool', '', {
    args: ['init', ...flags, ...locks.flatMap((name) => ['--lock', name])],
  });
}

describe('pool init and symlinks in the branch', () => {
  it('never writes through a committed .gitkeep symlink', async () => {
    const target = await repoWithSymlink('envs/claimed/.gitkeep');
    const result = await init(['staging']);
    expect(result.code, result.stderr).toBe(0);
    expect(await readFile(target, 'utf8')).toBe('precious data\n');
    // The symlink still keeps its folder; the rest of the pool is made as usual.
    expect(await repo.state('envs')).toEqual({ claimed: [], unclaimed: ['staging'] });
    const tree = await git(repo.bare, 'ls-tree', '-r', repo.branch, '--', 'envs/');
    expect(tree).toMatch(/^120000 blob \w+\tenvs\/claimed\/\.gitkeep$/m);
    expect(tree).toMatch(/^100644 blob \w+\tenvs\/unclaimed\/\.gitkeep$/m);
  });

  it('refuses a lock whose name is a committed symlink, writing nothing', async () => {
    const target = await repoWithSymlink('envs/unclaimed/prod');
    const before = await repo.tip();
    const result = await init(['prod']);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('lock "prod" already exists in pool "envs"');
    expect(await readFile(target, 'utf8')).toBe('precious data\n');
    expect(await repo.tip()).toBe(before);
  });
});
