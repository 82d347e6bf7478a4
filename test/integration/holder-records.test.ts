// Claiming commits say who claimed the lock and when, as git trailers any git tool can read,
// after the `Build URL:` line the reference always wrote. The response metadata does not change.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { runCommand } from '../helpers/run-command.js';
import { tempDir } from '../helpers/run-script.js';
import { lockStep } from '../helpers/steps.js';
import { parseGoDuration } from '../../src/base/duration.js';
import { source } from '../helpers/source.js';

let repo: LockRepo;
afterEach(async () => repo?.cleanup());

/** The tip commit's message, and its trailers as git itself parses them. */
async function tipRecord() {
  const message = await git(repo.bare, 'log', '-1', '--format=%B', repo.branch);
  const parsed = await git(repo.bare, 'log', '-1', '--format=%(trailers:only,unfold)', repo.branch);
  const trailers: Record<string, string> = {};
  for (const line of parsed.split('\n').filter(Boolean)) {
    const colon = line.indexOf(': ');
    trailers[line.slice(0, colon)] = line.slice(colon + 2);
  }
  return { message, trailers };
}

const OLD_WORKER_ENV = {
  ATC_EXTERNAL_URL: 'https://ci.example.com/',
  BUILD_ID: '4711',
  BUILD_TEAM_NAME: 'main',
  BUILD_PIPELINE_NAME: 'deploy',
  BUILD_JOB_NAME: 'smoke tests',
  BUILD_NAME: '12',
};
const BUILT_URL = 'https://ci.example.com/teams/main/pipelines/deploy/jobs/smoke%20tests/builds/12';

const claiming: {
  operation: string;
  params: Record<string, unknown>;
  seed: { claimed?: string[]; unclaimed?: string[] };
  subject: string;
}[] = [
  {
    operation: 'acquire',
    params: { acquire: true },
    seed: { unclaimed: ['lock-a'] },
    subject: 'claiming: lock-a',
  },
  {
    operation: 'claim',
    params: { claim: 'lock-a' },
    seed: { unclaimed: ['lock-a', 'lock-b'] },
    subject: 'claiming: lock-a',
  },
  {
    operation: 'add_claimed',
    params: { add_claimed: 'lock' },
    seed: {},
    subject: 'adding claimed: lock-a',
  },
];

