// `in` with the request Concourse sends (in-process): the lock a version's commit is about,
// written byte for byte, and the refusal to hand out a claim that was given up since.
import { readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startGitDaemon } from '../helpers/git-daemon.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { runCommand } from '../helpers/run-command.js';
import { lockResponse, otherClone, refused, scratchDir, succeeded } from '../helpers/steps.js';
import { source } from '../helpers/source.js';

/** Metadata that is not text: NUL, invalid UTF-8, CRLF and no final newline. */
const BINARY = Buffer.from([0x7b, 0x00, 0xff, 0xfe, 0x0d, 0x0a, 0x80, 0x7d]);

let repo: LockRepo;
beforeEach(async () => {
  repo = await createLockRepo({
    pool: { claimed: ['lock-c'], unclaimed: { 'lock-a': '{"env":"a"}\n', 'lock-b': 'b\n' } },
    'other-pool': { unclaimed: ['lock-a', 'lock-o'] },
  });
  await otherClone(repo).update('lock-a', BINARY);
});
afterEach(async () => repo.cleanup());

async function fetchLock(
  ref: string,
  options: { params?: Record<string, unknown>; source?: Record<string, unknown> } = {},
) {
  const dest = join(await scratchDir('pool-in-'), 'lock');
  const result = await runCommand('in', {
    stdin: { source: source(repo, options.source), version: { ref }, params: options.params ?? {} },
    args: [dest],
  });
  return { result, dest };
}

async function written(dest: string) {
  return {
    name: await readFile(join(dest, 'name'), 'utf8'),
    metadata: await readFile(join(dest, 'metadata')),
  };
}

