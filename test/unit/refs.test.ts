import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readRef } from '../../src/git/refs.js';

const A = 'a'.repeat(40);
const B = 'b'.repeat(40);
let dir: string;
afterEach(async () => rm(dir, { recursive: true, force: true }));

describe('readRef', () => {
  it.each([
    ['a loose ref', { 'refs/heads/main': `${A}\n` }, A],
    [
      'a packed ref',
      { 'packed-refs': `# pack-refs with: peeled fully-peeled sorted \n${B} refs/heads/main\n` },
      B,
    ],
    [
      'a loose ref over a packed one',
      { 'refs/heads/main': `${A}\n`, 'packed-refs': `${B} refs/heads/main\n` },
      A,
    ],
    ['another ref only', { 'packed-refs': `${B} refs/heads/mainline\n` }, undefined],
    ['a symbolic ref', { 'refs/heads/main': 'ref: refs/heads/other\n' }, undefined],
    ['nothing', {}, undefined],
  ])('reads %s', async (_, files: Record<string, string>, expected) => {
    dir = await mkdtemp(join(tmpdir(), 'pool-refs-'));
    for (const [path, text] of Object.entries(files)) {
      await mkdir(join(dir, path, '..'), { recursive: true });
      await writeFile(join(dir, path), text);
    }
    expect(await readRef(dir, 'refs/heads/main')).toBe(expected);
  });
});
