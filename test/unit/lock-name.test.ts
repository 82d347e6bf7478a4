import { describe, expect, it } from 'vitest';
import { lockNameProblem, poolNameProblem, printable } from '../../src/lock-name.js';

describe('lockNameProblem', () => {
  it.each([
    'lock-a',
    'env_1',
    'my lock',
    'v1.2.3',
    'name.',
    'ünïcödé',
    '-starts-with-dash',
    'x'.repeat(255),
  ])('accepts %j', (name) => {
    expect(lockNameProblem(name)).toBeUndefined();
  });

  it.each([
    ['', 'is empty'],
    ['.', '"." is not a name'],
    ['..', '".." is not a name'],
    ['.gitkeep', '".gitkeep" is a dotfile'],
    ['a/b', '"a/b" contains a path separator'],
    ['../escape', '"../escape" contains a path separator'],
    ['a\\b', '"a\\b" contains a path separator'],
    ['a\u0000b', '"a\\x00b" contains a control character'],
    ['line\nbreak', '"line\\x0abreak" contains a control character'],
    ['tab\there', '"tab\\x09here" contains a control character'],
    ['del\u007f', '"del\\x7f" contains a control character'],
    ['x'.repeat(256), 'is longer than 255 bytes'],
    // 128 two-byte characters: 256 bytes although only 128 characters.
    ['é'.repeat(128), 'is longer than 255 bytes'],
  ])('refuses %j: %s', (name, problem) => {
    expect(lockNameProblem(name)).toBe(problem);
  });
});

describe('poolNameProblem', () => {
  it('follows the lock rules', () => {
    expect(poolNameProblem('envs')).toBeUndefined();
    expect(poolNameProblem('a/b')).toBe('"a/b" contains a path separator');
    expect(poolNameProblem('.hidden')).toBe('".hidden" is a dotfile');
  });

  it('refuses what git would read as an option or pathspec magic', () => {
    expect(poolNameProblem('--all')).toBe('"--all" starts with "-"');
    expect(poolNameProblem(':(top)')).toBe('":(top)" starts with ":"');
  });
});

describe('printable', () => {
  it('keeps an error line one line', () => {
    expect(printable('a\nb\r\u0000')).toBe('a\\x0ab\\x0d\\x00');
    expect(printable('plain ünïcödé')).toBe('plain ünïcödé');
  });
});
