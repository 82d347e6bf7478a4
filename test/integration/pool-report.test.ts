// `pool report --json`: the figures of a history with known holds and waits, the window's
// clipping, and a short --since costing the same on a long history as on a short one.
import { afterEach, describe, expect, it } from 'vitest';
import { appendCommits, claimCommit, releaseCommit } from '../helpers/long-history.js';
import { createLockRepo, type LockRepo } from '../helpers/lock-repo.js';
import { buildUrl, knownHistory } from '../helpers/report-history.js';
import { runScript } from '../helpers/run-script.js';

let repo: LockRepo | undefined;
afterEach(async () => {
  await repo?.cleanup();
  repo = undefined;
});

function report(bare: string, branch: string, ...args: string[]) {
  return runScript('pool', '', {
    args: ['report', '--uri', bare, '--branch', branch, '--pool', 'pool', ...args],
  });
}

describe('pool report --json', () => {
  it('gives each lock its share of the window held, its claims and their waits', async () => {
    const known = await knownHistory();
    repo = known.repo;
    const result = await report(repo.bare, repo.branch, '--json', '--since', '2h');
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const figures = JSON.parse(result.stdout);
    expect(figures.pool).toBe('pool');
    const span = Date.parse(figures.until) - Date.parse(figures.since);
    expect(span).toBe(2 * 3_600_000);
    expect(Math.abs(Date.parse(figures.until) - known.now)).toBeLessThan(60_000);
    const lock = (name: string) => figures.locks.find((l: { name: string }) => l.name === name);
    expect(figures.locks.map((l: { name: string }) => l.name)).toEqual(['a', 'b', 'c', 'd']);

    // a: 30 + 15 + 10 minutes of 120; waits 5s, 60s, 150s.
    expect(lock('a')).toEqual({
      name: 'a',
      claims: 3,
      held_fraction: expect.closeTo(55 / 120, 2),
      wait_p50_s: 60,
      wait_p95_s: 150,
      wait_max_s: 150,
      waits_unknown: 0,
    });
    // b: held for the last 50 minutes, by a claim that does not say how long it waited.
    expect(lock('b')).toMatchObject({
      claims: 1,
      held_fraction: expect.closeTo(50 / 120, 2),
      wait_p50_s: null,
      wait_p95_s: null,
      wait_max_s: null,
      waits_unknown: 1,
      holder: 'main/deploy/smoke #40',
      claimed_by: buildUrl('smoke', 40),
    });
    expect(Date.parse(lock('b').claimed_at)).toBe(known.now - 50 * 60_000);
    expect(lock('b')).not.toHaveProperty('lease_expires');
    // c: never claimed.
    expect(lock('c')).toEqual({
      name: 'c',
      claims: 0,
      held_fraction: 0,
      wait_p50_s: null,
      wait_p95_s: null,
      wait_max_s: null,
      waits_unknown: 0,
    });
    // d: claimed before the window, so no claim counts; held for its first 30 minutes.
    expect(lock('d')).toMatchObject({ claims: 0, held_fraction: expect.closeTo(30 / 120, 2) });
    expect(figures.waiting).toEqual([]);
  });

  it('a wider window counts the claims before, and says which window it used', async () => {
    const known = await knownHistory();
    repo = known.repo;
    const figures = JSON.parse(
      (await report(repo.bare, repo.branch, '--json', '--since', '4h')).stdout,
    );
    const d = figures.locks.find((l: { name: string }) => l.name === 'd');
    expect(d).toMatchObject({
      claims: 1,
      wait_max_s: 0,
      held_fraction: expect.closeTo(90 / 240, 2),
    });
    const week = JSON.parse((await report(repo.bare, repo.branch, '--json')).stdout);
    expect(Date.parse(week.until) - Date.parse(week.since)).toBe(7 * 24 * 3_600_000);
  });

  it('refuses a bad --since and a report with nowhere to go, in one line', async () => {
    const known = await knownHistory();
    repo = known.repo;
    const bad = await report(repo.bare, repo.branch, '--json', '--since', 'a week');
    expect(bad.code).toBe(1);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
    expect(bad.stderr).toMatch(/^error: --since: /);
    const nowhere = await report(repo.bare, repo.branch);
    expect(nowhere.code).toBe(1);
    expect(nowhere.stderr.trim()).toBe('error: pool report needs --html FILE or --json');
  });

  it('takes about as long for 100000 commits as for 100 when --since is short', async () => {
    const timed = async (commits: number) => {
      const long = await createLockRepo({
        pool: { unclaimed: ['a'] },
        other: { unclaimed: ['x'] },
      });
      try {
        // Mostly another pool's commits, as on a shared branch, ending with a claim of a.
        const history = Array.from({ length: commits - 2 }, (_, index) =>
          index % 2 === 0 ? claimCommit('other', 'x') : releaseCommit('other', 'x'),
        );
        await appendCommits(long.bare, long.branch, [
          ...history,
          claimCommit('pool', 'a'),
          releaseCommit('pool', 'a'),
        ]);
        const started = Date.now();
        const result = await report(long.bare, long.branch, '--json', '--since', '1m');
        const ms = Date.now() - started;
        expect(result.code).toBe(0);
        const figures = JSON.parse(result.stdout);
        expect(figures.locks).toMatchObject([{ name: 'a', claims: 1, waits_unknown: 1 }]);
        return ms;
      } finally {
        await long.cleanup();
      }
    };
    const short = await timed(100);
    const long = await timed(100_000);
    console.log(`pool report --since 1m: ${short} ms for 100 commits, ${long} ms for 100000`);
    expect(long).toBeLessThan(short * 2 + 1_500);
  }, 180_000);
});
