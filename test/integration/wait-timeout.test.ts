// params.wait_timeout on every operation that waits: exit 1 with one line saying it timed out,
// after how long and waiting for what, and nothing committed.
import { rename } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLockRepo, type LockRepo } from '../helpers/lock-repo.js';
import { runScript, startScript, tempDir } from '../helpers/run-script.js';
import { lockStep } from '../helpers/steps.js';
import { source } from '../helpers/source.js';

let repo: LockRepo;
afterEach(async () => repo?.cleanup());

const cases: {
  operation: string;
  params: Record<string, unknown>;
  seed: { claimed?: string[]; unclaimed?: string[] };
  metadata?: string;
  waitingFor: RegExp;
}[] = [
  {
    operation: 'acquire',
    params: { acquire: true },
    seed: { claimed: ['lock-a', 'lock-b'] },
    waitingFor: /no unclaimed lock in pool "pool" \(2 claimed, 0 unclaimed\)/,
  },
  {
    operation: 'claim',
    params: { claim: 'lock-a' },
    seed: { claimed: ['lock-a'] },
    waitingFor: /lock "lock-a" in pool "pool" is claimed/,
  },
  {
    operation: 'update',
    params: { update: 'lock' },
    seed: { claimed: ['lock-a'] },
    metadata: '{"new":true}\n',
    waitingFor: /lock "lock-a" in pool "pool" is claimed/,
  },
  {
    operation: 'check',
    params: { check: 'lock' },
    seed: { claimed: ['lock-a'] },
    waitingFor: /lock "lock-a" in pool "pool" is claimed/,
  },
  {
    operation: 'check_unclaimed',
    params: { check_unclaimed: 'lock' },
    seed: { unclaimed: ['lock-a'] },
    waitingFor: /lock "lock-a" in pool "pool" is unclaimed/,
  },
];

describe('params.wait_timeout', () => {
  for (const { operation, params, seed, metadata, waitingFor } of cases) {
    it(`${operation} gives up after the timeout, exit 1, nothing committed`, async () => {
      repo = await createLockRepo({ pool: seed });
      const before = await repo.tip();
      const started = Date.now();
      const result = await runScript(
        'out',
        { source: source(repo), params: { ...params, wait_timeout: '1s' } },
        { args: [await lockStep('lock-a', metadata)] },
      );
      const elapsed = Date.now() - started;
      expect(result.code).toBe(1);
      expect(result.stdout).toBe('');
      const lines = result.stderr.split('\n').filter((line) => /timed out/.test(line));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^error: timed out after 1s \(params\.wait_timeout\) waiting: /);
      expect(lines[0]).toMatch(waitingFor);
      expect(elapsed).toBeGreaterThanOrEqual(1000);
      expect(await repo.tip()).toBe(before);
    });
  }

  it('does not get in the way when the lock frees up in time', async () => {
    repo = await createLockRepo({ pool: { claimed: ['lock-a'] } });
    const running = startScript(
      'out',
      { source: source(repo), params: { claim: 'lock-a', wait_timeout: '30s' } },
      { args: [await tempDir()] },
    );
    await running.waitForStderr(/waiting for lock/);
    await repo.commit('unclaiming: lock-a', async (work) => {
      await rename(join(work, 'pool/claimed/lock-a'), join(work, 'pool/unclaimed/lock-a'));
    });
    const result = await running.done;
    expect(result.code).toBe(0);
    expect(result.stderr).toContain('claimed!');
    expect(await repo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });
  });

  it('refuses a wait_timeout that is not a duration, naming the field', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    const before = await repo.tip();
    const result = await runScript(
      'out',
      { source: source(repo), params: { acquire: true, wait_timeout: 'soon' } },
      { args: [await tempDir()] },
    );
    expect(result.code).toBe(1);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(/wait_timeout/);
    expect(await repo.tip()).toBe(before);
  });
});
