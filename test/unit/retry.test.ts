// The one retry policy (src/lock/retry.ts): what counts as transient, and how lost races end.
import { describe, expect, it } from 'vitest';
import {
  CancelledError,
  ConfigurationError,
  GaveUpError,
  GitCommandError,
  GitTimeoutError,
  OperationError,
  WaitTimeoutError,
  describeError,
} from '../../src/base/errors.js';
import { isTransient, retry, type Attempt, type Clock } from '../../src/lock/retry.js';

const networkError = (code: string) => Object.assign(new Error(`connect ${code}`), { code });

describe('isTransient', () => {
  it.each<[string, unknown, boolean]>([
    ['a git command that failed', new GitCommandError(['fetch'], 128, '', 'early EOF'), true],
    ['a git command that timed out', new GitTimeoutError(['push'], 1_000), true],
    ['a connection reset', networkError('ECONNRESET'), true],
    ['a connection refused', networkError('ECONNREFUSED'), true],
    ['a connection timed out', networkError('ETIMEDOUT'), true],
    ['a broken pipe', networkError('EPIPE'), true],
    ['a name that did not resolve for now', networkError('EAI_AGAIN'), true],
    ['a host out of reach', networkError('EHOSTUNREACH'), true],
    ['a network out of reach', networkError('ENETUNREACH'), true],
    ['a TypeError', new TypeError('x is not a function'), false],
    ['a RangeError', new RangeError('Invalid array length'), false],
    ['a plain Error', new Error('git push printed no status'), false],
    ['a file that is not there', networkError('ENOENT'), false],
    ['a refusal', new OperationError('lock "a" is not claimed'), false],
    ['a bad request', new ConfigurationError(['error: bad']), false],
    ['a cancellation', new CancelledError('SIGTERM'), false],
    ['a wait that timed out', new WaitTimeoutError('timed out'), false],
    ['a string', 'ECONNRESET', false],
    ['an object with a network code', { code: 'ECONNRESET' }, false],
  ])('%s: %s', (_t, error, transient) => {
    expect(isTransient(error)).toBe(transient);
  });

  it('a git command a signal ended is transient, and says it was killed, by which signal if known', () => {
    const unknown = new GitCommandError(['push'], null, '', '');
    const named = new GitCommandError(['push'], null, '', 'fatal: x\n', 'SIGPIPE');
    expect(isTransient(unknown)).toBe(true);
    expect(unknown.message).toBe('git push failed (killed by a signal): no output');
    expect(named.message).toBe('git push failed (killed by SIGPIPE): fatal: x');
  });
});

function fakeClock(): Clock & { sleeps: number[] } {
  const sleeps: number[] = [];
  return {
    sleeps,
    now: () => 0,
    random: () => 0.5,
    sleep: (ms) => {
      sleeps.push(ms);
      return Promise.resolve();
    },
  };
}

describe('retry', () => {
  it('gives up after as many lost races as the caller allows, with its reason', async () => {
    const clock = fakeClock();
    let attempts = 0;
    const error = await retry(
      (): Promise<Attempt<string>> => {
        attempts++;
        return Promise.resolve({ kind: 'conflict', name: 'envs' });
      },
      {
        clock,
        signal: new AbortController().signal,
        maxConflicts: { attempts: 5, reason: () => 'branch "locks" kept changing under us' },
      },
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GaveUpError);
    expect(describeError(error)).toBe(
      'gave up after 5 attempts: branch "locks" kept changing under us',
    );
    expect(attempts).toBe(5);
    // A random moment after each lost race but the last, so racing writers fall out of step.
    expect(clock.sleeps).toEqual([100, 100, 100, 100]);
  });

  it('starts no attempt once the signal fired', async () => {
    const stop = new AbortController();
    stop.abort(new Error('SIGTERM'));
    let attempts = 0;
    const error = await retry(
      () => {
        attempts++;
        return Promise.resolve({ kind: 'done', value: 1 } as const);
      },
      { clock: fakeClock(), signal: stop.signal },
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CancelledError);
    expect(attempts).toBe(0);
  });
});
