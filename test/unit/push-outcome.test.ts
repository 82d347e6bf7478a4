import { describe, expect, it } from 'vitest';
import { classifyPush, remoteLines } from '../../src/git/push-outcome.js';

// Recorded from git 2.39 `git push --porcelain origin HEAD:refs/heads/master`.
const PUSHED = 'To /tmp/locks.git\n \tHEAD:refs/heads/master\t3c1b2a1..9f8e7d6\nDone\n';
const REJECTED_FETCH_FIRST =
  'To /tmp/locks.git\n!\tHEAD:refs/heads/master\t[rejected] (fetch first)\nDone\n';
const REJECTED_NON_FF =
  'To /tmp/locks.git\n!\tHEAD:refs/heads/master\t[rejected] (non-fast-forward)\nDone\n';
const UP_TO_DATE = 'To /tmp/locks.git\n=\tHEAD:refs/heads/master\t[up to date]\nDone\n';
// Two pushes that read the same tip: the server's compare-and-swap on the ref fails for one
// (stderr: "cannot lock ref 'refs/heads/master': is at … but expected …").
const REMOTE_LOST_RACE =
  'To ../race.git\n!\tHEAD:refs/heads/master\t[remote rejected] (failed to update ref)\nDone\n';
// The same race lost by an `--atomic` push (a claim that takes its put out of the waiting line):
// every ref of the transaction fails with one reason (git 2.39, recorded with a slow hook).
const ATOMIC_LOST_RACE =
  'To /tmp/race/r.git\n!\tHEAD:refs/heads/master\t[remote rejected] (atomic transaction failed)\n!\tHEAD:refs/pool-resource/waiting/x\t[remote rejected] (atomic transaction failed)\nDone\n';
// Rejected by the client before sending: the branch moved, so the rest of the atomic push is too.
const ATOMIC_FETCH_FIRST =
  'To /tmp/gt/remote.git\n!\tffd8becedbb27fbf1b2551a489f6e22964d57053:refs/heads/master\t[rejected] (fetch first)\n!\t(delete):refs/pool-resource/waiting/master/p/1700000000000-1000-aaaa\t[rejected] (atomic push failed)\nDone\n';
// A pre-receive hook that exits 1 (a protected branch).
const HOOK_DECLINED =
  'To /tmp/pushrec/hook.git\n!\tHEAD:refs/heads/master\t[remote rejected] (pre-receive hook declined)\nDone\n';

describe('classifyPush', () => {
  it.each([
    [PUSHED, 'pushed'],
    [REJECTED_FETCH_FIRST, 'rejected'],
    [REJECTED_NON_FF, 'rejected'],
    [UP_TO_DATE, 'up-to-date'],
    [REMOTE_LOST_RACE, 'rejected'],
    [ATOMIC_LOST_RACE, 'rejected'],
    [ATOMIC_FETCH_FIRST, 'rejected'],
    ['To x\n!\tHEAD:refs/heads/master\t[remote rejected] (failed to lock)\nDone\n', 'rejected'],
    ['To x\n+\tHEAD:refs/heads/master\ta...b (forced update)\nDone\n', 'pushed'],
    ['To x\n*\tHEAD:refs/heads/master\t[new branch]\nDone\n', 'pushed'],
  ])('classifies %j', (output, outcome) => {
    expect(classifyPush(output, 'refs/heads/master')).toBe(outcome);
  });

  it('tells a push the remote refused for its own reasons, with the reason', () => {
    expect(classifyPush(HOOK_DECLINED, 'refs/heads/master')).toEqual({
      refused: 'pre-receive hook declined',
    });
    expect(
      classifyPush(
        '!\tHEAD:refs/heads/master\t[remote rejected] (deny updating a hidden ref)\n',
        'refs/heads/master',
      ),
    ).toEqual({ refused: 'deny updating a hidden ref' });
  });

  it('has no verdict when the remote never reported whether the push landed', () => {
    expect(
      classifyPush(
        'To x\n!\tHEAD:refs/heads/master\t[remote failure] (remote failed to report status)\nDone\n',
        'refs/heads/master',
      ),
    ).toBeUndefined();
  });

  it('ignores lines about other refs and output without ref lines', () => {
    expect(
      classifyPush(' \tHEAD:refs/heads/other\ta..b\nDone\n', 'refs/heads/master'),
    ).toBeUndefined();
    expect(classifyPush('fatal: unable to connect\n', 'refs/heads/master')).toBeUndefined();
  });
});

describe('remoteLines', () => {
  it('is what the server said, one line, without git’s own', () => {
    // Recorded from git 2.39 pushing to a repository whose pre-receive hook prints two lines.
    const stderr =
      'remote: GH006: Protected branch update failed        \nremote:   see the rules\n' +
      'To /tmp/locks.git\n ! [remote rejected] master -> master (pre-receive hook declined)\n' +
      "error: failed to push some refs to '/tmp/locks.git'\n";
    expect(remoteLines(stderr)).toBe('GH006: Protected branch update failed; see the rules');
    expect(remoteLines("error: failed to push some refs to 'x'\n")).toBe('');
  });

  it('cuts a hook that prints pages', () => {
    const said = remoteLines(`remote: ${'x'.repeat(2000)}\n`);
    expect(said).toBe(`${'x'.repeat(500)}…`);
  });
});
