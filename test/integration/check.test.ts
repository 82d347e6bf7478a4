// `check` with the request Concourse sends (in-process): the commits that touched the pool,
// oldest first.
import { access, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGitDaemon } from '../helpers/git-daemon.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { runCommand } from '../helpers/run-command.js';
import { otherClone, refused, scratchDir, succeeded } from '../helpers/steps.js';

let repo: LockRepo;
/** The branch's commits, oldest first, by what they did. */
const commits: Record<string, string> = {};
let root: string;

beforeAll(async () => {
  repo = await createLockRepo({
    pool: { unclaimed: ['lock-a', 'lock-b'] },
    'other-pool': { unclaimed: ['lock-o'] },
  });
  root = (await git(repo.bare, 'rev-list', '--max-parents=0', repo.branch)).trim();
  const pool = otherClone(repo);
  const other = otherClone(repo, 'other-pool');
  commits.claimA = await pool.claim('lock-a');
  commits.otherClaim = await other.claim('lock-o');
  commits.readme = await repo.commit('docs', (work) =>
    writeFile(join(work, 'README.md'), 'more\n'),
  );
  commits.claimB = await pool.claim('lock-b');
  commits.otherRelease = await other.release('lock-o');
  commits.releaseA = await pool.release('lock-a');
  commits.otherAdd = await other.add('lock-p');
});
afterAll(async () => repo.cleanup());

async function check(version?: { ref: string } | null, extra: Record<string, unknown> = {}) {
  const result = await runCommand('check', {
    stdin: {
      source: { uri: repo.bare, branch: repo.branch, pool: 'pool', ...extra },
      ...(version === undefined ? {} : { version }),
    },
  });
  return result;
}

const refs = (...names: string[]) => names.map((name) => ({ ref: commits[name] ?? name }));

describe('check', () => {
  it('without a version, returns only the latest commit that touched the pool', async () => {
    expect(succeeded(await check())).toEqual(refs('releaseA'));
    expect(succeeded(await check(null))).toEqual(refs('releaseA'));
  });

  it('from a version, returns it and every later pool commit, oldest first', async () => {
    expect(succeeded(await check({ ref: commits.claimA! }))).toEqual(
      refs('claimA', 'claimB', 'releaseA'),
    );
    expect(succeeded(await check({ ref: commits.claimB! }))).toEqual(refs('claimB', 'releaseA'));
  });

  it('returns the version alone when nothing touched the pool since', async () => {
    expect(succeeded(await check({ ref: commits.releaseA! }))).toEqual(refs('releaseA'));
  });

  it('never returns commits that touched only other pools', async () => {
    const result = succeeded(await check({ ref: commits.otherClaim! })) as { ref: string }[];
    expect(result).toEqual(refs('claimB', 'releaseA'));
  });

  it('takes an abbreviated commit id', async () => {
    expect(succeeded(await check({ ref: commits.claimB!.slice(0, 10) }))).toEqual(
      refs('claimB', 'releaseA'),
    );
  });

  it('returns only the latest when the version is unknown', async () => {
    expect(succeeded(await check({ ref: 'deadbeef'.repeat(5) }))).toEqual(refs('releaseA'));
  });

  it('returns only the latest when the version is not a commit id (the reference sends "bogus-ref")', async () => {
    const bogus = await check({ ref: 'bogus-ref' });
    expect(succeeded(bogus)).toEqual(refs('releaseA'));
    expect(bogus.stderr).toContain('version.ref "bogus-ref" is not a commit id');
    // Never handed to git: as an option it would write this file.
    const target = join(repo.bare, 'written-by-git');
    expect(succeeded(await check({ ref: `--output=${target}` }))).toEqual(refs('releaseA'));
    await expect(access(target)).rejects.toThrow();
  });

  it('returns only the latest when the version is not on the branch', async () => {
    await git(repo.work, 'checkout', '--quiet', '-b', 'side', commits.claimA!);
    await writeFile(join(repo.work, 'pool', 'unclaimed', 'lock-side'), 'side\n');
    await git(repo.work, 'add', '-A');
    await git(repo.work, 'commit', '--quiet', '-m', 'adding unclaimed: lock-side');
    await git(repo.work, 'push', '--quiet', 'origin', 'HEAD:refs/heads/side');
    const side = (await git(repo.work, 'rev-parse', 'HEAD')).trim();
    await git(repo.work, 'checkout', '--quiet', repo.branch);
    expect(succeeded(await check({ ref: side }))).toEqual(refs('releaseA'));
  });

  it('from the root commit, returns the whole history of the pool', async () => {
    expect(succeeded(await check({ ref: root }))).toEqual([
      { ref: root },
      ...refs('claimA', 'claimB', 'releaseA'),
    ]);
  });

  it('accepts unknown source fields, warning on stderr only', async () => {
    const result = await check(undefined, { paths: ['pool/*'], private_key_path: '/x' });
    expect(succeeded(result)).toEqual(refs('releaseA'));
    expect(result.stderr).toContain('warning: ignoring unknown source field "paths"');
    expect(result.stderr).toContain('warning: ignoring unknown source field "private_key_path"');
  });

  it('returns an empty list for a pool no commit touched', async () => {
    expect(succeeded(await check(undefined, { pool: 'never' }))).toEqual([]);
  });

  it('fails cleanly when the branch does not exist', async () => {
    refused(
      await check(undefined, { branch: 'gone' }),
      `branch "gone" does not exist in ${repo.bare}`,
    );
  });

  it('fails with git’s own words naming the cause when the repository does not exist', async () => {
    const missing = join(repo.root, 'missing.git');
    refused(
      await check(undefined, { uri: missing }),
      `error: git clone cannot use the lock repository: fatal: repository '${missing}' does not exist (check uri: there is no git repository at that address)`,
    );
  });

  it('over git daemon, sees the commits since from the copy it keeps between checks', async () => {
    const own = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    const daemon = await startGitDaemon(own.root);
    const env = { TMPDIR: await scratchDir('pool-check-tmp-') };
    const checkFrom = (ref: string) =>
      runCommand('check', {
        stdin: {
          source: { uri: daemon.url(own.bare), branch: own.branch, pool: 'pool' },
          version: { ref },
        },
        env,
      });
    try {
      const start = await own.tip();
      expect(succeeded(await checkFrom(start))).toEqual([{ ref: start }]);
      const claim = await otherClone(own).claim('lock-a');
      expect(succeeded(await checkFrom(start))).toEqual([{ ref: start }, { ref: claim }]);
    } finally {
      await daemon.stop();
      await own.cleanup();
    }
  });

  it('works over git daemon', async () => {
    const daemon = await startGitDaemon(repo.root);
    try {
      expect(
        succeeded(await check({ ref: commits.claimB! }, { uri: daemon.url(repo.bare) })),
      ).toEqual(refs('claimB', 'releaseA'));
    } finally {
      await daemon.stop();
    }
  });
});
