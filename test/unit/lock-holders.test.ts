import { describe, expect, it } from 'vitest';
import { holderFromCommit, renewedLeases } from '../../src/repo/claim-trailers.js';
import { describeHolder } from '../../src/repo/lock-holders.js';
import { ProgressReporter } from '../../src/run/progress.js';
import { Logger } from '../../src/base/logger.js';

const authoredAt = new Date('2026-01-01T00:00:00Z');
const author = 'Alice <alice@example.com>';

describe('holderFromCommit', () => {
  const cases: [string, { trailers: string; body: string }, { by: string; since: string }][] = [
    [
      'holder trailers',
      {
        trailers: 'Claim-Token: t\nClaimed-At: 2026-02-02T02:02:02Z\nClaimed-By: https://ci/b/1\n',
        body: 'claiming: a\n\nBuild URL: https://ci/b/1\n\nClaim-Token: t\n',
      },
      { by: 'https://ci/b/1', since: '2026-02-02T02:02:02.000Z' },
    ],
    [
      'older commit: Build URL line and the commit date',
      { trailers: '', body: 'claiming: a\n\nBuild URL: https://old/b/7\n' },
      { by: 'https://old/b/7', since: '2026-01-01T00:00:00.000Z' },
    ],
    [
      'Claimed-By "unknown" falls back to the Build URL line, then the author',
      { trailers: 'Claimed-By: unknown\n', body: 'claiming: a\n\nBuild URL: unknown\n' },
      { by: author, since: '2026-01-01T00:00:00.000Z' },
    ],
    [
      'hand-made commit: the author',
      { trailers: '', body: 'took it\n' },
      { by: author, since: '2026-01-01T00:00:00.000Z' },
    ],
    [
      'an unreadable Claimed-At falls back to the commit date',
      { trailers: 'Claimed-At: yesterday\nClaimed-By: bob@desk\n', body: '' },
      { by: 'bob@desk', since: '2026-01-01T00:00:00.000Z' },
    ],
  ];
  for (const [title, facts, expected] of cases) {
    it(title, () => {
      const { by, since } = holderFromCommit({ ...facts, author, authoredAt });
      expect({ by, since: since.toISOString() }).toEqual(expected);
    });
  }
});

describe('renewedLeases', () => {
  /** A `renewing: NAME` commit with the claim's token and its new lease, as a holder log has it. */
  function renewal(name: string, token: string, lease: string) {
    const trailers = `Claim-Token: ${token}\nLease-Expires: ${lease}\n`;
    return {
      commit: name,
      time: 0,
      author,
      trailers,
      body: `renewing: ${name}\n\n${trailers}`,
      paths: [],
    };
  }

  it('gives every lock of a set, which share one token, its own latest renewal', () => {
    const a = { name: 'a', token: 't' };
    const b = { name: 'b', token: 't' };
    const log = [
      renewal('b', 't', '2026-03-03T03:00:00Z'),
      renewal('a', 't', '2026-03-03T02:00:00Z'),
      renewal('a', 't', '2026-03-03T01:00:00Z'),
      renewal('c', 't', '2026-03-03T09:00:00Z'),
      renewal('a', 'other', '2026-03-03T09:00:00Z'),
    ];
    const leases = renewedLeases(log, [a, b]);
    expect([leases.get(a)?.toISOString(), leases.get(b)?.toISOString()]).toEqual([
      '2026-03-03T02:00:00.000Z',
      '2026-03-03T03:00:00.000Z',
    ]);
  });
});

describe('describeHolder', () => {
  it('says who, since when and for how long', () => {
    const since = new Date('2026-01-01T00:00:00Z');
    expect(
      describeHolder({ name: 'a', state: 'claimed', by: 'x', since }, since.getTime() + 90_000, 16),
    ).toBe('by x since 2026-01-01T00:00:00Z (for 1m30s)');
  });
  it('says how far it looked when the claiming commit was not found', () => {
    expect(describeHolder({ name: 'a', state: 'claimed' }, 0, 1360)).toBe(
      'holder not found in the last 1360 commits',
    );
  });
});

