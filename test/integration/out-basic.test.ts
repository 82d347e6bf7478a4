import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startGitDaemon } from '../helpers/git-daemon.js';
import { createLockRepo, type LockRepo } from '../helpers/lock-repo.js';
import { runCommand } from '../helpers/run-command.js';
import { tempDir } from '../helpers/run-script.js';
import { source } from '../helpers/source.js';

let repo: LockRepo;
afterEach(async () => repo?.cleanup());

async function stepWith(name: string): Promise<string> {
  const src = await tempDir();
  await mkdir(join(src, 'lock'));
  await writeFile(join(src, 'lock', 'name'), `${name}\n`);
  return src;
}

describe('out acquire → in → release', () => {
  it('claims a lock, fetches it, and gives it back', async () => {
    repo = await createLockRepo({ pool: { unclaimed: { 'lock-a': '{"env":"a"}\n' } } });
    const src = await tempDir();
    const acquired = await runCommand('out', {
      stdin: { source: source(repo), params: { acquire: true } },
      args: [src],
    });
    expect(acquired.code).toBe(0);
    const response = JSON.parse(acquired.stdout);
    expect(response).toEqual({
      version: { ref: await repo.tip() },
      metadata: [
        { name: 'lock_name', value: 'lock-a' },
        { name: 'pool_name', value: 'pool' },
      ],
    });
    expect(acquired.stderr).toContain('acquiring lock on: pool');
    expect(acquired.stderr).toContain('acquired!');
    expect(await repo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });

    const dest = await tempDir();
    const fetched = await runCommand('in', {
      stdin: { source: source(repo), version: response.version },
      args: [dest],
    });
    expect(fetched.code).toBe(0);

    const released = await runCommand('out', {
      stdin: { source: source(repo), params: { release: 'lock' } },
      args: [await stepWith('lock-a')],
    });
    expect(released.code).toBe(0);
    expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a'] });
    expect((await repo.subjects()).slice(0, 2)).toEqual(['unclaiming: lock-a', 'claiming: lock-a']);
  });
});

describe('over git daemon', () => {
  it('acquires a lock through git://', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    const daemon = await startGitDaemon(repo.root);
    try {
      const src = await tempDir();
      const result = await runCommand('out', {
        stdin: { source: source(repo, { uri: daemon.url(repo.bare) }), params: { acquire: true } },
        args: [src],
      });
      expect(result.code).toBe(0);
      expect(await repo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });
    } finally {
      await daemon.stop();
    }
  });
});
