// The objects of a pack written as loose objects by the run itself (git/pack-objects.ts): packs
// made by git's own pack-objects, with deltas by offset and by id, read back by git.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { unpack, writeLooseObjects } from '../../src/git/pack-objects.js';
import { GIT_TEST_ENV } from '../helpers/lock-repo.js';

const dir = mkdtempSync(join(tmpdir(), 'pack-objects-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const work = join(dir, 'work');
const git = (cwd: string, args: string[], input?: Buffer) =>
  execFileSync('git', args, { cwd, env: GIT_TEST_ENV, input, maxBuffer: 1 << 26 });

git(dir, ['init', '--quiet', '-b', 'master', work]);
/** A commit whose lock file is `text`, so that consecutive commits' blobs delta well. */
function commit(text: string): string {
  writeFileSync(join(work, 'lock-a'), text);
  git(work, ['add', '-A']);
  git(work, ['commit', '--quiet', '-m', `updating: lock-a (${text.length})`]);
  return git(work, ['rev-parse', 'HEAD']).toString().trim();
}
const long = Array.from({ length: 400 }, (_, i) => `line ${i} of the lock's metadata\n`).join('');
const first = commit(long);
const second = commit(`${long}one more line\n`);
const third = commit(`${long}one more line\nand another\n`);

/** The pack git's pack-objects makes of what `tip` has beyond `base`. */
function packOf(tip: string, base: string, options: string[] = []): Buffer {
  return git(
    work,
    ['pack-objects', '--revs', '--stdout', '-q', ...options],
    Buffer.from(`${tip}\n^${base}\n`),
  );
}

/** The objects of `tip` beyond `base`, as git lists them. */
function objectsBetween(tip: string, base: string): string[] {
  const out = git(work, ['rev-list', '--objects', tip, `^${base}`]).toString();
  return out
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split(' ')[0]!)
    .sort();
}

/** A bare repository that has what `base` has (fetched by git), to write the rest into. */
function repositoryAt(base: string, name: string): string {
  const bare = join(dir, name);
  git(dir, ['init', '--quiet', '--bare', bare]);
  git(bare, ['fetch', '--quiet', work, `${base}:refs/heads/master`]);
  return bare;
}

describe('unpack and writeLooseObjects', () => {
  it.each([
    ['deltas by offset', ['--delta-base-offset']],
    ['deltas by id', []],
  ])('write the objects git reads back, with %s', async (name, options) => {
    const pack = packOf(third, first, [...options, '--window=10', '--depth=5']);
    const objects = unpack(pack);
    expect(objects.map(({ id }) => id).sort()).toEqual(objectsBetween(third, first));
    const bare = repositoryAt(first, name.replace(/ /g, '-'));
    await writeLooseObjects(bare, objects);
    // Every object of the new commits is there and whole, as git checks a fetch's.
    git(bare, ['rev-list', '--objects', '--quiet', '--missing=error', third, `^${first}`]);
    expect(git(bare, ['fsck', '--no-dangling', '--strict', third]).toString()).toBe('');
    expect(git(bare, ['cat-file', 'blob', `${second}:lock-a`]).toString()).toBe(
      `${long}one more line\n`,
    );
  });

  it('refuses a pack cut short', () => {
    const pack = packOf(third, first, ['--delta-base-offset']);
    expect(() => unpack(pack.subarray(0, pack.length - 40))).toThrow();
  });

  it('refuses a pack whose bytes changed on the way', () => {
    const pack = Buffer.from(packOf(third, first, ['--delta-base-offset']));
    const middle = pack.length >> 1;
    pack[middle] = pack[middle]! ^ 0x01;
    expect(() => unpack(pack)).toThrow('checksum');
  });

  it('refuses what is no pack', () => {
    expect(() => unpack(Buffer.from('0008NAK\n'))).toThrow('not a pack');
  });
});
