import { describe, expect, it } from 'vitest';
import { lockNameProblem, poolNameProblem, printable, showable } from '../../src/base/lock-name.js';
import { Logger } from '../../src/base/logger.js';
import { statusTable } from '../../src/commands/pool/status.js';

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
    // Bytes that are not UTF-8, as git's output or a name file reads them.
    [Buffer.from([0x63, 0x61, 0x66, 0xe9]).toString('utf8'), '"caf\uFFFD" is not UTF-8 text'],
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

describe('showable, the one display filter', () => {
  it.each([
    ['\u001b[2J\u001b]0;title\u0007', '\\x1b[2J\\x1b]0;title\\x07'],
    ['over\rwritten', 'over\\x0dwritten'],
    ['two\nlines', 'two\\x0alines'],
    ['tab\there', 'tab\\x09here'],
    ['del\u007f c1\u009b', 'del\\x7f c1\\x9b'],
    ['bidi \u202eevil\u2066', 'bidi \\u202eevil\\u2066'],
    ['line\u2028sep', 'line\\u2028sep'],
    ['https://ci.example.com/builds/1 ünïcödé 🔒', 'https://ci.example.com/builds/1 ünïcödé 🔒'],
  ])('%j shows as %j', (text, shown) => {
    expect(showable(text)).toBe(shown);
  });

  it('never cuts', () => {
    expect(showable('x'.repeat(10_000))).toHaveLength(10_000);
  });

  it('filters every line the logger writes, after masking secrets', () => {
    const written: string[] = [];
    const log = new Logger((text) => written.push(text));
    log.addSecret('s3cret-value');
    log.info('held by \u001b[2Jhttps://ci/\rbuilds/1 with s3cret-value');
    log.error('a\nb');
    expect(written).toEqual(['held by \\x1b[2Jhttps://ci/\\x0dbuilds/1 with ***\n', 'a\\x0ab\n']);
  });

  it('filters the names and holders of the pool status table', () => {
    const table = statusTable(
      [
        {
          name: 'lock\u001b[2J',
          state: 'claimed',
          holder: 'https://ci/\rbuilds/1',
          claimed_by: 'https://ci/\rbuilds/1',
          claimed_at: '2026-01-01T00:00:00Z',
          since: '2026-01-01T00:00:00Z',
        },
      ],
      Date.parse('2026-01-01T00:01:00Z'),
    );
    expect(table).toContain(
      'lock\\x1b[2J  claimed  https://ci/\\x0dbuilds/1  2026-01-01T00:00:00Z  1m',
    );
    // eslint-disable-next-line no-control-regex
    expect(table).not.toMatch(/[\u0000-\u0009\u000b-\u001f]/);
  });
});
