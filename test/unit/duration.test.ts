import { describe, expect, it } from 'vitest';
import { formatGoDuration, parseGoDuration } from '../../src/base/duration.js';

describe('parseGoDuration', () => {
  it.each([
    ['10s', 10_000],
    ['1m30s', 90_000],
    ['250ms', 250],
    ['1h', 3_600_000],
    ['1.5s', 1_500],
    ['0', 0],
    ['100us', 1],
    ['2h45m', 9_900_000],
    ['-5s', -5_000],
  ])('%s is %d ms', (text, ms) => {
    expect(parseGoDuration(text)).toEqual({ ms });
  });

  it.each(['', '10', 's', '10x', '1m 30s', 'ten seconds', '1.2.3s'])('"%s" is refused', (text) => {
    expect(parseGoDuration(text)).toHaveProperty('error');
  });
});

describe('formatGoDuration', () => {
  it.each([
    [0, '0s'],
    [1, '1ms'],
    [250, '250ms'],
    [1000, '1s'],
    [1500, '1.5s'],
    [1234, '1.234s'],
    [90_500, '1m30.5s'],
    [3_600_000, '1h0m0s'],
    [3_725_010, '1h2m5.01s'],
  ])('%d ms is %s, as Go prints it', (ms, text) => {
    expect(formatGoDuration(ms)).toBe(text);
    // What it writes, the resource reads back.
    expect(parseGoDuration(text)).toEqual({ ms });
  });
});
