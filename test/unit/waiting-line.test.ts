import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import {
  backPollMs,
  credibleRetryDelayMs,
  frontPollMs,
  goneAfterMs,
  goneAt,
  pollMs,
  showLifeAfterMs,
  sightKey,
  slowestPollMs,
  farPollMs,
  backSlowdown,
} from '../../src/lock/waiting-line.js';
import {
  encodeWho,
  WHO_MAX,
  compareEntries,
  entriesAhead,
  entryRef,
  linePrefix,
  parseEntryRef,
  type WaitingEntry,
} from '../../src/lock/line-entry.js';

const entry = (since: number, token: string, retryDelayMs = 10_000): WaitingEntry => ({
  since,
  retryDelayMs,
  token,
});

describe('waiting line refs', () => {
  it.each([
    ['master', 'envs', 'refs/pool-resource/waiting/master/envs/'],
    ['release/1.x', 'test envs', 'refs/pool-resource/waiting/release%2F1%2Ex/test%20envs/'],
    ['..', '.pool.lock', 'refs/pool-resource/waiting/%2E%2E/%2Epool%2Elock/'],
    [
      'ü@{1}',
      'a~b^c:d?e*f[g\\h',
      'refs/pool-resource/waiting/%C3%BC%40%7B1%7D/a%7Eb%5Ec%3Ad%3Fe%2Af%5Bg%5Ch/',
    ],
  ])('names the line of branch %j, pool %j as %s', (branch, pool, prefix) => {
    expect(linePrefix(branch, pool)).toBe(prefix);
  });

  it('makes names git accepts as refs, whatever the branch and pool are called', () => {
    for (const [branch, pool] of [
      ['feature/x', 'pool'],
      ['a..b', '.hidden'],
      ['x.lock', 'with space'],
      ['@', 'tab\tname'],
    ] as const) {
      const ref = entryRef(linePrefix(branch, pool), entry(1767225600000, 'abc123'));
      expect(() =>
        execFileSync('git', ['check-ref-format', ref], { stdio: 'ignore' }),
      ).not.toThrow();
    }
  });

  it('reads back the entry it named, and nothing else under the prefix', () => {
    const prefix = linePrefix('master', 'envs');
    const mine = entry(1767225600123, '0f3e9a', 1_000);
    expect(parseEntryRef(prefix, entryRef(prefix, mine))).toEqual(mine);
    // A put for several locks says how many; a put for one names none (as before counts).
    const several = { ...mine, count: 3 };
    expect(entryRef(prefix, several)).toBe(`${prefix}1767225600123-1000-0f3e9a-3`);
    expect(parseEntryRef(prefix, entryRef(prefix, several))).toEqual(several);
    expect(entryRef(prefix, { ...mine, count: 1 })).toBe(entryRef(prefix, mine));
    for (const other of [
      `${prefix}1767225600123-1000-abc-0`,
      `${prefix}1767225600123-1000-abc-12345`,
      `${prefix}1767225600123-1000`,
      `${prefix}1767225600123-1000-ABC`,
      `${prefix}x-1000-abc`,
      `${prefix}nested/1-1-abc`,
      `refs/pool-resource/waiting/master/other/1-1-abc`,
    ]) {
      expect(parseEntryRef(prefix, other)).toBeUndefined();
    }
  });

  it('names who waits in the ref, readably, within a file name, and reads it back', () => {
    const prefix = linePrefix('master', 'envs');
    const build = { ...entry(1767225600123, '0f3e9a', 1_000), count: 2, who: 'main/deploy/it #42' };
    const ref = entryRef(prefix, build);
    expect(ref).toBe(`${prefix}1767225600123-1000-0f3e9a-2.main%2Fdeploy%2Fit%20%2342`);
    expect(parseEntryRef(prefix, ref)).toEqual(build);
    // Whatever the names hold, git takes the ref and it reads back as it was written.
    for (const who of ['a..b.lock', 'x:y~z^[*?]\\', 'tab\there', 'ü/ß #1', '@{1}', '.hidden.']) {
      const named = entryRef(prefix, { ...build, who });
      expect(() =>
        execFileSync('git', ['check-ref-format', named], { stdio: 'ignore' }),
      ).not.toThrow();
      expect(parseEntryRef(prefix, named)?.who).toBe(who);
    }
    // A long name is cut to fit a file name on the server, ending in …, and still reads back.
    const long = parseEntryRef(prefix, entryRef(prefix, { ...build, who: 'team/'.repeat(200) }));
    expect(long?.who?.endsWith('…')).toBe(true);
    expect(encodeWho(long!.who!).length).toBeLessThanOrEqual(WHO_MAX);
    expect(entryRef(prefix, long!).length - prefix.length).toBeLessThan(255);
    // Another spelling of the same name is not an entry: taking it out would name another ref.
    expect(parseEntryRef(prefix, `${prefix}1-1-abc.main%2fdeploy`)).toBeUndefined();
    expect(parseEntryRef(prefix, `${prefix}1-1-abc.%E0%A4`)).toBeUndefined();
    expect(parseEntryRef(prefix, `${prefix}1-1-abc.`)).toBeUndefined();
  });

  it('keeps the line of a branch apart from that of a branch named like its pool folder', () => {
    // Branch "a" with pool "b/…" cannot be spelled: a pool is one folder, and "/" is encoded.
    expect(linePrefix('a/b', 'c')).not.toBe(linePrefix('a', 'b/c'));
    const prefix = linePrefix('a', 'b');
    expect(parseEntryRef(prefix, `${linePrefix('a', 'b')}1-1-x`)).toBeDefined();
    expect(parseEntryRef(prefix, `${linePrefix('a%2Fb', 'c')}1-1-x`)).toBeUndefined();
  });
});