describe('holder records on claiming commits', () => {
  for (const { operation, params, seed, subject } of claiming) {
    it(`${operation}: subject, Build URL line and holder trailers; metadata unchanged`, async () => {
      repo = await createLockRepo({ pool: seed });
      const before = Date.now();
      const result = await runCommand('out', {
        stdin: { source: source(repo), params },
        args: [await lockStep('lock-a', '{"a":1}\n')],
        env: OLD_WORKER_ENV,
      });
      expect(result.code).toBe(0);
      expect(JSON.parse(result.stdout).metadata).toEqual([
        { name: 'lock_name', value: 'lock-a' },
        { name: 'pool_name', value: 'pool' },
      ]);

      const { message, trailers } = await tipRecord();
      const lines = message.split('\n');
      expect(lines[0]).toBe(subject);
      expect(lines[1]).toBe('');
      expect(lines[2]).toBe(`Build URL: ${BUILT_URL}`);
      expect(Object.keys(trailers)).toEqual([
        'Claim-Token',
        'Claimed-At',
        'Claimed-By',
        'Build-Id',
        'Build-Team',
        'Build-Pipeline',
        'Build-Job',
        'Build-Name',
        'Waited',
      ]);
      expect(trailers['Claim-Token']).toMatch(/^[0-9a-f-]{36}$/);
      expect(trailers['Claimed-At']).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      const at = Date.parse(trailers['Claimed-At']!);
      expect(at).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000);
      expect(at).toBeLessThanOrEqual(Date.now());
      expect(trailers['Claimed-By']).toBe(BUILT_URL);
      expect(trailers).toMatchObject({
        'Build-Id': '4711',
        'Build-Team': 'main',
        'Build-Pipeline': 'deploy',
        'Build-Job': 'smoke tests',
        'Build-Name': '12',
      });
    });
  }

  it('Waited says how long the put waited for the lock', async () => {
    repo = await createLockRepo({ pool: { claimed: ['lock-a'] } });
    const args = [await tempDir()];
    const run = runCommand('out', {
      stdin: { source: source(repo), params: { acquire: true } },
      args,
    });
    const holdMs = 1_500;
    await new Promise((resolve) => setTimeout(resolve, holdMs));
    const release = await runCommand('out', {
      stdin: { source: source(repo), params: { release: 'lock' } },
      args: [await lockStep('lock-a')],
    });
    expect(release.code, release.stderr).toBe(0);
    const acquired = await run;
    expect(acquired.code, acquired.stderr).toBe(0);
    const waited = parseGoDuration((await tipRecord()).trailers.Waited ?? '');
    expect(waited).toEqual({ ms: expect.any(Number) });
    // Counted from the put's own start, a little after the spawn.
    expect((waited as { ms: number }).ms).toBeGreaterThanOrEqual(holdMs - 500);
    expect((waited as { ms: number }).ms).toBeLessThan(holdMs + 10_000);
  });

  it('uses BUILD_URL when Concourse sets it, and a new token for every put', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    const env = { ...OLD_WORKER_ENV, BUILD_URL: 'https://ci.example.com/builds/4711' };
    const tokens: string[] = [];
    for (let round = 0; round < 2; round++) {
      const claimed = await runCommand('out', {
        stdin: { source: source(repo), params: { claim: 'lock-a' } },
        args: [await tempDir()],
        env,
      });
      expect(claimed.code).toBe(0);
      const { message, trailers } = await tipRecord();
      expect(message).toContain('\nBuild URL: https://ci.example.com/builds/4711\n');
      expect(trailers['Claimed-By']).toBe('https://ci.example.com/builds/4711');
      tokens.push(trailers['Claim-Token']!);
      const released = await runCommand('out', {
        stdin: { source: source(repo), params: { release: 'lock' } },
        args: [await lockStep('lock-a')],
        env,
      });
      expect(released.code).toBe(0);
    }
    expect(new Set(tokens).size).toBe(2);
  });

  it('says "unknown" without build variables, and leaves out the Build-* trailers', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    const result = await runCommand('out', {
      stdin: { source: source(repo), params: { acquire: true } },
      args: [await tempDir()],
    });
    expect(result.code).toBe(0);
    const { message, trailers } = await tipRecord();
    expect(message.split('\n').slice(0, 3)).toEqual(['claiming: lock-a', '', 'Build URL: unknown']);
    expect(Object.keys(trailers)).toEqual(['Claim-Token', 'Claimed-At', 'Claimed-By', 'Waited']);
    expect(trailers['Claimed-By']).toBe('unknown');
  });

  it('keeps releasing and other commits as the reference wrote them: no holder trailers', async () => {
    repo = await createLockRepo({ pool: { claimed: ['lock-a'] } });
    const result = await runCommand('out', {
      stdin: { source: source(repo), params: { release: 'lock' } },
      args: [await lockStep('lock-a')],
      env: OLD_WORKER_ENV,
    });
    expect(result.code).toBe(0);
    const { message, trailers } = await tipRecord();
    expect(message.trimEnd()).toBe(`unclaiming: lock-a\n\nBuild URL: ${BUILT_URL}`);
    expect(trailers).toEqual({});
  });

  it('git interpret-trailers reads the same record', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    await runCommand('out', {
      stdin: { source: source(repo), params: { acquire: true } },
      args: [await tempDir()],
      env: OLD_WORKER_ENV,
    });
    const { message } = await tipRecord();
    const dir = await tempDir();
    await writeFile(join(dir, 'message'), message);
    const parsed = await git(dir, 'interpret-trailers', '--parse', join(dir, 'message'));
    expect(parsed).toContain(`Claimed-By: ${BUILT_URL}\n`);
    expect(parsed).toContain('Build-Job: smoke tests\n');
    expect(parsed).not.toContain('Build URL');
  });
});
