// The stop's time budget (src/base/stop-budget.ts): the shares every layer takes must add up to
// less than the 10 s Concourse gives a step between the stop signal and SIGKILL.
import { describe, expect, it } from 'vitest';
import {
  ABORT_BUDGET_MS,
  FAILURE_RELEASE_MS,
  GIT_KILL_GRACE_MS,
  HARD_EXIT_MS,
  KILL_AFTER_MS,
  LEAVE_AFTER_STOP_MS,
  PUSH_GRACE_MS,
  SETTLE_MS,
  SSH_STOPPED_IDLE_MS,
} from '../../src/base/stop-budget.js';

describe('the stop budget', () => {
  it("exits on its own before Concourse's SIGKILL, 10 s after the stop signal", () => {
    expect(KILL_AFTER_MS).toBe(10_000);
    expect(HARD_EXIT_MS).toBeLessThan(KILL_AFTER_MS);
  });

  it('settles and releases within the hard exit', () => {
    expect(SETTLE_MS + ABORT_BUDGET_MS).toBeLessThan(HARD_EXIT_MS);
  });

  it("lets a claim's push under way end, killed git included, before the release looks for it", () => {
    expect(PUSH_GRACE_MS + GIT_KILL_GRACE_MS).toBeLessThanOrEqual(SETTLE_MS);
  });

  it('takes a put that claimed nothing out of the line within a second, inside the settle window', () => {
    expect(LEAVE_AFTER_STOP_MS + GIT_KILL_GRACE_MS).toBeLessThanOrEqual(1_000);
    expect(LEAVE_AFTER_STOP_MS + GIT_KILL_GRACE_MS).toBeLessThan(SETTLE_MS);
  });

  it('keeps an SSH connection after the stop for less than the release is given', () => {
    expect(SSH_STOPPED_IDLE_MS).toBeGreaterThan(0);
    expect(SSH_STOPPED_IDLE_MS).toBeLessThan(ABORT_BUDGET_MS);
  });

  it('gives a release after a failure, when no signal is pressing, more time than one after a stop', () => {
    expect(FAILURE_RELEASE_MS).toBeGreaterThan(ABORT_BUDGET_MS);
  });
});
