import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseBatch } from '../../src/repo/lock-files.js';

const dir = mkdtempSync(join(tmpdir(), 'pool-batch-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const git = (args: string[], input?: Buffer) =>
  execFileSync('git', args, { cwd: dir, input, env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1' } });
git(['init', '--quiet', '--bare']);
const blob = (content: Buffer) => git(['hash-object', '-w', '--stdin'], content).toString().trim();

describe('parseBatch, on what git 2.39 prints', () => {
  // Bytes that are not UTF-8, an empty file, and a file that looks like the next header.
  const contents = [
    Buffer.from([0xff, 0xfe, 0x0a, 0x00, 0x80]),
    Buffer.alloc(0),
    Buffer.from('region: eu\n0000000000000000000000000000000000000000 blob 3\nabc\n'),
    Buffer.from('no newline at the end'),
  ];
  const ids = contents.map(blob);
  const missing = 'f'.repeat(40);
  const input = Buffer.from([...ids, missing].map((id) => `${id}\n`).join(''));

  it('reads each blob with --batch as its exact bytes, a missing one left out', () => {
    const read = parseBatch(git(['cat-file', '--batch'], input), true);
    expect([...read.keys()]).toEqual(ids);
    ids.forEach((id, i) => expect(read.get(id)?.content).toEqual(contents[i]));
  });

  it('reads the sizes alone with --batch-check', () => {
    const read = parseBatch(git(['cat-file', '--batch-check'], input), false);
    expect(ids.map((id) => read.get(id))).toEqual(contents.map((c) => ({ size: c.length })));
    expect(read.has(missing)).toBe(false);
  });
});