describe('waiting line order', () => {
  it('puts the earlier first and breaks ties by token, the same for everyone', () => {
    const line = [entry(300, 'b'), entry(100, 'z'), entry(300, 'a'), entry(200, 'c')];
    expect([...line].sort(compareEntries).map((e) => e.token)).toEqual(['z', 'c', 'a', 'b']);
  });

  it('counts ahead of a put only those before it, and all of them before it joins', () => {
    const line = [entry(100, 'a'), entry(200, 'b'), entry(300, 'c')];
    expect(entriesAhead(line, entry(200, 'b')).map((e) => e.token)).toEqual(['a']);
    expect(entriesAhead(line, entry(250, 'new')).map((e) => e.token)).toEqual(['a', 'b']);
    expect(entriesAhead(line, entry(50, 'first'))).toEqual([]);
  });
});

describe('waiting line timings', () => {
  it.each([
    [10_000, 2_000],
    [1_000, 200],
    [250, 100],
    [50, 100],
    [0, 100],
  ])('polls near the front with retry_delay %i ms every %i ms', (retryDelayMs, poll) => {
    expect(frontPollMs(retryDelayMs)).toBe(poll);
  });

  it.each([
    [10_000, 10_000],
    [100, 100],
    [20, 100],
    [0, 100],
  ])('polls elsewhere with retry_delay %i ms every %i ms, never faster', (retryDelayMs, poll) => {
    expect(pollMs(retryDelayMs)).toBe(poll);
  });

  it.each([0, 100, 1_000, 10_000, 60_000])(
    'far back in line with retry_delay %i ms, polls slowly enough to save polls and soon enough to show it is alive before the puts behind take it for gone',
    (retryDelayMs) => {
      const slowest = slowestPollMs(retryDelayMs);
      expect(slowest).toBeGreaterThan(pollMs(retryDelayMs));
      // Seen a poll late, a stall still leaves a second for the push that shows life.
      expect(slowest + 1_000).toBeLessThanOrEqual(
        goneAfterMs(entry(0, 'a', retryDelayMs), retryDelayMs),
      );
    },
  );

  it.each([0, 100, 1_000, 10_000, 60_000])(
    'far back with retry_delay %i ms, polls by fetching at most half as often as by looking, and sees a stall in time to show it is alive',
    (retryDelayMs) => {
      const far = farPollMs(retryDelayMs);
      expect(far).toBeGreaterThanOrEqual(slowestPollMs(retryDelayMs));
      // A look needs a second look a poll later to tell a stall: two looks against one fetch.
      expect(far).toBeLessThanOrEqual(2 * slowestPollMs(retryDelayMs));
      // One fetch sees the stall: a second is left for the push that shows life.
      expect(far + 1_000).toBeLessThanOrEqual(
        goneAfterMs(entry(0, 'a', retryDelayMs), retryDelayMs),
      );
    },
  );

  it.each([
    // retry_delay, locks to go before the front, how long the put has watched the line, how many
    // locks the puts that left it ahead took meanwhile, polls by fetching, the wait between polls
    [100, 4, 5_000, 9, false, 1_000],
    [100, 8, 5_000, 9, false, 2_000],
    [100, 8, 5_000, 9, true, 2_000],
    [100, 1, 5_000, 49, false, 100],
    [100, 4, undefined, 0, false, 100],
    [1_000, 4, 5_000, 9, false, 1_000],
    [1_000, 12, 5_000, 9, false, 3_000],
    [1_000, 12, 5_000, 9, true, 3_000],
    [1_000, 4, 5_000, 9, true, 1_000],
    // A line that barely moves (locks held for long): up to slowestPollMs, or farPollMs, near the
    // front; further back, backSlowdown times that.
    [1_000, 3, 60_000, 0, false, 2_000],
    [1_000, 3, 60_000, 0, true, 3_000],
    [1_000, 4, 60_000, 0, false, 4_000],
    [1_000, 4, 60_000, 0, true, 6_000],
    [1_000, 12, 60_000, 0, false, 20_000],
    [1_000, 12, 600_000, 2, false, 20_000],
    [10_000, 40, 3_600_000, 0, false, 110_000],
    [10_000, 40, 3_600_000, 0, true, 210_000],
    // Nobody ahead has left yet: slower than near the front only once watched twice as long (the
    // line may have only just formed).
    [1_000, 12, 3_000, 0, false, 2_000],
    [1_000, 12, 3_000, 0, true, 3_000],
    [1_000, 12, 20_000, 0, false, 10_000],
    // One has: the line's pace as seen.
    [1_000, 12, 3_000, 1, false, 9_000],
    // One lock from the front of a line seen moving faster than retry_delay a lock: as the line
    // moves, down to the front's pace (frontPollMs), not to learn of its turn a retry_delay late.
    [1_000, 1, 4_000, 9, false, 200],
    [1_000, 1, 3_000, 2, false, 500],
    [1_000, 1, 1_000, 0, false, 1_000],
    [1_000, 2, 4_000, 9, false, 1_000],
  ])(
    'further back with retry_delay %i ms, %i locks from the front, having watched the line %s ms as %i locks left ahead (fetching: %s), polls every %i ms',
    (retryDelayMs, toFront, watchedMs, departed, fetches, poll) => {
      const seen = watchedMs === undefined ? undefined : { watchedMs, departed };
      expect(backPollMs(retryDelayMs, toFront, seen, fetches)).toBe(poll);
    },
  );

  it.each([
    // locks to go before the front, how many times slower than near it a put may poll
    [-2, 1],
    [0, 1],
    [3, 1],
    [4, 2],
    [5, 3],
    [8, 6],
    [12, 10],
    [50, 10],
  ])(
    '%i locks from the front, may poll up to %i times as slowly as near it',
    (toFront, slowdown) => {
      expect(backSlowdown(toFront)).toBe(slowdown);
    },
  );

  it('takes a put to be gone only after twice its own retry_delay and a margin', () => {
    expect(goneAfterMs(entry(0, 'a', 1_000), 1_000)).toBe(4_000);
    expect(goneAfterMs(entry(0, 'a', 60_000), 60_000)).toBe(122_000);
  });

  it.each([
    // entry's retry_delay, the reader's, what the reader believes of it
    [3_600_000, 200, 600],
    [3_600_000, 10_000, 30_000],
    [3_600_000, 3_600_000, 60_000],
    [1_000, 200, 600],
    [500, 200, 500],
    [3_600_000, 0, 300],
  ])(
    'believes an entry claiming retry_delay %i ms, read by a put with %i ms, up to %i ms',
    (claimed, own, believed) => {
      expect(credibleRetryDelayMs(entry(0, 'a', claimed), own)).toBe(believed);
    },
  );

  it('never lets an entry keep a free lock for more than 2 minutes and 2 s, whatever it claims', () => {
    for (const own of [0, 200, 10_000, 3_600_000])
      expect(goneAfterMs(entry(0, 'a', Number.MAX_SAFE_INTEGER), own)).toBeLessThanOrEqual(122_000);
    expect(goneAfterMs(entry(0, 'a', 3_600_000), 200)).toBe(3_200);
  });

  it('judges every entry ahead from when the lock became free, unless it showed life since', () => {
    const dead = [1, 2, 3].map((n) => ({ ...entry(n, `dead${n}`, 1_000), at: 'old' }));
    const stall = {
      since: 50_000,
      tips: new Set(['release']),
      sightings: new Map<string, number>(dead.map((e) => [sightKey(e), 40_000])),
      watchingSince: 40_000,
    };
    // However many there are: one grace, from the same moment.
    expect(dead.map((e) => goneAt(e, stall, 1_000))).toEqual([54_000, 54_000, 54_000]);
    // A put that moved its entry to a tip of the stall is judged from when that was seen.
    const alive = { ...entry(4, 'alive', 1_000), at: 'release' };
    stall.sightings.set(sightKey(alive), 51_500);
    expect(goneAt(alive, stall, 1_000)).toBe(55_500);
    // Or moved it anywhere while this put watched (to a tip it never saw, say).
    const moved = { ...entry(5, 'moved', 1_000), at: 'unseen' };
    stall.sightings.set(sightKey(moved), 52_000);
    expect(goneAt(moved, stall, 1_000)).toBe(56_000);
    // Seen so since this put first looked, it counts from the stall only.
    stall.sightings.set(sightKey(moved), 40_000);
    expect(goneAt(moved, stall, 1_000)).toBe(54_000);
    // It shows that before the puts behind it would take it for gone.
    expect(50_000 + showLifeAfterMs(1_000)).toBeLessThan(goneAt(dead[0]!, stall, 1_000));
  });
});