describe('in', () => {
  it('writes the name and the metadata bytes of the lock a claim commit took', async () => {
    const claim = await otherClone(repo).claim('lock-a');
    const { result, dest } = await fetchLock(claim);
    expect(succeeded(result)).toEqual(lockResponse(claim, 'lock-a'));
    expect(await written(dest)).toEqual({ name: 'lock-a\n', metadata: BINARY });
    expect(result.stderr).toContain('lock-a');
  });

  it('writes the metadata with the mode of every other file it writes (a task of another user reads it)', async () => {
    const { result, dest } = await fetchLock(await otherClone(repo).claim('lock-a'));
    succeeded(result);
    const mode = async (file: string) => (await stat(join(dest, file))).mode & 0o777;
    expect((await mode('metadata')).toString(8)).toBe((await mode('name')).toString(8));
  });

  it('still hands out a claim when only other locks changed since', async () => {
    const claim = await otherClone(repo).claim('lock-a');
    await otherClone(repo).claim('lock-b');
    await otherClone(repo).release('lock-c');
    await otherClone(repo, 'other-pool').claim('lock-a');
    const { result, dest } = await fetchLock(claim);
    expect(succeeded(result)).toEqual(lockResponse(claim, 'lock-a'));
    expect((await written(dest)).name).toBe('lock-a\n');
  });

  it('refuses a claim that was released since', async () => {
    const claim = await otherClone(repo).claim('lock-a');
    await otherClone(repo).release('lock-a');
    const { result } = await fetchLock(claim);
    refused(result, 'error: lock instance is no longer acquired');
  });

  it('refuses a claim that was released and claimed again since', async () => {
    const claim = await otherClone(repo).claim('lock-a');
    await otherClone(repo).release('lock-a');
    await otherClone(repo).claim('lock-a');
    const { result } = await fetchLock(claim);
    refused(result, 'error: lock instance is no longer acquired');
  });

  it('fetches a released lock by its release commit', async () => {
    await otherClone(repo).claim('lock-a');
    const release = await otherClone(repo).release('lock-a');
    await otherClone(repo).claim('lock-a');
    const { result, dest } = await fetchLock(release);
    expect(succeeded(result)).toEqual(lockResponse(release, 'lock-a'));
    expect(await written(dest)).toEqual({ name: 'lock-a\n', metadata: BINARY });
  });

  it('writes the metadata as it was at the version, not as it is now', async () => {
    const added = await otherClone(repo).add('lock-n', 'v1\n');
    await otherClone(repo).update('lock-n', 'v2\n');
    const { result, dest } = await fetchLock(added);
    succeeded(result);
    expect(await written(dest)).toEqual({ name: 'lock-n\n', metadata: Buffer.from('v1\n') });
  });

  it('answers for a removed lock without writing files, and says so', async () => {
    await otherClone(repo).claim('lock-b');
    const removal = await otherClone(repo).remove('lock-b');
    const { result, dest } = await fetchLock(removal);
    expect(succeeded(result)).toEqual(lockResponse(removal, 'lock-b'));
    expect(await readdir(dest).catch(() => [])).toEqual([]);
    expect(result.stderr).toContain('lock "lock-b" was removed from pool "pool"');
  });

  it('refuses a lock its commit made a symlink, writing nothing', async () => {
    // What the lock's file is at the version comes from that commit's own log: a link is no
    // more a lock file there than ls-tree would call it one.
    const linked = await repo.commit('claiming: lock-b', async (work) => {
      await rm(join(work, 'pool/unclaimed/lock-b'));
      await symlink('/etc/passwd', join(work, 'pool/claimed/lock-b'));
    });
    const { result, dest } = await fetchLock(linked);
    refused(result, /lock "lock-b" in pool "pool" is not a regular file at /);
    expect(await readdir(dest).catch(() => [])).toEqual([]);
  });

  it('hands out the unclaimed copy of a lock left in both folders once the claimed one goes', async () => {
    await repo.commit('a copy of lock-a in claimed/ too', async (work) => {
      await writeFile(join(work, 'pool/claimed/lock-a'), 'stray copy\n');
    });
    const cleanup = await repo.commit('removing the stray copy of lock-a', async (work) => {
      await rm(join(work, 'pool/claimed/lock-a'));
    });
    const { result, dest } = await fetchLock(cleanup);
    expect(succeeded(result)).toEqual(lockResponse(cleanup, 'lock-a'));
    expect(await written(dest)).toEqual({ name: 'lock-a\n', metadata: BINARY });
  });

  it('skips over commits about other pools to the lock of this pool', async () => {
    const claim = await otherClone(repo).claim('lock-a');
    const elsewhere = await otherClone(repo, 'other-pool').claim('lock-o');
    const { result, dest } = await fetchLock(elsewhere);
    expect(succeeded(result)).toEqual(lockResponse(elsewhere, 'lock-a'));
    expect(await written(dest)).toEqual({ name: 'lock-a\n', metadata: BINARY });
    expect(claim).not.toBe(elsewhere);
  });

  describe('with depth: 1', () => {
    it('still finds the lock the version changed', async () => {
      await otherClone(repo).claim('lock-b');
      const claim = await otherClone(repo).claim('lock-a');
      const { result, dest } = await fetchLock(claim, { params: { depth: 1 } });
      expect(succeeded(result)).toEqual(lockResponse(claim, 'lock-a'));
      expect(await written(dest)).toEqual({ name: 'lock-a\n', metadata: BINARY });
    });

    it('reaches a version older than the depth', async () => {
      const claim = await otherClone(repo).claim('lock-a');
      for (let i = 0; i < 5; i++) {
        await repo.commit(`unrelated ${i}`, (work) => writeFile(join(work, 'README.md'), `${i}\n`));
      }
      const { result, dest } = await fetchLock(claim, { params: { depth: 1 } });
      expect(succeeded(result)).toEqual(lockResponse(claim, 'lock-a'));
      expect((await written(dest)).name).toBe('lock-a\n');
    });

    it('reaches back past commits about other pools', async () => {
      await otherClone(repo).claim('lock-a');
      const elsewhere = await otherClone(repo, 'other-pool').claim('lock-o');
      const { result, dest } = await fetchLock(elsewhere, { params: { depth: 1 } });
      expect(succeeded(result)).toEqual(lockResponse(elsewhere, 'lock-a'));
      expect((await written(dest)).name).toBe('lock-a\n');
    });

    it('still refuses a claim released since', async () => {
      const claim = await otherClone(repo).claim('lock-a');
      await otherClone(repo).release('lock-a');
      await otherClone(repo).claim('lock-a');
      const { result } = await fetchLock(claim, { params: { depth: 1 } });
      refused(result, 'error: lock instance is no longer acquired');
    });
  });

  it('fails cleanly for a commit that is not on the branch', async () => {
    await git(repo.work, 'checkout', '--quiet', '-b', 'elsewhere');
    await writeFile(join(repo.work, 'pool', 'unclaimed', 'lock-z'), 'z\n');
    await git(repo.work, 'add', '-A');
    await git(repo.work, 'commit', '--quiet', '-m', 'adding unclaimed: lock-z');
    await git(repo.work, 'push', '--quiet', 'origin', 'HEAD:refs/heads/elsewhere');
    const offBranch = (await git(repo.work, 'rev-parse', 'HEAD')).trim();
    const { result } = await fetchLock(offBranch);
    refused(result, `version ${offBranch} is not a commit on branch "master"`);
  });

  it('fails cleanly for a commit that does not exist', async () => {
    const { result } = await fetchLock('0123456789abcdef0123456789abcdef01234567', {
      params: { depth: 1 },
    });
    refused(
      result,
      'version 0123456789abcdef0123456789abcdef01234567 is not a commit on branch "master"',
    );
  });

  it('refuses a version that is not a commit id before running git', async () => {
    const { result } = await fetchLock('--upload-pack=touch /tmp/pwned');
    refused(result, 'invalid payload (version.ref must be a commit id)');
  });

  it('fails cleanly when the branch does not exist', async () => {
    const { result } = await fetchLock(await repo.tip(), { source: { branch: 'gone' } });
    refused(result, `branch "gone" does not exist in ${repo.bare}`);
  });

  describe('over git daemon', () => {
    /** Runs `test` with the lock repository served by git daemon, at its git:// URI. */
    async function served(test: (uri: string) => Promise<void>): Promise<void> {
      const daemon = await startGitDaemon(repo.root);
      try {
        await test(daemon.url(repo.bare));
      } finally {
        await daemon.stop();
      }
    }

    /** Fetches the lock `claim` took (lock-a) with depth 1, and checks what it wrote. */
    const fetchesClaim = (claim: string) =>
      served(async (uri) => {
        const { result, dest } = await fetchLock(claim, { source: { uri }, params: { depth: 1 } });
        expect(succeeded(result)).toEqual(lockResponse(claim, 'lock-a'));
        expect(await written(dest)).toEqual({ name: 'lock-a\n', metadata: BINARY });
      });

    it('fetches the lock', async () => fetchesClaim(await otherClone(repo).claim('lock-a')));

    // Its first fetch runs on a session of the run's; a wider window is fetched on a connection
    // of its own (the session's refs would be stale by then).
    it('widens its window to reach an older version', async () => {
      const claim = await otherClone(repo).claim('lock-a');
      for (let i = 0; i < 5; i++)
        await repo.commit(`unrelated ${i}`, (work) => writeFile(join(work, 'README.md'), `${i}\n`));
      await fetchesClaim(claim);
    });

    it('names a branch that does not exist', async () =>
      served(async (uri) => {
        const { result } = await fetchLock(await repo.tip(), { source: { uri, branch: 'gone' } });
        refused(result, `branch "gone" does not exist in ${uri}`);
      }));
  });
});
