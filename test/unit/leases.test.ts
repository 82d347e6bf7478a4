import { describe, expect, it } from 'vitest';
import {
  expiredClaims,
  nextExpiry,
  reclaimStep,
  renewStep,
  type Leases,
} from '../../src/lock/leases.js';
import { decide } from '../../src/lock/lock-operation.js';
import type { ClaimFacts, PoolState } from '../../src/lock/pool-state.js';

const NOW = Date.parse('2026-06-01T12:00:00Z');
const GRACE = 5 * 60_000;

function pool(claimed: string[], unclaimed: string[] = []): PoolState {
  return { claimed: new Set(claimed), unclaimed: new Set(unclaimed), irregular: new Map() };
}

function leases(claims: Record<string, ClaimFacts>): Leases {
  return { claims: new Map(Object.entries(claims)), now: NOW, graceMs: GRACE, reclaimedBy: 'me' };
}

const ago = (ms: number) => new Date(NOW - ms);

describe('expiredClaims', () => {
  it.each<[string, ClaimFacts, number | undefined, string | undefined]>([
    [
      'a lease over for longer than the grace',
      { token: 't', leaseExpires: ago(GRACE + 1000) },
      undefined,
      'lease expired at 2026-06-01T11:54:59Z',
    ],
    [
      'a lease over, but within the grace',
      { token: 't', leaseExpires: ago(GRACE - 1000) },
      undefined,
      undefined,
    ],
    [
      'a lease still running',
      { token: 't', leaseExpires: new Date(NOW + 60_000) },
      undefined,
      undefined,
    ],
    [
      'a claim without a lease, however old',
      { token: 't', since: ago(30 * 86_400_000) },
      undefined,
      undefined,
    ],
    [
      'a claim in the reference’s format (no token, no lease)',
      { since: ago(86_400_000) },
      undefined,
      undefined,
    ],
    [
      'a claim without a lease older than --older-than',
      { since: ago(7_200_000) },
      3_600_000,
      'claimed at 2026-06-01T10:00:00Z without a lease, older than 1h0m0s',
    ],
    [
      'a claim without a lease younger than --older-than',
      { since: ago(1_800_000) },
      3_600_000,
      undefined,
    ],
    [
      'a leased claim still running, whatever --older-than says',
      { since: ago(7_200_000), leaseExpires: new Date(NOW + 1) },
      3_600_000,
      undefined,
    ],
    ['a claim whose claiming commit was not found', {}, 1, undefined],
  ])('%s', (_, claim, olderThan, reason) => {
    const found = expiredClaims(pool(['a']), leases({ a: claim }), olderThan);
    expect(found.map((reclaim) => reclaim.reason)).toEqual(reason ? [reason] : []);
  });

  it('lists expired claims by name, with their tokens and holders', () => {
    const claim = (token: string) => ({
      token,
      by: `build ${token}`,
      leaseExpires: ago(GRACE * 2),
    });
    expect(expiredClaims(pool(['b', 'a']), leases({ b: claim('tb'), a: claim('ta') }))).toEqual([
      { name: 'a', token: 'ta', by: 'build ta', reason: 'lease expired at 2026-06-01T11:50:00Z' },
      { name: 'b', token: 'tb', by: 'build tb', reason: 'lease expired at 2026-06-01T11:50:00Z' },
    ]);
  });

  it('says when the next lease runs out, grace included', () => {
    const soon = new Date(NOW + 1000);
    const later = new Date(NOW + 9000);
    expect(
      nextExpiry(leases({ a: { leaseExpires: later }, b: { leaseExpires: soon }, c: {} })),
    ).toBe(NOW + 1000 + GRACE + 1);
    expect(nextExpiry(leases({ c: {} }))).toBeUndefined();
  });
});

