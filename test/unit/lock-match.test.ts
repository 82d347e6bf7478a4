import { describe, expect, it } from 'vitest';
import {
  MAX_MATCHED_FILE_BYTES,
  describeFilter,
  lockFilter,
  metadataMatches,
  nameMatches,
  type MetadataMatch,
} from '../../src/base/lock-match.js';
import { readLockMetadata } from '../../src/base/lock-metadata.js';
import { MAX_STEP_FILE_BYTES } from '../../src/protocol/step-folder.js';

const match = (entries: Record<string, string | string[]>): MetadataMatch =>
  new Map(Object.entries(entries).map(([key, value]) => [key, [value].flat()]));

const matches = (file: string | Buffer, wanted: Record<string, string | string[]>) =>
  metadataMatches(match(wanted), readLockMetadata(Buffer.from(file)));

describe('metadataMatches', () => {
  it.each<[string, string, Record<string, string | string[]>, boolean]>([
    ['a scalar equal to the value', 'region: eu\n', { region: 'eu' }, true],
    ['a scalar that differs', 'region: us\n', { region: 'eu' }, false],
    ['a key the file lacks', 'size: large\n', { region: 'eu' }, false],
    ['every key must hold', 'region: eu\nsize: small\n', { region: 'eu', size: 'large' }, false],
    ['every key holding', 'region: eu\nsize: large\n', { region: 'eu', size: 'large' }, true],
    ['a number in the file against the string', 'size: 2\n', { size: '2' }, true],
    ['a quoted number in the file', 'size: "2"\n', { size: '2' }, true],
    ['a number as written, not as a float', 'version: 1.10\n', { version: '1.10' }, true],
    ['a number compared as written', 'version: 1.10\n', { version: '1.1' }, false],
    ['a boolean as its word', 'gpu: true\n', { gpu: 'true' }, true],
    ['a list in match: any of its values', 'size: xlarge\n', { size: ['large', 'xlarge'] }, true],
    ['a list in match: none of its values', 'size: small\n', { size: ['large', 'xlarge'] }, false],
    ['a list in the file holding the value', 'tags: [gpu, ssd]\n', { tags: 'ssd' }, true],
    ['a block list in the file', 'tags:\n  - gpu\n  - ssd\n', { tags: 'gpu' }, true],
    ['a list in the file without it', 'tags: [gpu, ssd]\n', { tags: 'hdd' }, false],
    ['lists on both sides', 'tags: [gpu, ssd]\n', { tags: ['hdd', 'ssd'] }, true],
    ['lists on both sides, no overlap', 'tags: [gpu, ssd]\n', { tags: ['hdd', 'tape'] }, false],
    ['a dotted key into nested maps', 'net:\n  region: eu\n', { 'net.region': 'eu' }, true],
    ['three levels deep', 'a:\n  b:\n    c: 3\n', { 'a.b.c': '3' }, true],
    ['a nested value that differs', 'net:\n  region: us\n', { 'net.region': 'eu' }, false],
    ['a dotted key through a scalar', 'net: eu\n', { 'net.region': 'eu' }, false],
    ['a dotted key is not a literal key', '"net.region": eu\n', { 'net.region': 'eu' }, false],
    ['a map where a scalar is wanted', 'net:\n  region: eu\n', { net: 'eu' }, false],
    ['a null value', 'region: null\n', { region: 'eu' }, false],
    ['an anchor and alias', 'a: &r eu\nregion: *r\n', { region: 'eu' }, true],
    ['a comment after the value', 'region: eu # Frankfurt\n', { region: 'eu' }, true],
    ['JSON', '{"region": "eu", "size": 2}', { region: 'eu', size: '2' }, true],
    ['nested JSON', '{"net": {"region": "eu"}}', { 'net.region': 'eu' }, true],
    ['a JSON list', '{"tags": ["gpu", "ssd"]}', { tags: 'gpu' }, true],
    ['a JSON boolean', '{"gpu": true}', { gpu: 'true' }, true],
  ])('%s', (_title, file, wanted, expected) => {
    expect(matches(file, wanted)).toBe(expected);
  });

  it.each<[string, string | Buffer]>([
    ['an empty file', ''],
    ['only a comment', '# nothing here\n'],
    ['a list', '- region: eu\n'],
    ['a JSON list', '[{"region": "eu"}]'],
    ['a scalar', 'region=eu\n'],
    ['a JSON string', '"region: eu"'],
    ['broken YAML', 'region: eu\n  size: [large\n'],
    ['broken JSON', '{"region": "eu",}}'],
    ['two documents', 'region: eu\n---\nregion: eu\n'],
    ['bytes that are not UTF-8', Buffer.from([0x72, 0x3a, 0x20, 0xff, 0xfe, 0x0a])],
  ])('%s never matches', (_title, file) => {
    expect(readLockMetadata(Buffer.from(file)).kind).toBe('unreadable');
    expect(matches(file, { region: 'eu' })).toBe(false);
  });

  it('refuses an alias bomb rather than expanding it', () => {
    const levels = ['a: &a [x, x, x, x, x, x, x, x, x]'];
    for (let level = 1; level < 10; level++) {
      const previous = String.fromCharCode(96 + level);
      const name = String.fromCharCode(97 + level);
      levels.push(`${name}: &${name} [${Array(9).fill(`*${previous}`).join(', ')}]`);
    }
    const started = performance.now();
    expect(readLockMetadata(Buffer.from(`${levels.join('\n')}\nregion: eu\n`)).kind).toBe(
      'unreadable',
    );
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  it('refuses nesting deep enough to exhaust the stack, without throwing or aborting', () => {
    // 20,000 made yaml's pretty error message abort the whole process (out of memory).
    expect(readLockMetadata(Buffer.from('['.repeat(20_000))).kind).toBe('unreadable');
  });

  it('reads a file of many keys in linear time, the last of a key given twice holding', () => {
    const keys = Array.from({ length: 50_000 }, (_, i) => `key${i}: v`).join('\n');
    const started = performance.now();
    // Checked for duplicates pairwise, these took 30 s; read once, well under a second.
    expect(matches(`${keys}\nregion: us\nregion: eu\n`, { region: 'eu', key7: 'v' })).toBe(true);
    expect(performance.now() - started).toBeLessThan(10_000);
  });

  it('refuses a file larger than a step folder file may be, unread', () => {
    expect(MAX_MATCHED_FILE_BYTES).toBe(MAX_STEP_FILE_BYTES);
    const file = Buffer.concat([
      Buffer.from('region: eu\n'),
      Buffer.alloc(MAX_MATCHED_FILE_BYTES, 0x20),
    ]);
    expect(readLockMetadata(file)).toEqual({ kind: 'unreadable', why: expect.any(String) });
    expect(readLockMetadata(file.subarray(0, MAX_MATCHED_FILE_BYTES)).kind).toBe('map');
  });

  it('prints no warning for tags it does not know', () => {
    const warnings: unknown[] = [];
    const listener = (warning: unknown) => warnings.push(warning);
    process.on('warning', listener);
    try {
      expect(matches('region: !custom eu\nsize: !!int 2\n', { region: 'eu', size: '2' })).toBe(
        true,
      );
    } finally {
      process.off('warning', listener);
    }
    expect(warnings).toEqual([]);
  });
});

describe('nameMatches', () => {
  it('passes every name without match_name, and globs with it', () => {
    expect(nameMatches({ match: match({ region: 'eu' }) }, 'anything')).toBe(true);
    expect(nameMatches({ matchName: 'eu-*' }, 'eu-1')).toBe(true);
    expect(nameMatches({ matchName: 'eu-?' }, 'eu-12')).toBe(false);
  });
});

describe('lockFilter', () => {
  it('is undefined when nothing filters, an empty match included', () => {
    expect(lockFilter(undefined, undefined)).toBeUndefined();
    expect(lockFilter(new Map(), undefined)).toBeUndefined();
    expect(lockFilter(new Map(), 'eu-*')).toEqual({ matchName: 'eu-*' });
  });
});

describe('describeFilter', () => {
  it('names the filter as the request gave it, control characters escaped', () => {
    expect(
      describeFilter({
        matchName: 'eu-*',
        match: match({ region: 'eu', size: ['large', 'xlarge'] }),
      }),
    ).toBe('match_name "eu-*" and match {region: eu, size: [large, xlarge]}');
    expect(describeFilter({ match: match({ 'a\u001b[31m': 'x\ny' }) })).toBe(
      'match {a\\x1b[31m: x\\x0ay}',
    );
  });
});
