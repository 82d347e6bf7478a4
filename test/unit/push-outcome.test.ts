import { describe, expect, it } from 'vitest';
import { classifyPush } from '../../src/git/push-outcome.js';

// Recorded from git 2.39 `git push --porcelain origin HEAD:refs/heads/master`.
const PUSHED = 'To /tmp/locks.git\n \tHEAD:refs/heads/master\t3c1b2a1..9f8e7d6\nDone\n';
const REJECTED_FETCH_FIRST =
  'To /tmp/locks.git\n!\tHEAD:refs/heads/master\t[rejected] (fetch first)\nDone\n';
const REJECTED_NON_FF =
  'To /tmp/locks.git\n!\tHEAD:refs/heads/master\t[rejected] (non-fast-forward)\nDone\n';
const UP_TO_DATE = 'To /tmp/locks.git\n=\tHEAD:refs/heads/master\t[up to date]\nDone\n';

describe('classifyPush', () => {
  it.each([
    [PUSHED, 'pushed'],
    [REJECTED_FETCH_FIRST, 'rejected'],
    [REJECTED_NON_FF, 'rejected'],
    [UP_TO_DATE, 'up-to-date'],
    ['To x\n+\tHEAD:refs/heads/master\ta...b (forced update)\nDone\n', 'pushed'],
    ['To x\n*\tHEAD:refs/heads/master\t[new branch]\nDone\n', 'pushed'],
  ])('classifies %j', (output, outcome) => {
    expect(classifyPush(output, 'refs/heads/master')).toBe(outcome);
  });

  it('ignores lines about other refs and output without ref lines', () => {
    expect(
      classifyPush(' \tHEAD:refs/heads/other\ta..b\nDone\n', 'refs/heads/master'),
    ).toBeUndefined();
    expect(classifyPush('fatal: unable to connect\n', 'refs/heads/master')).toBeUndefined();
  });
});
