import { describe, expect, it } from 'vitest';
import { globMatcher } from '../../src/base/glob.js';

describe('globMatcher', () => {
  it.each([
    ['env-*', 'env-eu-1', true],
    ['env-*', 'env-', true],
    ['env-*', 'db-1', false],
    ['env-?', 'env-1', true],
    ['env-?', 'env-12', false],
    ['*-eu-*', 'env-eu-1', true],
    ['a.b', 'a.b', true],
    ['a.b', 'axb', false],
    ['(x)+[y]', '(x)+[y]', true],
    ['é?', 'éü', true],
    ['*', 'anything at all', true],
  ])('%s against %s is %s', (pattern, name, expected) => {
    expect(globMatcher(pattern)(name)).toBe(expected);
  });
});
