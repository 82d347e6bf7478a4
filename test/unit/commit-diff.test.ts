// What `in` reads without git from the commits it fetched itself (repo/commit-diff.ts,
// FetchedObjects): a commit's changes below the pool, its trailers and its record, each against
// what git's own log prints for the same commit.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { unpack } from '../../src/git/pack-objects.js';
import { commitMessage } from '../../src/protocol/build-info.js';
import { changesBelow } from '../../src/repo/commit-diff.js';
import { FetchedObjects, trailerLines } from '../../src/repo/fetched-objects.js';
import { HOLDER_LOG_FORMAT, parseHolderLog, parseRawLog } from '../../src/repo/git-output.js';
import { GIT_TEST_ENV } from '../helpers/lock-repo.js';

const dir = mkdtempSync(join(tmpdir(), 'commit-diff-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const work = join(dir, 'work');
const git = (args: string[], input?: Buffer) =>
  execFileSync('git', args, { cwd: work, env: GIT_TEST_ENV, input, maxBuffer: 1 << 26 });
execFileSync('git', ['init', '--quiet', '-b', 'master', work], { env: GIT_TEST_ENV });

/** Commits what `change` did to the work tree with `message`, verbatim; its id. */
function commit(message: string, change: () => void = () => undefined): string {
  change();
  git(['add', '-A']);
  git(['commit', '--quiet', '--allow-empty', '--cleanup=verbatim', '-m', message]);
  return git(['rev-parse', 'HEAD']).toString().trim();
}

const at = (...path: string[]) => join(work, ...path);
const write = (path: string, text: string) => writeFileSync(at(path), text);

/** Every object of the branch, parsed as a run's first fetch keeps them. */
function kept(): FetchedObjects {
  const pack = git(['pack-objects', '--revs', '--stdout', '-q'], Buffer.from('HEAD\n'));
  const fetched = new FetchedObjects();
  fetched.learn(unpack(pack));
  return fetched;
}

/** git's `log --raw` of `commit` below `pool/`, where it changed anything there. */
function gitChanges(id: string, pool = 'pool') {
  const out = git([
    'log',
    '-1',
    '-z',
    '--no-renames',
    '--raw',
    '--no-abbrev',
    '--format=%x01%H',
    id,
    '--',
    `${pool}/`,
  ]);
  const [record] = parseRawLog(out.toString());
  return record?.commit === id ? record.changes : [];
}

describe('changesBelow', () => {
  it('tells what git log --raw tells of each commit below the pool, in its order', () => {
    mkdirSync(at('pool', 'claimed'), { recursive: true });
    mkdirSync(at('pool', 'unclaimed'), { recursive: true });
    const commits = [
      commit('initial pools', () => {
        write('pool/claimed/.gitkeep', '');
        write('pool/unclaimed/.gitkeep', '');
        write('pool/unclaimed/lock-a', 'a\n');
        write('pool/unclaimed/lock-b', 'b\n');
        write('pool/unclaimed/lock-c', 'c\n');
      }),
      commit('claiming: lock-a', () => git(['mv', 'pool/unclaimed/lock-a', 'pool/claimed/lock-a'])),
      commit('updating: lock-b', () => write('pool/unclaimed/lock-b', 'b, once more\n')),
      commit('mode', () => chmodSync(at('pool', 'unclaimed', 'lock-b'), 0o755)),
      commit('a link', () => {
        rmSync(at('pool', 'unclaimed', 'lock-b'));
        symlinkSync('lock-a', at('pool', 'unclaimed', 'lock-b'));
      }),
      commit('a folder where a lock was', () => {
        rmSync(at('pool', 'unclaimed', 'lock-c'));
        mkdirSync(at('pool', 'unclaimed', 'lock-c'));
        write('pool/unclaimed/lock-c/inside', 'x\n');
        write('pool/unclaimed/lock-c.d', 'sorts between\n');
      }),
      commit('removing: lock-a', () => rmSync(at('pool', 'claimed', 'lock-a'))),
      commit('another folder', () => {
        mkdirSync(at('other'), { recursive: true });
        write('other/file', 'o\n');
      }),
      commit('claiming: nothing', () => undefined),
    ];
    const fetched = kept();
    // The root commit has no parent to compare with: git reads it.
    expect(changesBelow(fetched, commits[0]!, 'pool')).toBeUndefined();
    for (const id of commits.slice(1))
      expect(
        changesBelow(fetched, id, 'pool'),
        git(['log', '-1', '--format=%s', id]).toString(),
      ).toEqual(gitChanges(id));
    // Something was checked: the claim is a deletion and an addition, in git's order.
    expect(
      changesBelow(fetched, commits[1]!, 'pool')!.map(({ status, path }) => `${status} ${path}`),
    ).toEqual(['A pool/claimed/lock-a', 'D pool/unclaimed/lock-a']);
  });

  it('undefined where a folder on the way was not fetched', () => {
    const id = git(['rev-parse', 'HEAD']).toString().trim();
    expect(changesBelow(new FetchedObjects(), id, 'pool')).toBeUndefined();
  });
});

/** `%(trailers:only,unfold)` of `message`, as git prints it for a commit with that message. */
function gitTrailers(message: string): string {
  const id = commit(message);
  return git(['log', '-1', '--format=%x00%(trailers:only,unfold)%x00', id])
    .toString()
    .split('\0')[1]!;
}

describe('trailerLines and the holder record', () => {
  const build = {
    url: 'https://ci.example/teams/main/pipelines/p/jobs/j/builds/7',
    team: 'main',
    name: '7',
  };
  const claim = {
    token: '5f0c3a5e-9a41-4b51-8a6b-1c1d2f0e9b77',
    at: new Date('2026-12-04T10:00:00Z'),
    waitedMs: 1_234,
    leaseExpires: new Date('2026-12-04T11:00:00Z'),
  };
  it.each([
    ['a claim', commitMessage('claiming: lock-a', build, claim)],
    [
      'a claim of a set',
      commitMessage('claiming: lock-a', build, claim, [['Claim-Set', 'lock-a, lock-b']]),
    ],
    ['a renewal', commitMessage('renewing: lock-a', build, claim)],
    ['a subject alone', 'claiming: lock-a'],
    ['a subject alone, with its newline', 'claiming: lock-a\n'],
    [
      'a folded trailer',
      'claiming: lock-a\n\nClaim-Token:abc\n  more\nOther-Key:   spaced out  \n',
    ],
    ['a release', commitMessage('unclaiming: lock-a', build)],
    ['a release of no build', 'unclaiming: lock-a\n\nBuild URL: unknown\n'],
    ['a body of words', 'updating: lock-b\n\nsome words: not a key\n  indented\n'],
    ['a body over paragraphs', 'updating: lock-b\n\nKey: early\n\nBuild URL: later\n'],
  ])('reads %s as git does', (_, message) => {
    const ours = trailerLines(message);
    expect(ours).toBeDefined();
    expect(ours).toBe(gitTrailers(message));
  });

  it.each([
    [
      'a line git counts as a trailer whatever it says',
      'claiming: lock-a\n\n(cherry picked from commit 0123)\n',
    ],
    ['a trailer among other lines', 'claiming: lock-a\n\nsome words\nClaim-Token: abc\n'],
    ['an empty value', 'claiming: lock-a\n\nClaim-Token: abc\nBuild-Team: \n'],
    ['a key with blanks before its colon', 'claiming: lock-a\n\nClaim-Token : abc\n'],
    ['a patch line', 'claiming: lock-a\n\n---\nClaim-Token: abc\n'],
  ])('leaves %s to git', (_, message) => {
    expect(trailerLines(message)).toBeUndefined();
  });

  it('keeps what the holder log prints of a claim', () => {
    const id = commit(commitMessage('claiming: lock-a', build, claim));
    const [fromGit] = parseHolderLog(
      git(['log', '-1', '-z', `--format=${HOLDER_LOG_FORMAT}`, id, '--']).toString(),
    );
    const record = kept().holderRecord(id);
    expect(record).toEqual({ ...fromGit, body: expect.any(String), paths: [] });
    expect(record!.body.split('\n')[0]).toBe('claiming: lock-a');
  });
});
