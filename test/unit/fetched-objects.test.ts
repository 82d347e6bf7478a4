// The commits and trees a put fetched on its session, read and written without git
// (repo/fetched-objects.ts, repo/moved-commits.ts): each answer checked against git's own on a real
// repository, from packs git's pack-objects made.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { unpack } from '../../src/git/pack-objects.js';
import { FetchedObjects, claimTokens } from '../../src/repo/fetched-objects.js';
import { commitsOfMoves } from '../../src/repo/moved-commits.js';
import { parseTree } from '../../src/repo/git-output.js';
import { claimsBetween } from '../../src/repo/line-claims.js';
import { GIT_TEST_ENV } from '../helpers/lock-repo.js';

const dir = mkdtempSync(join(tmpdir(), 'fetched-objects-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const git = (args: string[], input?: Buffer) =>
  execFileSync('git', args, { cwd: dir, env: GIT_TEST_ENV, input, maxBuffer: 1 << 26 });
const text = (args: string[], input?: string) =>
  git(args, input === undefined ? undefined : Buffer.from(input)).toString('utf8');

git(['init', '--quiet', '-b', 'master']);
const POOL = 'envs/aws';

/** Writes `files` (path to content; null removes it) and commits them with `message`. */
function commit(files: Record<string, string | null>, message: string): string {
  for (const [path, content] of Object.entries(files)) {
    if (content === null) git(['rm', '--quiet', path]);
    else {
      mkdirSync(join(dir, path, '..'), { recursive: true });
      writeFileSync(join(dir, path), content);
      git(['add', path]);
    }
  }
  git(['commit', '--quiet', '--allow-empty', '-m', message]);
  return text(['rev-parse', 'HEAD']).trim();
}

/** The objects of `tip` beyond `base`, from a pack git made, as the session reads them. */
function objectsSince(tip: string, base?: string) {
  const revs = base ? `${tip}\n^${base}\n` : `${tip}\n`;
  return unpack(git(['pack-objects', '--revs', '--stdout', '-q'], Buffer.from(revs)));
}

/** What `ls-tree -r -t -z` prints for the pool at `tip`, read into entries. */
const listed = (tip: string) =>
  parseTree(text(['ls-tree', '-r', '-t', '-z', tip, '--', `${POOL}/`]));

const claimMessage = (token: string) =>
  `claiming: lock-a\n\nBuild URL: https://ci/builds/1\n\n` +
  `Claim-Token: ${token}\nClaimed-At: 2026-12-04T10:00:00Z\n`;

const first = commit(
  {
    [`${POOL}/claimed/.gitkeep`]: '',
    [`${POOL}/unclaimed/.gitkeep`]: '',
    [`${POOL}/unclaimed/lock-a`]: 'a\n',
    [`${POOL}/unclaimed/lock-b`]: 'b\n',
    'envs/other/unclaimed/x': 'x\n',
    // Beside the folder "envs", names that sort before and after it as git sorts a tree.
    'envs-x': 'x\n',
    'envs.txt': 'x\n',
    'README.md': 'locks\n',
  },
  'adding locks',
);
const claimA = commit(
  { [`${POOL}/unclaimed/lock-a`]: null, [`${POOL}/claimed/lock-a`]: 'a\n' },
  claimMessage('6F1C-aa01'),
);
const other = commit({ 'README.md': 'locks, more\n' }, 'a change beside the pool');
const claimB = commit(
  { [`${POOL}/unclaimed/lock-b`]: null, [`${POOL}/claimed/lock-b`]: 'b\n' },
  claimMessage('7E2D-bb02'),
);

describe('FetchedObjects', () => {
  it('lists the pool at a fetched tip as git ls-tree does, down a nested path', () => {
    const fetched = new FetchedObjects();
    fetched.learn(objectsSince(claimA));
    expect(fetched.poolTree(claimA, POOL)).toEqual(listed(claimA));
    expect(fetched.poolTree(first, POOL)).toEqual(listed(first));
  });

  it('lists a tip whose pool did not change from the folders git listed before', () => {
    const fetched = new FetchedObjects();
    // The first tip came by git's fetch: only ls-tree's listing of it is kept.
    fetched.learnListing(listed(claimA), POOL);
    expect(fetched.poolTree(other, POOL)).toBeUndefined();
    // The next fetch on the session brings the new commit and root only: the folders on the way
    // to the pool, and the pool's, are the ones ls-tree listed.
    fetched.learn(objectsSince(other, claimA));
    expect(fetched.poolTree(other, POOL)).toEqual(listed(other));
    fetched.learn(objectsSince(claimB, other));
    expect(fetched.poolTree(claimB, POOL)).toEqual(listed(claimB));
  });

  it('knows no pool where its folders were never fetched, or where it is not a folder', () => {
    const fetched = new FetchedObjects();
    fetched.learn(objectsSince(other, claimA));
    // Its commit and root came, not the folders it left as they were.
    expect(fetched.poolTree(other, POOL)).toBeUndefined();
    fetched.learn(objectsSince(claimA));
    expect(fetched.poolTree(other, POOL)).toEqual(listed(other));
    fetched.learn(objectsSince(claimB, other));
    expect(fetched.poolTree(claimB, POOL)).toEqual(listed(claimB));
    expect(fetched.poolTree(claimB, 'README.md')).toBeUndefined();
    expect(fetched.poolTree(claimB, 'no-such-pool')).toBeUndefined();
  });

  it('gives a fetched commit its committer time, as %ct does', () => {
    const fetched = new FetchedObjects();
    fetched.learn(objectsSince(claimB));
    for (const commitId of [first, claimA, other, claimB])
      expect(fetched.commitTime(commitId)).toBe(
        Number(text(['show', '--no-patch', '--format=%ct', commitId]).trim()) * 1000,
      );
    expect(fetched.commitTime('0'.repeat(40))).toBeUndefined();
  });

  it('reads the claims between two fetched tips as git log does, and nothing it lacks', async () => {
    const fetched = new FetchedObjects();
    fetched.learn(objectsSince(claimB, first));
    const viaGit = await claimsBetween(async (args) => text(args), first, claimB);
    expect(fetched.claimTokens(first, claimB)).toEqual(['7E2D-bb02', '6F1C-aa01']);
    expect(
      new Set(fetched.claimTokens(first, claimB)!.map((t) => t.toLowerCase().replace(/-/g, ''))),
    ).toEqual(viaGit);
    expect(fetched.claimTokens(claimA, claimB)).toEqual(['7E2D-bb02']);
    expect(fetched.claimTokens(claimB, claimB)).toEqual([]);
    // first is not kept: a walk past it, from a tip it never reaches, is git's to read.
    expect(fetched.claimTokens(claimB, first)).toBeUndefined();
    expect(fetched.claimTokens('0'.repeat(40), claimB)).toBeUndefined();
  });

  it('reads the claims among the newest commits down from a tip, as far as they are kept', () => {
    const fetched = new FetchedObjects();
    fetched.learn(objectsSince(claimB, claimA));
    // claimB and the change beside the pool are kept, claimA (the walk's third) is not.
    expect(fetched.newestClaimTokens(claimB, 16)).toEqual(['7E2D-bb02']);
    expect(fetched.newestClaimTokens(other, 16)).toEqual([]);
    fetched.learn(objectsSince(claimA, first));
    expect(fetched.newestClaimTokens(claimB, 16)).toEqual(['7E2D-bb02', '6F1C-aa01']);
    expect(fetched.newestClaimTokens(claimB, 2)).toEqual(['7E2D-bb02']);
    expect(fetched.newestClaimTokens('0'.repeat(40), 16)).toEqual([]);
  });
});

describe('claimTokens', () => {
  /** What `%(trailers:key=Claim-Token,valueonly,unfold)` prints for `message`, a value a line. */
  function gitReads(message: string): string[] {
    const id = text(['commit-tree', '-m', message, `${claimB}^{tree}`]).trim();
    const out = text(['log', '-1', '--format=%(trailers:key=Claim-Token,valueonly,unfold)', id]);
    return out.split('\n').filter((line) => line !== '');
  }

  it.each([
    ['no trailer at all', 'releasing: lock-a\n\nBuild URL: x\n'],
    ['a claim as out writes it', claimMessage('0A1B-c3')],
    [
      'the key in another case, a space before its colon',
      'claiming: a\n\nclaim-token : 9Z-x\nFoo: y\n',
    ],
    ['a folded value', 'claiming: a\n\nClaim-Token: 12-\n  34-56\nFoo: y\n'],
    ['two of them', 'claiming: a\n\nClaim-Token: aa\nClaim-Token: bb\n'],
    ['trailing blank lines', 'claiming: a\n\nClaim-Token: aa\n\n\n'],
  ])('reads %s as git does', (_, message) => {
    expect(claimTokens(message)).toEqual(gitReads(message));
  });

  it.each([
    ['in the subject only', 'Claim-Token: aa'],
    ['in a paragraph of prose too', 'claiming: a\n\nClaim-Token: aa\nthis line is prose\n'],
    ['before a patch', 'claiming: a\n\nClaim-Token: aa\n---\nfoo\n'],
    ['with comment lines', 'claiming: a\n\n# note\nClaim-Token: aa\n'],
    ['with carriage returns', 'claiming: a\r\n\r\nClaim-Token: aa\r\n'],
  ])('leaves git to read it %s', (_, message) => {
    expect(claimTokens(message)).toBeUndefined();
  });
});

describe('commitsOfMoves', () => {
  const identity = {
    author: 'A U Thor <author@example.com>',
    committer: 'C O Mitter <committer@example.com>',
    when: '1796400000 +0130',
  };
  const released = (name: string) =>
    [`${POOL}/claimed/${name}`, `${POOL}/unclaimed/${name}`] as const;

  /** The commits fast-import writes for the same moves on `parent`, with the same dates. */
  function fastImported(
    parent: string,
    commits: { moves: (readonly [string, string])[]; message: string }[],
  ) {
    const ident = (who: string) => `${who} ${identity.when}`;
    const stream = commits
      .map(({ moves, message }, index) => {
        const body = Buffer.from(message);
        return (
          `commit refs/heads/imported\nmark :${index + 1}\n` +
          `author ${ident(identity.author)}\ncommitter ${ident(identity.committer)}\n` +
          `data ${body.length}\n${message}\nfrom ${index === 0 ? parent : `:${index}`}\n` +
          moves.map(([from, to]) => `R ${from} ${to}\n`).join('') +
          '\n'
        );
      })
      .join('');
    const marks = commits.map((_, index) => `get-mark :${index + 1}\n`).join('');
    return text(
      ['fast-import', '--quiet', '--force', '--done', '--date-format=raw'],
      `${stream}${marks}done\n`,
    )
      .trim()
      .split('\n');
  }

  it('writes the commits fast-import writes, byte for byte, one on top of the other', () => {
    const fetched = new FetchedObjects();
    fetched.learn(objectsSince(claimB));
    const commits = [
      { moves: [released('lock-a')], message: 'unclaiming: lock-a\n' },
      { moves: [released('lock-b')], message: 'unclaiming: lock-b\n\nClaim-Token: x\n' },
    ];
    const objects = commitsOfMoves(fetched, claimB, commits, identity)!;
    const ids = objects.filter(({ type }) => type === 'commit').map(({ id }) => id);
    expect(ids).toEqual(fastImported(claimB, commits));
    // Each object is what git has under its id, and the new tip's pool reads as git's.
    for (const { id, type, data } of objects)
      expect(git(['cat-file', type, id]).equals(data)).toBe(true);
    expect(fetched.poolTree(ids[1]!, POOL)).toEqual(listed(ids[1]!));
  });

  it('replaces a file at the new path, as fast-import does', () => {
    const fetched = new FetchedObjects();
    fetched.learn(objectsSince(claimB));
    const commits = [
      {
        moves: [[`${POOL}/claimed/lock-a`, `${POOL}/claimed/lock-b`] as const],
        message: 'moving\n',
      },
    ];
    const [id] = fastImported(claimB, commits);
    expect(commitsOfMoves(fetched, claimB, commits, identity)!.at(-1)!.id).toBe(id);
  });

  it('leaves to fast-import what it cannot build from what is kept', () => {
    const fetched = new FetchedObjects();
    fetched.learn(objectsSince(other, claimA));
    // other's root is kept, not the folders below it.
    expect(
      commitsOfMoves(fetched, other, [{ moves: [released('lock-a')], message: 'm' }], identity),
    ).toBeUndefined();
    fetched.learn(objectsSince(claimB));
    const moving = (from: string, to: string) =>
      commitsOfMoves(fetched, claimB, [{ moves: [[from, to]], message: 'm' }], identity);
    expect(moving(`${POOL}/claimed/lock-z`, `${POOL}/unclaimed/lock-z`)).toBeUndefined();
    expect(moving(`${POOL}/claimed/lock-a`, `${POOL}/gone/lock-a`)).toBeUndefined();
    expect(moving(`${POOL}/claimed/lock-a`, `${POOL}/claimed`)).toBeUndefined();
    expect(moving(`${POOL}/claimed`, `${POOL}/elsewhere`)).toBeUndefined();
    // The last file of envs/other/unclaimed: fast-import would drop the folders it empties.
    expect(moving('envs/other/unclaimed/x', `${POOL}/unclaimed/x`)).toBeUndefined();
    expect(commitsOfMoves(fetched, '0'.repeat(40), [], identity)).toBeUndefined();
  });
});