describe('the commits of leases', () => {
  it('a reclaim is an unclaiming move with the three reclaim trailers', () => {
    expect(
      reclaimStep({ name: 'a', token: 't1', reason: 'lease expired at X' }, 'https://ci/b/1'),
    ).toEqual({
      name: 'a',
      change: { kind: 'move', name: 'a', from: 'claimed', to: 'unclaimed' },
      subject: 'unclaiming: a',
      claiming: false,
      trailers: [
        ['Reclaimed-Token', 't1'],
        ['Reclaim-Reason', 'lease expired at X'],
        ['Reclaimed-By', 'https://ci/b/1'],
      ],
    });
  });

  it('a renewal touches no file and carries the token and the new lease', () => {
    expect(renewStep('a', 't1', new Date('2026-06-01T13:00:00.500Z'))).toEqual({
      name: 'a',
      change: { kind: 'none', name: 'a' },
      subject: 'renewing: a',
      claiming: false,
      trailers: [
        ['Claim-Token', 't1'],
        ['Lease-Expires', '2026-06-01T13:00:00Z'],
      ],
    });
  });
});

describe('decide, with leases', () => {
  const expired = { token: 'old', leaseExpires: ago(GRACE * 2), commit: 'c-claim' };
  const running = { token: 'live', leaseExpires: new Date(NOW + 60_000), commit: 'c-live' };

  it('reap reclaims every expired lock, one commit each, and nothing else', () => {
    const decision = decide(
      { kind: 'reap' },
      pool(['a', 'b', 'c']),
      'p',
      Math.random,
      leases({ a: expired, b: running, c: { ...expired, token: 'old-c' } }),
    );
    expect(decision.kind).toBe('commit');
    if (decision.kind !== 'commit') return;
    expect(decision.commits.map((step) => step.subject)).toEqual([
      'unclaiming: a',
      'unclaiming: c',
    ]);
    expect(decision.reclaimed?.map((reclaim) => reclaim.token)).toEqual(['old', 'old-c']);
  });

  it('a dry run, or nothing expired, observes and commits nothing', () => {
    expect(
      decide({ kind: 'reap', dryRun: true }, pool(['a']), 'p', Math.random, leases({ a: expired })),
    ).toMatchObject({ kind: 'observed', reclaimed: [{ name: 'a' }] });
    expect(decide({ kind: 'reap' }, pool(['b']), 'p', Math.random, leases({ b: running }))).toEqual(
      { kind: 'observed', name: '', reclaimed: [] },
    );
  });

  it('an acquire with reclaim_expired reclaims and claims in one decision, only when nothing is free', () => {
    const state = pool(['a', 'b']);
    const both = leases({ a: expired, b: running });
    const decision = decide(
      { kind: 'acquire', reclaimExpired: true },
      state,
      'p',
      () => 0.99,
      both,
    );
    expect(decision).toMatchObject({
      kind: 'commit',
      commits: [{ subject: 'unclaiming: a' }, { subject: 'claiming: a', claiming: true }],
    });
    expect(decide({ kind: 'acquire' }, state, 'p', () => 0, both).kind).toBe('wait');
    expect(
      decide({ kind: 'acquire', reclaimExpired: true }, pool(['a'], ['c']), 'p', () => 0, both),
    ).toMatchObject({ commits: [{ subject: 'claiming: c' }] });
    expect(
      decide({ kind: 'acquire', reclaimExpired: true }, pool(['b']), 'p', () => 0, both).kind,
    ).toBe('wait');
  });

  it('renew commits the new lease under the claim’s token and answers with the claim', () => {
    const decision = decide(
      { kind: 'renew', name: 'b', leaseMs: 3_600_000 },
      pool(['b']),
      'p',
      Math.random,
      leases({ b: running }),
    );
    expect(decision).toEqual({
      kind: 'commit',
      commits: [renewStep('b', 'live', new Date(NOW + 3_600_000))],
      answer: 'c-live',
    });
  });

  it('renew refuses a lock that is not claimed, or a claim without a token', () => {
    expect(
      decide(
        { kind: 'renew', name: 'b', leaseMs: 1 },
        pool([], ['b']),
        'p',
        Math.random,
        leases({}),
      ),
    ).toEqual({
      kind: 'fail',
      message: 'cannot renew lock "b": it is not claimed in pool "p" (it is unclaimed)',
    });
    expect(
      decide(
        { kind: 'renew', name: 'b', leaseMs: 1 },
        pool(['b']),
        'p',
        Math.random,
        leases({ b: { since: ago(1) } }),
      ),
    ).toMatchObject({ kind: 'fail' });
  });
});
