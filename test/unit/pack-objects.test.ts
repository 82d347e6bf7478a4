// The objects of a pack written as loose objects, or as a pack of their own, by the run itself
// (git/pack-objects.ts): packs made by git's own pack-objects, with deltas by offset and by id,
// read back by git.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { unpack, writeLooseObjects, writePack } from '../../src/git/pack-objects.js';
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

  it('writePack: one pack and its index, the index git would make, whose objects git reads back', async () => {
    const objects = unpack(packOf(third, first, ['--delta-base-offset']));
    const bare = repositoryAt(first, 'packed');
    const loose = () => git(bare, ['count-objects']).toString();
    const [before, looseBefore] = [readdirSync(join(bare, 'objects', 'pack')), loose()];
    await writePack(bare, objects);
    // Loose, each object would be a file of its own.
    expect(loose()).toBe(looseBefore);
    const added = readdirSync(join(bare, 'objects', 'pack')).filter((n) => !before.includes(n));
    expect(added.map((name) => name.replace(/[0-9a-f]{40}/, 'ID')).sort()).toEqual([
      'pack-ID.idx',
      'pack-ID.pack',
    ]);
    const pack = join(
      bare,
      'objects',
      'pack',
      added.find((name) => name.endsWith('.pack'))!,
    );
    // git's own index of the same pack, byte for byte (checksums, CRCs and offsets included).
    const theirs = join(dir, 'theirs.idx');
    git(dir, ['index-pack', '-o', theirs, pack]);
    expect(readFileSync(pack.replace(/\.pack$/, '.idx')).equals(readFileSync(theirs))).toBe(true);
    git(bare, ['verify-pack', pack]);
    git(bare, ['rev-list', '--objects', '--quiet', '--missing=error', third, `^${first}`]);
    expect(git(bare, ['fsck', '--no-dangling', '--strict', third]).toString()).toBe('');
    expect(git(bare, ['cat-file', 'blob', `${third}:lock-a`]).toString()).toBe(
      `${long}one more line\nand another\n`,
    );
  });

  it('writePack: an object larger than a header byte can say, and the same object twice', async () => {
    const big = Buffer.from('x'.repeat(70_000));
    const bare = join(dir, 'big');
    git(dir, ['init', '--quiet', '--bare', bare]);
    const id = git(bare, ['hash-object', '--stdin'], big).toString().trim();
    await writePack(bare, [
      { id, type: 'blob', data: big },
      { id, type: 'blob', data: big },
    ]);
    expect(git(bare, ['cat-file', 'blob', id]).equals(big)).toBe(true);
    const listed = git(bare, ['count-objects', '-v']).toString();
    expect(listed).toMatch(/^count: 0$/m);
    expect(listed).toMatch(/^in-pack: 1$/m);
    git(bare, ['fsck', '--strict']);
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
