import { mkdir, mkdtemp, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isStale } from '../stale-build.js';

describe('the stale dist/ guard', () => {
  let root: string | undefined;
  afterEach(() => (root ? rm(root, { recursive: true, force: true }) : undefined));

  async function tree(sourceAt: number, builtAt?: number): Promise<string> {
    root = await mkdtemp(join(tmpdir(), 'stale-build-'));
    await mkdir(join(root, 'src/git'), { recursive: true });
    await writeFile(join(root, 'src/git/git.ts'), '');
    await utimes(join(root, 'src/git/git.ts'), sourceAt, sourceAt);
    if (builtAt !== undefined) {
      await mkdir(join(root, 'dist/git'), { recursive: true });
      await writeFile(join(root, 'dist/git/git.js'), '');
      await utimes(join(root, 'dist/git/git.js'), builtAt, builtAt);
    }
    return root;
  }

  it('rebuilds when a source file (in a subfolder) changed after the build', async () => {
    expect(isStale(await tree(2_000, 1_000))).toBe(true);
  });

  it('rebuilds when there is no build at all', async () => {
    expect(isStale(await tree(1_000))).toBe(true);
  });

  it('leaves a build newer than every source file alone', async () => {
    expect(isStale(await tree(1_000, 2_000))).toBe(false);
  });
});
