import { describe, expect, it } from 'vitest';
import { claimsBefore, LinePace, PACE_WINDOW_DELAYS } from '../../src/lock/line-pace.js';
import type { LockStore } from '../../src/lock/lock-store.js';
import { backPollMs } from '../../src/lock/waiting-line.js';

const since = 1_000_000;
/** Claims every `everyMs`, the newest `lastAgo` ms before `since`, `count` of them, oldest first. */
const claims = (count: number, everyMs: number, lastAgo = 0) =>
  Array.from({ length: count }, (_, n) => since - lastAgo - (count - 1 - n) * everyMs);

describe('claimsBefore', () => {
  it('reads the claims before the put first looked as that long watched, that many departures', () => {
    // Ten claims 3 s apart, the last as the put looked: 27 s from the first (half a second less,
    // for the commit time kept to the second), nine claims after it.
    expect(claimsBefore(claims(10, 3_000), since, 1_000)).toEqual({ spanMs: 26_500, claims: 9 });
  });

  it('counts the time since the last claim too: a line that has slowed reads slower', () => {
    expect(claimsBefore(claims(10, 3_000, 20_000), since, 1_000)).toEqual({
      spanMs: 46_500,
      claims: 9,
    });
  });

  it.each([
    ['fewer than three claims', claims(2, 3_000)],
    ['claims older than the window', claims(10, 3_000, PACE_WINDOW_DELAYS * 1_000 + 30_000)],
    ['claims after the put first looked (another clock ahead)', claims(10, 3_000, -40_000)],
    ['no claims', []],
  ])('tells nothing from %s', (_, read) => {
    expect(claimsBefore(read, since, 1_000)).toBeUndefined();
  });

  it('keeps only the claims within the window, which grows with retry_delay', () => {
    const read = claims(30, 10_000);
    // retry_delay 1s: the last 60 s, seven claims (six after the oldest).
    expect(claimsBefore(read, since, 1_000)).toEqual({ spanMs: 59_500, claims: 6 });
    // retry_delay 10s: all thirty.
    expect(claimsBefore(read, since, 10_000)?.claims).toBe(29);
  });
});

describe('backPollMs with the claims before the watch', () => {
  it('a put just joined ten locks from the front reads the pace from the claims, not its first departures', () => {
    // Two puts left within a second of its join: alone, a lock every third of a second.
    const seen = { watchedMs: 1_000, departed: 2 };
    expect(backPollMs(1_000, 10, seen, true)).toBeCloseTo((10 * 1_000) / 3 / 2);
    // The claims show a lock every 3 s for the half minute before: half the time ten locks take.
    const before = { spanMs: 27_000, claims: 9 };
    expect(backPollMs(1_000, 10, { ...seen, before }, true)).toBeCloseTo((10 * 28_000) / 12 / 2);
  });

  it('still never slower than farPollMs times backSlowdown', () => {
    // Ten locks from the front, a lock a minute: capped at 3 s × 8.
    const before = { spanMs: 600_000, claims: 9 };
    expect(backPollMs(1_000, 10, { watchedMs: 1_000, departed: 1, before }, true)).toBe(24_000);
  });

  it('with claims read, does not take a line nobody has left since it joined for one just formed', () => {
    const seen = { watchedMs: 1_000, departed: 0 };
    // Alone: the line may have only just formed (puts that all joined at once), 3 s at most.
    expect(backPollMs(1_000, 10, seen, true)).toBe(3_000);
    // The claims show a lock every 3 s: half the time ten locks take.
    const before = { spanMs: 27_000, claims: 9 };
    expect(backPollMs(1_000, 10, { ...seen, before }, true)).toBeCloseTo((10 * 28_000) / 10 / 2);
  });
});

describe('LinePace', () => {
  /** A pace over a store whose copy holds `read` claims, counting its reads of them. */
  const pace = (read: number[]) => {
    let reads = 0;
    let now = since;
    const store = {
      holdHistory: async () => {
        reads++;
        return { claimedAt: new Map(), holds: [], claims: read };
      },
    } as unknown as LockStore;
    const clock = { now: () => now, sleep: async () => {}, random: () => 0.5 };
    const linePace = new LinePace(store, clock, 1_000);
    return { linePace, reads: () => reads, later: (ms: number) => (now += ms) };
  };

  it('far back, reads the claims before its first look once, and counts what it saw leave', async () => {
    const { linePace, reads, later } = pace(claims(10, 3_000));
    later(2_000);
    linePace.departedAhead(2);
    const before = { spanMs: 26_500, claims: 9 };
    expect(await linePace.seen(since, true)).toEqual({ watchedMs: 2_000, departed: 2, before });
    later(1_000);
    expect(await linePace.seen(since, true)).toEqual({ watchedMs: 3_000, departed: 2, before });
    expect(reads()).toBe(1);
  });

  it('nearer the front, where looks cost the server nothing, goes by what it saw alone', async () => {
    const { linePace, reads, later } = pace(claims(10, 3_000));
    later(2_000);
    expect(await linePace.seen(since, false)).toEqual({ watchedMs: 2_000, departed: 0 });
    expect(reads()).toBe(0);
  });

  it('tells nothing before the first look', async () => {
    const { linePace, reads } = pace(claims(10, 3_000));
    expect(await linePace.seen(undefined, true)).toBeUndefined();
    expect(reads()).toBe(0);
  });
});
