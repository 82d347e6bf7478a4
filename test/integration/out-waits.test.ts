// `out` operations that wait, run as Concourse runs them: each wait ends when another clone
// changes the pool. On `master` and on a branch that is not the repository's default.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLockRepo, type LockRepo } from '../helpers/lock-repo.js';
import { startScript } from '../helpers/run-script.js';
import {
  buildFolder,
  lockFile,
  lockResponse,
  guardDefaultBranch,
  otherClone,
  OUT_BRANCHES,
  succeeded,
} from '../helpers/steps.js';
import { source } from '../helpers/source.js';

describe.each(OUT_BRANCHES)('out $where', ({ branch, decoy }) => {
  let repo: LockRepo;
  /** Nothing ever lands on the repository's default branch. */
  let defaultBranchUnmoved: () => Promise<void>;

  beforeEach(async () => {
    repo = await createLockRepo(
      {
        pool: {
          claimed: { 'lock-c': '{"held":"c"}\n' },
          unclaimed: { 'lock-a': '{"env":"a"}\n', 'lock-b': '{"env":"b"}\n' },
        },
      },
      { branch },
    );
    defaultBranchUnmoved = await guardDefaultBranch(repo, decoy);
  });

  afterEach(async () => {
    await defaultBranchUnmoved();
    await repo.cleanup();
  });

  describe('waits until another clone changes the pool', () => {
    const start = async (params: Record<string, unknown>, steps = {}) =>
      startScript('out', { source: source(repo), params }, { args: [await buildFolder(steps)] });

    it('acquire: while every lock is claimed', async () => {
      await otherClone(repo).claim('lock-a');
      await otherClone(repo).claim('lock-b');
      const run = await start({ acquire: true });
      await run.waitForStderr(/waiting for lock/);
      expect(run.stderrSoFar()).toContain('3 claimed, 0 unclaimed');
      await otherClone(repo).release('lock-b');
      const result = await run.done;
      expect(succeeded(result)).toEqual(lockResponse(await repo.tip(), 'lock-b'));
      expect(result.stderr).toContain('acquired!');
      expect((await repo.subjects()).slice(0, 2)).toEqual([
        'claiming: lock-b',
        'unclaiming: lock-b',
      ]);
    });

    it('claim: while the lock is claimed', async () => {
      const run = await start({ claim: 'lock-c' });
      await run.waitForStderr(/waiting for lock/);
      await otherClone(repo).release('lock-c');
      const result = await run.done;
      expect(succeeded(result)).toEqual(lockResponse(await repo.tip(), 'lock-c'));
      expect((await repo.subjects())[0]).toBe('claiming: lock-c');
    });

    it('claim: while the lock exists nowhere, saying so', async () => {
      const run = await start({ claim: 'lock-later' });
      await run.waitForStderr(/waiting for lock/);
      expect(run.stderrSoFar()).toContain('lock "lock-later" does not exist in pool "pool"');
      await otherClone(repo).add('lock-later');
      const result = await run.done;
      expect(succeeded(result)).toEqual(lockResponse(await repo.tip(), 'lock-later'));
      expect(await repo.state('pool')).toMatchObject({ claimed: ['lock-c', 'lock-later'] });
    });

    it('update: while the lock is claimed', async () => {
      const run = await start({ update: 'meta' }, { meta: { name: 'lock-c', metadata: 'new\n' } });
      await run.waitForStderr(/waiting for lock/);
      await otherClone(repo).release('lock-c');
      const result = await run.done;
      expect(succeeded(result)).toEqual(lockResponse(await repo.tip(), 'lock-c'));
      expect((await repo.subjects())[0]).toBe('updating: lock-c');
      expect(await lockFile(repo, 'pool/unclaimed/lock-c')).toEqual(Buffer.from('new\n'));
    });

    it('check: while the lock is claimed, answering with the tip that freed it', async () => {
      const run = await start({ check: 'want' }, { want: { name: 'lock-c' } });
      await run.waitForStderr(/waiting for lock/);
      const released = await otherClone(repo).release('lock-c');
      const result = await run.done;
      expect(succeeded(result)).toEqual(lockResponse(released, 'lock-c'));
      expect(await repo.tip()).toBe(released);
      expect(result.stderr).toContain('unclaimed!');
    });

    it('check_unclaimed: while the lock is unclaimed', async () => {
      const run = await start({ check_unclaimed: 'want' }, { want: { name: 'lock-a' } });
      await run.waitForStderr(/waiting for lock/);
      const claimed = await otherClone(repo).claim('lock-a');
      const result = await run.done;
      expect(succeeded(result)).toEqual(lockResponse(claimed, 'lock-a'));
      expect(await repo.tip()).toBe(claimed);
    });
  });
});
