// The fetch a run asks itself (git/session-pack.ts), answered by git's own upload-pack in protocol
// v2: a copy's first fetch, a depth of commits from the tip, read and written by the run, then
// read back by git as a shallow copy it had fetched itself.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { unpack, writePack } from '../../src/git/pack-objects.js';
import { packAnswerOf, packOf, packRequest } from '../../src/git/session-pack.js';
import { GIT_TEST_ENV } from '../helpers/lock-repo.js';

const dir = mkdtempSync(join(tmpdir(), 'session-pack-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const git = (cwd: string, args: string[], options: { input?: Buffer; env?: object } = {}) =>
  execFileSync('git', args, {
    cwd,
    env: { ...GIT_TEST_ENV, ...options.env },
    input: options.input,
    maxBuffer: 1 << 26,
  });

const work = join(dir, 'work');
git(dir, ['init', '--quiet', '-b', 'master', work]);
const commits: string[] = [];
for (let i = 0; i < 5; i++) {
  writeFileSync(join(work, 'lock-a'), `holder ${i}\n`);
  git(work, ['add', '-A']);
  git(work, ['commit', '--quiet', '-m', `updating: lock-a (${i})`]);
  commits.push(git(work, ['rev-parse', 'HEAD']).toString().trim());
}
const tip = commits.at(-1)!;

/** upload-pack's answer to `request`, as a server speaking protocol v2 sends it. */
const answer = (request: Buffer) =>
  git(work, ['upload-pack', '--stateless-rpc', '.'], {
    input: request,
    env: { GIT_PROTOCOL: 'version=2' },
  });

/** An empty bare repository that holds `objects` as a pack, with `shallow` as its boundary. */
async function copyOf(objects: ReturnType<typeof unpack>, shallow: string[], name: string) {
  const bare = join(dir, name);
  git(dir, ['init', '--quiet', '--bare', bare]);
  mkdirSync(join(bare, 'objects', 'pack'), { recursive: true });
  await writePack(bare, objects);
  if (shallow.length > 0)
    writeFileSync(join(bare, 'shallow'), shallow.map((id) => `${id}\n`).join(''));
  git(bare, ['update-ref', 'refs/heads/master', tip]);
  return bare;
}

describe('a fetch with a depth, asked by the run', () => {
  it('brings that many commits, and names the one whose parents it cut off', async () => {
    const { pack, shallow } = packAnswerOf(answer(packRequest(tip, [], 2)));
    expect(shallow).toEqual([commits[3]]);
    const objects = unpack(pack);
    const bare = await copyOf(objects, shallow, 'two.git');
    // git reads it as the shallow copy its own `fetch --depth=2` makes: two commits, whole.
    expect(git(bare, ['rev-list', 'master']).toString().trim().split('\n')).toEqual([
      commits[4],
      commits[3],
    ]);
    git(bare, ['fsck', '--strict', '--no-progress']);
    // And git deepens it from the server as it would its own.
    git(bare, ['fetch', '--quiet', '--depth=4', work, 'master:refs/heads/master']);
    expect(git(bare, ['rev-list', '--count', 'master']).toString().trim()).toBe('4');
  });

  it('a depth past the first commit cuts nothing off', async () => {
    const { pack, shallow } = packAnswerOf(answer(packRequest(tip, [], 16)));
    expect(shallow).toEqual([]);
    const bare = await copyOf(unpack(pack), shallow, 'whole.git');
    expect(git(bare, ['rev-list', '--count', 'master']).toString().trim()).toBe('5');
    git(bare, ['fsck', '--strict', '--no-progress']);
  });

  it('without a depth, the answer is the pack alone, as before', () => {
    const objects = unpack(packOf(answer(packRequest(tip, [commits[3]!]))));
    expect(objects.filter(({ type }) => type === 'commit').map(({ id }) => id)).toEqual([tip]);
  });

  it('an answer that is no pack, or the server’s error, is refused', () => {
    const line = (text: string) =>
      Buffer.from(`${(Buffer.byteLength(text) + 4).toString(16).padStart(4, '0')}${text}`);
    expect(() =>
      packAnswerOf(Buffer.concat([line('acknowledgments\n'), Buffer.from('0000')])),
    ).toThrow(/answered with "acknowledgments"/);
    const refused = Buffer.concat([
      line('packfile\n'),
      line('\x03no such object\n'),
      Buffer.from('0000'),
    ]);
    expect(() => packAnswerOf(refused)).toThrow(/the server: no such object/);
    const unshallow = Buffer.concat([
      line('shallow-info\n'),
      line(`unshallow ${tip}\n`),
      Buffer.from('0001'),
    ]);
    expect(() => packAnswerOf(unshallow)).toThrow(/about its depth/);
  });
});
