import { describe, expect, it } from 'vitest';
import { commitEvents, commitFilter } from '../../src/repo/pool-events.js';

const commit = (changes: [string, string][], reclaim = false) => ({
  reclaim,
  changes: changes.map(([status, path]) => ({ status, path })),
});

describe('commitEvents', () => {
  it.each([
    [
      'a claim',
      commit([
        ['A', 'p/claimed/a'],
        ['D', 'p/unclaimed/a'],
      ]),
      [['claimed', 'a']],
    ],
    [
      'a release',
      commit([
        ['D', 'p/claimed/a'],
        ['A', 'p/unclaimed/a'],
      ]),
      [['released', 'a']],
    ],
    [
      'a release with the reclaim trailer',
      commit(
        [
          ['D', 'p/claimed/a'],
          ['A', 'p/unclaimed/a'],
        ],
        true,
      ),
      [['reclaimed', 'a']],
    ],
    ['adding unclaimed', commit([['A', 'p/unclaimed/a']]), [['added', 'a']]],
    ['adding claimed', commit([['A', 'p/claimed/a']]), [['added', 'a']]],
    ['removing', commit([['D', 'p/claimed/a']]), [['removed', 'a']]],
    ['updating', commit([['M', 'p/unclaimed/a']]), [['updated', 'a']]],
    ['a file becoming a symlink', commit([['T', 'p/unclaimed/a']]), [['updated', 'a']]],
    [
      'a claim moving a name with spaces',
      commit([
        ['A', 'p/claimed/a b'],
        ['D', 'p/unclaimed/a b'],
      ]),
      [['claimed', 'a b']],
    ],
    ['a renewal (no change)', commit([]), []],
    [
      'dotfiles, nested and other files',
      commit([
        ['A', 'p/claimed/.gitkeep'],
        ['A', 'p/unclaimed/dir/f'],
        ['M', 'p/README'],
        ['A', 'q/claimed/a'],
        ['A', 'pp/claimed/a'],
      ]),
      [],
    ],
    [
      'several locks in one commit',
      commit([
        ['A', 'p/claimed/a'],
        ['D', 'p/unclaimed/a'],
        ['A', 'p/unclaimed/b'],
        ['M', 'p/claimed/c'],
      ]),
      [
        ['claimed', 'a'],
        ['added', 'b'],
        ['updated', 'c'],
      ],
    ],
    [
      'the same name added to both folders',
      commit([
        ['A', 'p/claimed/a'],
        ['A', 'p/unclaimed/a'],
      ]),
      [
        ['added', 'a'],
        ['added', 'a'],
      ],
    ],
  ])('%s', (_, record, expected) => {
    expect(commitEvents('p', record).map(({ event, name }) => [event, name])).toEqual(expected);
  });
});

describe('commitFilter', () => {
  const claimA = commit([
    ['A', 'p/claimed/a'],
    ['D', 'p/unclaimed/a'],
  ]);
  const claimAaddB = commit([
    ['A', 'p/claimed/a'],
    ['D', 'p/unclaimed/a'],
    ['A', 'p/unclaimed/env-b'],
  ]);
  const reclaimA = commit(
    [
      ['D', 'p/claimed/a'],
      ['A', 'p/unclaimed/a'],
    ],
    true,
  );
  const gitkeep = commit([['M', 'p/claimed/.gitkeep']]);
  const all = ['claimed', 'released', 'reclaimed', 'added', 'removed', 'updated'] as const;

  it('is no filter at all for every kind and every lock, as by default', () => {
    expect(commitFilter('p', { events: [...all] })).toBeUndefined();
    expect(commitFilter('p', { events: [...all], locks: ['*'] })).toBeDefined();
  });

  it('lets through a commit with one change of a listed kind', () => {
    const released = commitFilter('p', { events: ['released'] })!;
    expect([claimA, reclaimA, gitkeep].map(released)).toEqual([false, false, false]);
    const claimed = commitFilter('p', { events: ['claimed', 'reclaimed'] })!;
    expect([claimA, claimAaddB, reclaimA, gitkeep].map(claimed)).toEqual([true, true, true, false]);
    const added = commitFilter('p', { events: ['added'] })!;
    expect([claimA, claimAaddB].map(added)).toEqual([false, true]);
  });

  it('takes globs on lock names, and both must hold for the same change', () => {
    const envLocks = commitFilter('p', { events: [...all], locks: ['env-*'] })!;
    expect([claimA, claimAaddB].map(envLocks)).toEqual([false, true]);
    const oneLetter = commitFilter('p', { events: [...all], locks: ['x', '?'] })!;
    expect([claimA, claimAaddB, gitkeep].map(oneLetter)).toEqual([true, true, false]);
    // claimAaddB claims a and adds env-b: no claim of an env-* lock.
    const envClaims = commitFilter('p', { events: ['claimed'], locks: ['env-*'] })!;
    expect([claimA, claimAaddB].map(envClaims)).toEqual([false, false]);
  });
});
