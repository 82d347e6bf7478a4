// How long something took or has left, as progress lines and `pool status` print it.
import { describe, expect, it } from 'vitest';
import { formatMs } from '../../src/base/errors.js';

describe('formatMs', () => {
  it.each([
    [322, '322ms'],
    [2_449, '2.4s'],
    [59_940, '59.9s'],
    // Rounded up to a minute, the figure says so instead of `60s`.
    [59_960, '1m'],
    [90_000, '1m30s'],
    [750_400, '12m30s'],
    // A lease of an hour taken a fraction of a second ago: never `59m60s`.
    [3_599_700, '1h'],
    [3_599_400, '59m59s'],
    [3_900_000, '1h5m'],
    [7_200_000, '2h'],
  ])('%i ms reads %s', (ms, text) => {
    expect(formatMs(ms)).toBe(text);
  });
});
