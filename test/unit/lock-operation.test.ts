import { describe, expect, it } from 'vitest';
import { decide, type ResolvedOperation } from '../../src/lock/lock-operation.js';
import type { PoolState } from '../../src/lock/pool-state.js';

function pool(claimed: string[], unclaimed: string[]): PoolState {
  return { claimed: new Set(claimed), unclaimed: new Set(unclaimed), irregular: new Map() };
}

const meta = Buffer.from('{}');
const first = () => 0;

describe('decide', () => {
  it.each<[string, ResolvedOperation, PoolState, string, string?]>([
    [
      'acquire takes an unclaimed lock',
      { kind: 'acquire' },
      pool(['a'], ['b']),
      'commit',
      'claiming: b',
    ],
    ['acquire waits when none is free', { kind: 'acquire' }, pool(['a'], []), 'wait'],
    [
      'claim takes the named lock',
      { kind: 'claim', name: 'b' },
      pool([], ['a', 'b']),
      'commit',
      'claiming: b',
    ],
    ['claim waits while it is claimed', { kind: 'claim', name: 'a' }, pool(['a'], []), 'wait'],
    ['claim waits while it exists nowhere', { kind: 'claim', name: 'x' }, pool([], []), 'wait'],
    [
      'release moves it back',
      { kind: 'release', name: 'a' },
      pool(['a'], []),
      'commit',
      'unclaiming: a',
    ],
    ['release of an unclaimed lock fails', { kind: 'release', name: 'a' }, pool([], ['a']), 'fail'],
    ['release of a missing lock fails', { kind: 'release', name: 'a' }, pool([], []), 'fail'],
    [
      'remove deletes a claimed lock',
      { kind: 'remove', name: 'a' },
      pool(['a'], []),
      'commit',
      'removing: a',
    ],
    ['remove of an unclaimed lock fails', { kind: 'remove', name: 'a' }, pool([], ['a']), 'fail'],
    [
      'add creates it unclaimed',
      { kind: 'add', name: 'n', metadata: meta },
      pool([], []),
      'commit',
      'adding unclaimed: n',
    ],
    [
      'add of an existing name fails',
      { kind: 'add', name: 'a', metadata: meta },
      pool(['a'], []),
      'fail',
    ],
    [
      'add_claimed creates it claimed',
      { kind: 'add_claimed', name: 'n', metadata: meta },
      pool([], []),
      'commit',
      'adding claimed: n',
    ],
    [
      'add_claimed of an existing name fails',
      { kind: 'add_claimed', name: 'a', metadata: meta },
      pool([], ['a']),
      'fail',
    ],
    [
      'update rewrites an unclaimed lock',
      { kind: 'update', name: 'a', metadata: meta },
      pool([], ['a']),
      'commit',
      'updating: a',
    ],
    [
      'update adds a missing lock',
      { kind: 'update', name: 'n', metadata: meta },
      pool([], []),
      'commit',
      'adding unclaimed: n',
    ],
    [
      'update waits while claimed',
      { kind: 'update', name: 'a', metadata: meta },
      pool(['a'], []),
      'wait',
    ],
    ['check waits while claimed', { kind: 'check', name: 'a' }, pool(['a'], []), 'wait'],
    ['check sees an unclaimed lock', { kind: 'check', name: 'a' }, pool([], ['a']), 'observed'],
    ['check of a missing lock fails', { kind: 'check', name: 'a' }, pool([], []), 'fail'],
    [
      'check_unclaimed waits while unclaimed',
      { kind: 'check_unclaimed', name: 'a' },
      pool([], ['a']),
      'wait',
    ],
    [
      'check_unclaimed sees a claimed lock',
      { kind: 'check_unclaimed', name: 'a' },
      pool(['a'], []),
      'observed',
    ],
    [
      'check_unclaimed of a missing lock fails',
      { kind: 'check_unclaimed', name: 'a' },
      pool([], []),
      'fail',
    ],
  ])('%s', (_title, operation, state, kind, subject) => {
    const decision = decide(operation, state, 'p', first);
    expect(decision.kind).toBe(kind);
    if (subject) expect(decision).toMatchObject({ commits: [{ subject }] });
  });

  it('acquire picks among the unclaimed locks by the random source', () => {
    const state = pool([], ['a', 'b', 'c']);
    expect(decide({ kind: 'acquire' }, state, 'p', () => 0)).toMatchObject({
      commits: [{ name: 'a' }],
    });
    expect(decide({ kind: 'acquire' }, state, 'p', () => 0.5)).toMatchObject({
      commits: [{ name: 'b' }],
    });
    expect(decide({ kind: 'acquire' }, state, 'p', () => 0.99)).toMatchObject({
      commits: [{ name: 'c' }],
    });
  });

  it('acquire never takes a name that is also in claimed/', () => {
    const state: PoolState = {
      ...pool(['a'], ['a', 'b', 'c']),
      irregular: new Map([['claimed/b', 'a directory']]),
    };
    expect(decide({ kind: 'acquire' }, state, 'p', first)).toMatchObject({
      commits: [{ name: 'c' }],
    });
    expect(decide({ kind: 'acquire' }, pool(['a'], ['a']), 'p', first)).toMatchObject({
      kind: 'wait',
    });
  });

  it('refuses a lock that is a directory or symlink', () => {
    const state: PoolState = {
      ...pool([], []),
      irregular: new Map([['unclaimed/a', 'a directory']]),
    };
    expect(decide({ kind: 'claim', name: 'a' }, state, 'p', first)).toMatchObject({ kind: 'fail' });
  });
});

