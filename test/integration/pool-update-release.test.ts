// `pool update NAME --metadata FILE` (as out's `update`) and `pool release` saying whose claim it
// ended, against real repositories.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { runScript, tempDir } from '../helpers/run-script.js';

let repo: LockRepo | undefined;
afterEach(async () => {
  await repo?.cleanup();
  repo = undefined;
});

function pool(...args: string[]) {
  const source = ['--uri', repo!.bare, '--branch', repo!.branch, '--pool', 'pool'];
  return runScript('pool', '', { args: [...args, ...source, '--retry-delay', '100ms'] });
}

async function metadataFile(text: string): Promise<string> {
  const file = join(await tempDir(), 'metadata.json');
  await writeFile(file, text);
  return file;
}

describe('pool release', () => {
  it('says whose claim it ended, short, and since when', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    const claimed = await runScript(
      'out',
      {
        source: { uri: repo.bare, branch: repo.branch, pool: 'pool' },
        params: { claim: 'lock-a' },
      },
      {
        args: [await tempDir()],
        env: {
          ATC_EXTERNAL_URL: 'https://ci.example.com',
          BUILD_TEAM_NAME: 'main',
          BUILD_PIPELINE_NAME: 'deploy',
          BUILD_JOB_NAME: 'smoke',
          BUILD_NAME: '12',
        },
      },
    );
    expect(claimed.code).toBe(0);
    const claimedAt = (
      await git(repo.bare, 'log', '-1', '--format=%(trailers:key=Claimed-At,valueonly)')
    ).trim();

    const released = await pool('release', 'lock-a');
    expect(released.code).toBe(0);
    expect(released.stderr).toMatch(
      new RegExp(
        `^released "lock-a" \\(claimed by main/deploy/smoke #12 since ${claimedAt}, [\\d.]+m?s ago\\)$`,
        'm',
      ),
    );
    expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a'] });
  });
});

describe('pool update', () => {
  it("replaces an unclaimed lock's metadata, and adds a lock the pool does not have", async () => {
    repo = await createLockRepo({ pool: { unclaimed: { a: 'old\n' } } });
    const updated = await pool('update', 'a', '--metadata', await metadataFile('{"new": 1}\n'));
    expect(updated.code).toBe(0);
    expect(await git(repo.bare, 'show', `${repo.branch}:pool/unclaimed/a`)).toBe('{"new": 1}\n');
    expect(await git(repo.bare, 'log', '-1', '--format=%s', repo.branch)).toBe('updating: a\n');

    const added = await pool('update', 'b', '--metadata', await metadataFile('b\n'), '--json');
    expect(added.code).toBe(0);
    expect(JSON.parse(added.stdout).version.ref).toBe(await repo.tip());
    expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: ['a', 'b'] });
    expect(await git(repo.bare, 'log', '-1', '--format=%s', repo.branch)).toBe(
      'adding unclaimed: b\n',
    );
  });

  it('waits while the lock is claimed; --wait-timeout bounds it; --metadata is required', async () => {
    repo = await createLockRepo({ pool: { claimed: { a: 'held\n' } } });
    const before = await repo.tip();
    const file = await metadataFile('new\n');
    const waited = await pool('update', 'a', '--metadata', file, '--wait-timeout', '1s');
    expect(waited.code).toBe(1);
    expect(waited.stderr).toContain('error: timed out after 1s (--wait-timeout) waiting');
    expect(await repo.tip()).toBe(before);
    expect(await readFile(file, 'utf8')).toBe('new\n');

    const bare = await pool('update', 'a');
    expect(bare.code).toBe(1);
    expect(bare.stderr.trim()).toBe('error: pool update needs --metadata FILE');
  });
});
