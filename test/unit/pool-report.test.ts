// The report's figures and page from a history in memory: clipping to the window, percentiles by
// nearest rank, and text from the repository never becoming markup.
import { describe, expect, it } from 'vitest';
import { buildReport, reportHtml } from '../../src/commands/pool/report.js';
import { shortHolder } from '../../src/commands/pool/holder.js';
import type { LockChange, PoolHistory } from '../../src/repo/pool-history.js';

const MINUTE = 60_000;
const until = Date.parse('2026-01-01T12:00:00Z');
const since = until - 60 * MINUTE;

function change(name: string, minutesAgo: number, entered: 'A' | 'D', trailers = ''): LockChange {
  return {
    commit: `c${minutesAgo}`,
    at: until - minutesAgo * MINUTE,
    name,
    state: 'claimed',
    change: entered,
    trailers,
    body: '',
    author: 'Someone <someone@example.com>',
  };
}

describe('pool report figures', () => {
  it('percentiles by nearest rank over the claims inside the window', () => {
    const waits = ['1s', '2s', '3s', '4s', '100s'];
    const changes = waits.flatMap((waited, index) => [
      change('a', 50 - index * 10, 'A', `Claimed-By: op@desk\nWaited: ${waited}`),
      change('a', 45 - index * 10, 'D'),
    ]);
    const history: PoolHistory = { start: new Map([['a', 'unclaimed']]), changes, commits: 11 };
    const { figures } = buildReport({
      pool: 'p',
      history,
      locks: [{ name: 'a', state: 'unclaimed' }],
      holders: [],
      line: [],
      since,
      until,
    });
    expect(figures.locks[0]).toMatchObject({
      claims: 5,
      held_fraction: expect.closeTo(25 / 60, 3),
      wait_p50_s: 3,
      wait_p95_s: 100,
      wait_max_s: 100,
    });
  });

  it('a lock held since before the history read counts from the window start, as unknown', () => {
    const history: PoolHistory = { start: new Map([['a', 'claimed']]), changes: [], commits: 64 };
    const report = buildReport({
      pool: 'p',
      history,
      locks: [{ name: 'a', state: 'claimed' }],
      holders: [],
      line: [],
      since,
      until,
    });
    expect(report.figures.locks[0]).toMatchObject({ claims: 0, held_fraction: 1 });
    expect(report.holds.get('a')).toEqual([{ from: since, to: until, open: true }]);
    expect(reportHtml(report)).toContain('data-holder="claimed before the history read"');
  });

  it('escapes lock names and holders from the repository', () => {
    const evil = '<script>alert(1)</script>';
    const history: PoolHistory = {
      start: new Map(),
      changes: [change(`x${evil}`, 30, 'A', `Claimed-By: ${evil}`)],
      commits: 2,
    };
    const page = reportHtml(
      buildReport({
        pool: `"p"${evil}`,
        history,
        locks: [{ name: `x${evil}`, state: 'claimed' }],
        holders: [{ name: `x${evil}`, by: evil, trailers: '' }],
        line: [],
        since,
        until,
      }),
    );
    expect(page).not.toContain('<script');
    expect(page).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
  });
});

describe('short holder', () => {
  it.each([
    [
      'https://ci.example.com/teams/main/pipelines/deploy/jobs/smoke/builds/12',
      '',
      'main/deploy/smoke #12',
    ],
    [
      'https://ci.example.com/teams/main/pipelines/p/jobs/j%20k/builds/3.1?vars=%7B%7D',
      '',
      'main/p/j k #3.1',
    ],
    ['https://ci.example.com/builds/99', '', 'build #99'],
    ['alice@desk', '', 'alice@desk'],
    [
      'https://elsewhere/x',
      'Build-Team: t\nBuild-Pipeline: p\nBuild-Job: j\nBuild-Name: 4',
      't/p/j #4',
    ],
  ])('%s → %s', (by, trailers, short) => {
    expect(shortHolder(by, trailers)).toBe(short);
  });
});