describe('decide for several locks at once', () => {
  it('acquire with count takes that many distinct free locks, one commit each, naming the set', () => {
    const decision = decide(
      { kind: 'acquire', count: 2 },
      pool(['a'], ['b', 'c', 'd']),
      'p',
      first,
    );
    expect(decision).toEqual({
      kind: 'commit',
      commits: ['b', 'c'].map((name) => ({
        name,
        change: { kind: 'move', name, from: 'unclaimed', to: 'claimed' },
        subject: `claiming: ${name}`,
        claiming: true,
        trailers: [['Claim-Set', 'b, c']],
      })),
    });
  });

  it('acquire with count picks every lock by the random source, never one twice', () => {
    const state = pool([], ['a', 'b', 'c']);
    const values = [0.99, 0.99, 0.99];
    const decision = decide({ kind: 'acquire', count: 3 }, state, 'p', () => values.shift()!);
    expect(decision.kind === 'commit' && decision.commits.map(({ name }) => name)).toEqual([
      'c',
      'b',
      'a',
    ]);
  });

  it('acquire with count waits while fewer are free, and says how many', () => {
    expect(decide({ kind: 'acquire', count: 3 }, pool(['a'], ['b', 'c']), 'p', first)).toEqual({
      kind: 'wait',
      reason: '3 locks wanted, 2 unclaimed in pool "p" (1 claimed, 2 unclaimed)',
      wanted: ['a'],
    });
  });

  it('acquire with a count the pool cannot reach fails at once, naming both numbers', () => {
    expect(decide({ kind: 'acquire', count: 4 }, pool(['a'], ['b', 'c']), 'p', first)).toEqual({
      kind: 'fail',
      message: 'cannot acquire 4 locks: pool "p" holds 3 (claimed and unclaimed)',
    });
    // With a filter the pool is the locks it lets through, and the message says so.
    const filter = { match: new Map([['region', ['eu']]]) };
    expect(decide({ kind: 'acquire', count: 4, filter }, pool(['a'], ['b']), 'p', first)).toEqual({
      kind: 'fail',
      message:
        'cannot acquire 4 locks: pool "p" holds 2 that pass match {region: eu} (claimed and unclaimed)',
    });
    // Without a count, an empty pool is waited on, as the reference does: locks may be added.
    expect(decide({ kind: 'acquire' }, pool([], []), 'p', first)).toMatchObject({ kind: 'wait' });
    // `count: 1` is the default spelled out: the same wait.
    expect(decide({ kind: 'acquire', count: 1 }, pool([], []), 'p', first)).toMatchObject({
      kind: 'wait',
    });
  });

  it('claim of a list longer than the pool fails at once, naming both numbers', () => {
    const names = ['a', 'b', 'c'];
    expect(decide({ kind: 'claim', name: 'a', names }, pool([], ['a', 'b']), 'p', first)).toEqual({
      kind: 'fail',
      message: 'cannot claim 3 locks: pool "p" holds 2 (claimed and unclaimed)',
    });
    // One name the pool lacks, in a pool large enough: a wait, as for a single claim.
    expect(
      decide({ kind: 'claim', name: 'a', names }, pool(['x'], ['a', 'b']), 'p', first),
    ).toMatchObject({ kind: 'wait' });
  });

  it('claim of a list takes all of them, or waits naming those not free', () => {
    const names = ['a', 'b'];
    expect(decide({ kind: 'claim', name: 'a', names }, pool([], ['a', 'b']), 'p', first)).toEqual({
      kind: 'commit',
      commits: names.map((name) => expect.objectContaining({ name, claiming: true })),
    });
    expect(
      decide(
        { kind: 'claim', name: 'a', names: ['a', 'b', 'c'] },
        pool(['b'], ['a', 'd']),
        'p',
        first,
      ),
    ).toEqual({
      kind: 'wait',
      reason:
        'the set "a", "b", "c" in pool "p" is not all unclaimed: "b" claimed; "c" not in the pool (1 claimed, 2 unclaimed)',
      wanted: ['b', 'c'],
    });
  });

  it('release of a set frees every lock of it, and refuses when one is not claimed', () => {
    const decision = decide(
      { kind: 'release', name: 'a', names: ['a', 'b'] },
      pool(['a', 'b'], []),
      'p',
      first,
    );
    expect(decision.kind === 'commit' && decision.commits.map((step) => step.subject)).toEqual([
      'unclaiming: a',
      'unclaiming: b',
    ]);
    expect(
      decide({ kind: 'release', name: 'a', names: ['a', 'b'] }, pool(['a'], ['b']), 'p', first),
    ).toEqual({
      kind: 'fail',
      message: 'cannot release lock "b": it is not claimed in pool "p" (it is unclaimed)',
    });
  });
});