describe('ProgressReporter', () => {
  function reporter() {
    const lines: string[] = [];
    let now = 0;
    const progress = new ProgressReporter(
      new Logger((text) => lines.push(text.trimEnd())),
      () => now,
    );
    return { lines, progress, advance: (ms: number) => (now += ms) };
  }

  it('one line when the situation changes, a heartbeat at most every 30 s, nothing per poll', async () => {
    const { lines, progress, advance } = reporter();
    for (let poll = 0; poll < 200; poll++) {
      await progress.waiting('lock "a" is claimed', ['a'], poll * 250);
      advance(250);
    }
    expect(lines).toEqual([
      'waiting for lock: lock "a" is claimed',
      'still waiting for lock (30s): lock "a" is claimed',
    ]);
  });

  it('a different wanted set is a change even when the reason reads the same', async () => {
    const { lines, progress } = reporter();
    await progress.waiting('no unclaimed lock (2 claimed, 0 unclaimed)', ['a', 'b'], 0);
    await progress.waiting('no unclaimed lock (2 claimed, 0 unclaimed)', ['a', 'b'], 0);
    await progress.waiting('no unclaimed lock (2 claimed, 0 unclaimed)', ['a', 'c'], 0);
    expect(lines).toHaveLength(2);
  });

  it('names each wanted lock that is claimed with its holder, longest held (or beyond reach) first', async () => {
    const lines: string[] = [];
    const at = (iso: string) => new Date(iso);
    const records = [
      {
        name: 'c',
        state: 'claimed' as const,
        by: 'https://ci/3',
        since: at('2026-01-01T02:00:00Z'),
      },
      {
        name: 'a',
        state: 'claimed' as const,
        by: 'https://ci/1',
        since: at('2026-01-01T00:00:00Z'),
      },
      { name: 'd', state: 'claimed' as const },
      {
        name: 'b',
        state: 'claimed' as const,
        by: 'https://ci/2',
        since: at('2026-01-01T01:00:00Z'),
      },
    ];
    const progress = new ProgressReporter(
      new Logger((text) => lines.push(text.trimEnd())),
      () => Date.parse('2026-01-01T03:00:00Z'),
      {
        searchedDepth: 1360,
        claimed: async (wanted) => records.filter((record) => wanted.includes(record.name)),
      },
    );
    await progress.waiting('lock "a" in pool "p" is claimed', ['a'], 0);
    await progress.waiting('lock "d" in pool "p" is claimed', ['d'], 0);
    await progress.waiting(
      'no unclaimed lock in pool "p" (4 claimed, 0 unclaimed)',
      ['a', 'b', 'c', 'd'],
      0,
    );
    await progress.waiting('lock "e" in pool "p" is unclaimed', ['e'], 0);
    expect(lines).toEqual([
      'waiting for lock: lock "a" in pool "p" is claimed; "a" held by https://ci/1 since 2026-01-01T00:00:00Z (for 3h)',
      'waiting for lock: lock "d" in pool "p" is claimed; "d": holder not found in the last 1360 commits',
      'waiting for lock: no unclaimed lock in pool "p" (4 claimed, 0 unclaimed); "d": holder not found in the last 1360 commits, "a" held by https://ci/1 since 2026-01-01T00:00:00Z (for 3h), "b" held by https://ci/2 since 2026-01-01T01:00:00Z (for 2h), and 1 more',
      'waiting for lock: lock "e" in pool "p" is unclaimed',
    ]);
  });

  it('after a lost race the next wait gets its line again', async () => {
    const { lines, progress } = reporter();
    await progress.waiting('r', ['a'], 0);
    progress.conflict('a');
    await progress.waiting('r', ['a'], 0);
    expect(lines.filter((line) => line.startsWith('waiting for lock'))).toHaveLength(2);
  });
});
