import { describe, expect, it } from 'vitest';
import { parseHoldHistory } from '../../src/repo/hold-history.js';

/** `git log -z --reverse --format='%ct %s'` output for these commits, oldest first. */
const log = (...commits: [number, string][]) =>
  commits.map(([time, subject]) => `${time} ${subject}`).join('\0');

describe('parseHoldHistory', () => {
  it.each([
    ['no commits', '', {}, []],
    ['a claim still held', log([100, 'claiming: a']), { a: 100 }, []],
    ['a hold that ended', log([100, 'claiming: a'], [160, 'unclaiming: a']), {}, [60]],
    [
      'holds of two locks, interleaved',
      log(
        [100, 'claiming: a'],
        [110, 'claiming: b'],
        [130, 'unclaiming: a'],
        [140, 'claiming: a'],
        [200, 'unclaiming: b'],
      ),
      { a: 140 },
      [30, 90],
    ],
    [
      'a release whose claim lies before the commits read, and a removal',
      log([100, 'unclaiming: a'], [120, 'adding claimed: b'], [150, 'removing: b']),
      {},
      [30],
    ],
    [
      'other subjects, and a lock name with spaces',
      log([100, 'adding unclaimed: c'], [105, 'claiming: my lock'], [106, 'updating: c']),
      { 'my lock': 105 },
      [],
    ],
    [
      'only the newest eight holds, and none that ended a day before the newest commit',
      log(
        [1_000, 'claiming: old'],
        [1_001, 'unclaiming: old'],
        ...Array.from({ length: 10 }, (_, n): [number, string][] => [
          [100_000 + n * 10, 'claiming: a'],
          [100_000 + n * 10 + n + 1, 'unclaiming: a'],
        ]).flat(),
      ),
      {},
      [3, 4, 5, 6, 7, 8, 9, 10],
    ],
  ])('%s', (_, out, claimed: Record<string, number>, holds: number[]) => {
    const history = parseHoldHistory(out);
    expect(Object.fromEntries(history.claimedAt)).toEqual(
      Object.fromEntries(Object.entries(claimed).map(([name, at]) => [name, at * 1_000])),
    );
    expect(history.holds).toEqual(holds.map((seconds) => seconds * 1_000));
  });

  it('lists when each lock was claimed, oldest first (a lock added claimed is no claim)', () => {
    const out = log(
      [100, 'claiming: a'],
      [110, 'adding claimed: b'],
      [130, 'unclaiming: a'],
      [140, 'claiming: a'],
      [150, 'updating: c'],
      [160, 'claiming: c'],
    );
    expect(parseHoldHistory(out).claims).toEqual([100_000, 140_000, 160_000]);
  });
});
