import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GIT_TEST_ENV } from '../helpers/lock-repo.js';
import {
  CHANGE_LOG_FORMAT,
  HOLDER_LOG_FORMAT,
  fastImportCommit,
  fastImportCommits,
  lockAtPath,
  objectType,
  parseFetchHead,
  parseChangeLog,
  parseHolderLog,
  parseLsRemote,
  parseMark,
  parseMarks,
  parseRawLog,
  parseShallow,
  parseTree,
  poolEntries,
  quotePath,
} from '../../src/repo/git-output.js';

// All recorded from git 2.39.5 on a pool `p` holding: claimed/.gitkeep, claimed/a, claimed/link
// (a symlink), unclaimed/.gitkeep, unclaimed/dir/f (a folder), unclaimed/tab<TAB>x (a name the
// lock-name rules refuse), after the commits "init" and "claiming: a" (Claimed-By trailer).
const TIP = '7056bc45e2cdf97de6aa2fdda10cb7b519923368';
const INIT = 'eb7739fc4f282c3c42e5bd44c086abd9d03956b2';
const EMPTY = 'e69de29bb2d1d6434b8b29ae775ad8c2e48c5391';

/** `git ls-tree -r -t -z HEAD -- p/` */
const LS_TREE = [
  '040000 tree 0c54f779b1db30b49565e3da6ce116a6e069ccd0\tp',
  '040000 tree 7dccab71fb874c393136e85beae7cbde6478ec8a\tp/claimed',
  `100644 blob ${EMPTY}\tp/claimed/.gitkeep`,
  `100644 blob ${EMPTY}\tp/claimed/a`,
  '120000 blob 3594e94c04db171e2767224db355f514b13715c5\tp/claimed/link',
  '040000 tree 2be89f7335d52f23ba15954cd79b64b1d86f2026\tp/unclaimed',
  `100644 blob ${EMPTY}\tp/unclaimed/.gitkeep`,
  '040000 tree 3d5a503f4062d198b443db5065ca727f8354e7df\tp/unclaimed/dir',
  `100644 blob ${EMPTY}\tp/unclaimed/dir/f`,
  `100644 blob ${EMPTY}\tp/unclaimed/tab\tx`,
  '',
].join('\0');

/** `git fetch --verbose --depth=1 -- ../r.git <branch refspec> <waiting-line refspec>` */
const FETCH_HEAD_WITH_LINE =
  `${TIP}\t\tbranch 'master' of ../r\n` +
  `${TIP}\t\t'refs/pool-resource/waiting/master/p/1700000000000-1000-aaaa' of ../r\n`;
/** The same fetch of the branch alone, after `adding b`. */
const FETCH_HEAD_BRANCH = "31480be515adaf321db2b55abfe518f518f0362c\t\tbranch 'master' of ../r\n";

/** `git ls-remote -- ../r.git refs/heads/master 'refs/pool-resource/waiting/master/p/*'` */
const LS_REMOTE =
  `${TIP}\trefs/heads/master\n` +
  `${TIP}\trefs/pool-resource/waiting/master/p/1700000000000-1000-aaaa\n`;

/** `git log -z --raw --no-renames --no-abbrev --format=%x01%H HEAD -- p/` */
const ZERO = '0'.repeat(40);
const RAW_LOG =
  `\x01${TIP}\0\n:000000 100644 ${ZERO} ${EMPTY} A\0p/claimed/a\0` +
  `:100644 000000 ${EMPTY} ${ZERO} D\0p/unclaimed/a\0` +
  `\x01${INIT}\0\n:000000 100644 ${ZERO} ${EMPTY} A\0p/claimed/.gitkeep\0` +
  `:000000 120000 ${ZERO} 3594e94c04db171e2767224db355f514b13715c5 A\0p/claimed/link\0` +
  `:000000 100644 ${ZERO} ${EMPTY} A\0p/unclaimed/.gitkeep\0` +
  `:000000 100644 ${ZERO} ${EMPTY} A\0p/unclaimed/a\0` +
  `:000000 100644 ${ZERO} ${EMPTY} A\0p/unclaimed/dir/f\0` +
  `:000000 100644 ${ZERO} ${EMPTY} A\0p/unclaimed/tab\tx\0`;

/** `git log -z --no-renames --diff-filter=A --name-only --format=HOLDER_LOG_FORMAT HEAD -- p/claimed/a p/unclaimed/b` */
const HOLDER_LOG =
  '\x1e31480be515adaf321db2b55abfe518f518f0362c\x1f1796138483\x1fT <t@x>\x1f\x1fadding b\n\x1f\0\np/unclaimed/b\0' +
  `\x1e${TIP}\x1f1700000100\x1fT <t@x>\x1fClaimed-By: https://ci/b/1\n\x1fclaiming: a\n\nClaimed-By: https://ci/b/1\n\x1f\0\np/claimed/a\0`;

describe('parseTree', () => {
  it('reads every row, a name with a tab included', () => {
    const entries = parseTree(LS_TREE);
    expect(entries).toHaveLength(10);
    expect(entries[4]).toEqual({
      mode: '120000',
      type: 'blob',
      id: '3594e94c04db171e2767224db355f514b13715c5',
      path: 'p/claimed/link',
    });
    expect(entries[9]!.path).toBe('p/unclaimed/tab\tx');
  });

  it('reads nothing from nothing', () => {
    expect(parseTree('')).toEqual([]);
  });
});

describe('poolEntries', () => {
  it('counts regular files with valid names as locks, and says why the others are not', () => {
    const pool = poolEntries(LS_TREE, 'p');
    expect([...pool.claimed]).toEqual(['a']);
    expect([...pool.unclaimed]).toEqual([]);
    expect(Object.fromEntries(pool.irregular)).toEqual({
      'claimed/link': 'a symlink',
      'unclaimed/dir': 'a directory',
      'unclaimed/tab\tx': 'not a valid lock name',
    });
    expect(pool.exists).toBe(true);
    expect(pool.byPath.get('p/claimed/a')?.id).toBe(EMPTY);
  });

  it.each([
    [
      'a pool with one folder missing',
      LS_TREE.split('\0')
        .filter((row) => !row.endsWith('\tp/claimed'))
        .join('\0'),
    ],
    ['another pool', LS_TREE],
  ])('says the pool does not exist: %s', (_, out) => {
    const pool = poolEntries(out, _ === 'another pool' ? 'q' : 'p');
    expect(pool.exists).toBe(false);
  });
});

describe('lockAtPath', () => {
  it.each([
    ['p/claimed/a', { state: 'claimed', name: 'a' }],
    ['p/unclaimed/tab\tx', { state: 'unclaimed', name: 'tab\tx' }],
    ['p/claimed/.gitkeep', undefined],
    ['p/unclaimed/dir/f', undefined],
    ['p/other/a', undefined],
    ['pp/claimed/a', undefined],
    ['p/claimed', undefined],
  ])('%j', (path, lock) => {
    expect(lockAtPath('p', path)).toEqual(lock);
  });
});

describe('parseFetchHead', () => {
  it.each([
    [
      'the branch and a waiting-line ref',
      FETCH_HEAD_WITH_LINE,
      TIP,
      [{ id: TIP, ref: 'refs/pool-resource/waiting/master/p/1700000000000-1000-aaaa' }],
    ],
    ['the branch alone', FETCH_HEAD_BRANCH, '31480be515adaf321db2b55abfe518f518f0362c', []],
    ['nothing', '', undefined, []],
  ])('%s', (_, text, tip, refs) => {
    expect(parseFetchHead(text)).toEqual({ tip, refs });
  });
});

describe('parseLsRemote', () => {
  it.each([
    [
      LS_REMOTE,
      [
        { id: TIP, ref: 'refs/heads/master' },
        { id: TIP, ref: 'refs/pool-resource/waiting/master/p/1700000000000-1000-aaaa' },
      ],
    ],
    // A branch that does not exist: ls-remote prints nothing and exits 0.
    ['', []],
  ])('%j', (out, refs) => {
    expect(parseLsRemote(out)).toEqual(refs);
  });
});

describe('parseShallow', () => {
  it.each([
    [`${TIP}\n`, [TIP]],
    [`${TIP}\n${INIT}\n`, [TIP, INIT]],
    ['', []],
  ])('%j', (text, commits) => {
    expect([...parseShallow(text)]).toEqual(commits);
  });
});

describe('parseRawLog', () => {
  it('gives each commit, newest first, with what each path holds after it', () => {
    const log = parseRawLog(RAW_LOG);
    expect(log.map(({ commit }) => commit)).toEqual([TIP, INIT]);
    expect(log[0]!.changes).toEqual([
      { status: 'A', mode: '100644', id: EMPTY, path: 'p/claimed/a' },
      { status: 'D', mode: '000000', id: ZERO, path: 'p/unclaimed/a' },
    ]);
    expect(log[1]!.changes).toContainEqual({
      status: 'A',
      mode: '120000',
      id: '3594e94c04db171e2767224db355f514b13715c5',
      path: 'p/claimed/link',
    });
    expect(log[1]!.changes.map(({ path }) => path)).toContain('p/unclaimed/tab\tx');
  });

  it('reads a log that printed no commit', () => {
    expect(parseRawLog('')).toEqual([]);
  });
});

describe('objectType', () => {
  it.each([
    ['100644', 'blob'],
    ['100755', 'blob'],
    ['120000', 'blob'],
    ['040000', 'tree'],
    ['160000', 'commit'],
  ])('%s is a %s, as ls-tree says', (mode, type) => {
    expect(objectType(mode)).toBe(type);
  });
});

describe('parseHolderLog', () => {
  it('reads trailers, body, author and time of each commit', () => {
    expect(HOLDER_LOG_FORMAT).toBe(
      '\x1e%H\x1f%at\x1f%an <%ae>\x1f%(trailers:only,unfold)\x1f%B\x1f',
    );
    const [added, claimed] = parseHolderLog(HOLDER_LOG);
    expect(added).toEqual({
      commit: '31480be515adaf321db2b55abfe518f518f0362c',
      time: 1796138483,
      author: 'T <t@x>',
      trailers: '',
      body: 'adding b\n',
      paths: ['p/unclaimed/b'],
    });
    expect(claimed).toMatchObject({
      commit: TIP,
      time: 1700000100,
      trailers: 'Claimed-By: https://ci/b/1\n',
      paths: ['p/claimed/a'],
    });
  });
});

describe('quotePath', () => {
  it.each([
    ['p/claimed/a', 'p/claimed/a'],
    ['p/claimed/a b', '"p/claimed/a b"'],
    ['p/claimed/tab\tx', '"p/claimed/tab\\011x"'],
    // fast-import reads a path as quoted only when it starts with a quote.
    ['p/claimed/"q"', 'p/claimed/"q"'],
    ['"q"', '"\\"q\\""'],
    ['p/claimed/é', '"p/claimed/\\303\\251"'],
    ['p/claimed/new\nline', '"p/claimed/new\\nline"'],
  ])('%j', (path, quoted) => {
    expect(quotePath(path)).toBe(quoted);
  });
});

/** Runs `test` in a new bare repository holding one commit (`base`), removed after. */
function withBareRepository(
  test: (git: (args: string[], input?: Buffer) => string, base: string) => void,
): void {
  const dir = mkdtempSync(join(tmpdir(), 'fast-import-'));
  try {
    const git = (args: string[], input?: Buffer) =>
      execFileSync('git', args, { cwd: dir, input, encoding: 'utf8', env: GIT_TEST_ENV });
    git(['init', '--quiet', '--bare']);
    const empty = git(['hash-object', '-t', 'tree', '-w', '--stdin'], Buffer.alloc(0)).trim();
    test(git, git(['commit-tree', empty, '-m', 'base']).trim());
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('fastImportCommit', () => {
  const commit = {
    ref: 'refs/pool-resource/attempt',
    author: 'A U Thor <a@x>',
    committer: 'C O Mitter <c@x>',
    message: 'claiming: tab\tx',
    from: TIP,
  };

  it.each([
    [
      'rename',
      { kind: 'rename' as const, from: 'p/unclaimed/a b', to: 'p/claimed/a b' },
      'R "p/unclaimed/a b" "p/claimed/a b"\n',
    ],
    ['delete', { kind: 'delete' as const, path: 'p/claimed/a' }, 'D p/claimed/a\n'],
    [
      'modify',
      { kind: 'modify' as const, mode: '100755', path: 'p/claimed/a', content: Buffer.from('x\n') },
      'M 100755 inline p/claimed/a\ndata 2\nx\n\n',
    ],
  ])('writes a %s', (_, change, command) => {
    expect(fastImportCommit({ ...commit, change }).toString()).toBe(
      'commit refs/pool-resource/attempt\nmark :1\n' +
        'author A U Thor <a@x> now\ncommitter C O Mitter <c@x> now\n' +
        `data 16\nclaiming: tab\tx\n\nfrom ${TIP}\n${command}\nget-mark :1\ndone\n`,
    );
  });

  it('is a stream git fast-import takes, printing the commit it wrote', () => {
    withBareRepository((git, base) => {
      const out = git(
        ['fast-import', '--quiet', '--force', '--done', '--date-format=now'],
        fastImportCommit({
          ...commit,
          from: base,
          change: {
            kind: 'modify',
            mode: '100644',
            path: 'p/claimed/tab\tx',
            content: Buffer.from('m'),
          },
        }),
      );
      const id = parseMark(out);
      expect(id).toMatch(/^[0-9a-f]{40}$/);
      expect(git(['ls-tree', '-r', '--name-only', '-z', id!])).toBe('p/claimed/tab\tx\0');
      expect(git(['log', '-1', '--format=%s%n%P', id!])).toBe(`claiming: tab\tx\n${base}\n`);
    });
  });
});

describe('fastImportCommits', () => {
  it('writes commits in a row in one stream, and parseMarks reads their ids in order', () => {
    withBareRepository((git, base) => {
      const out = git(
        ['fast-import', '--quiet', '--force', '--done', '--date-format=now'],
        fastImportCommits({
          ref: 'refs/pool-resource/attempt',
          author: 'A U Thor <a@x>',
          committer: 'C O Mitter <c@x>',
          from: base,
          commits: [
            {
              message: 'adding: a',
              change: { kind: 'modify', mode: '100644', path: 'p/a', content: Buffer.from('a') },
            },
            { message: 'renewing: a', change: undefined },
            { message: 'moving: a', change: { kind: 'rename', from: 'p/a', to: 'q/a' } },
          ],
        }),
      );
      const ids = parseMarks(out, 3);
      expect(ids).toHaveLength(3);
      expect(git(['log', '--format=%s %P', ids![2]!])).toBe(
        `moving: a ${ids![1]}\nrenewing: a ${ids![0]}\nadding: a ${base}\nbase \n`,
      );
      expect(git(['ls-tree', '-r', '--name-only', ids![1]!])).toBe('p/a\n');
      expect(git(['ls-tree', '-r', '--name-only', ids![2]!])).toBe('q/a\n');
      expect(parseMarks(out, 4)).toBeUndefined();
    });
  });
});

describe('parseMark', () => {
  it.each([
    [`${TIP}\n`, TIP],
    ['', undefined],
    ['fatal: not a mark\n', undefined],
  ])('%j', (out, id) => {
    expect(parseMark(out)).toBe(id);
  });
});

describe('parseChangeLog', () => {
  // `git log -z --no-renames --name-status --format=CHANGE_LOG_FORMAT -- p/` (git 2.39.5) after
  // init, claiming: a, renewing: a (empty), unclaiming: a (with the reclaim trailers), updating: a
  // (and a new "sp ace"), removing: sp ace; then a merge (no diff) of a side branch adding b.
  const CHANGE_LOG =
    '\x1ea859d8a440cfb11660350a358e8db2603794ce90\0\0' +
    '\x1efde747fd5bf4e63c8d26bef45fa33ce755f11bfc\0\0\nD\0p/unclaimed/sp ace\0' +
    '\x1e17ce6bdb1685e69828e9365fa81e971d43b7d663\0\0\nA\0p/unclaimed/b\0' +
    '\x1e382fe1e95f9ca438678f0ebf0d2c3d560d68be8b\0\0\nM\0p/unclaimed/a\0A\0p/unclaimed/sp ace\0' +
    '\x1eee13979089b61c88d063e63d18b6228d6dd68b9f\0tok\n\0\nD\0p/claimed/a\0A\0p/unclaimed/a\0' +
    '\x1e9ab74ffe7216edd271cd420e3750294a9d4e6f82\0\0\nA\0p/claimed/a\0D\0p/unclaimed/a\0' +
    '\x1efbc64d1c20816f428d347f48b07c366e59790255\0\0\nA\0p/claimed/.gitkeep\0A\0p/unclaimed/.gitkeep\0A\0p/unclaimed/a\0';

  it('gives each commit, newest first, with its changes and whether it reclaims', () => {
    expect(CHANGE_LOG_FORMAT).toBe('\x1e%H%x00%(trailers:key=Reclaimed-Token,valueonly)');
    const change = (status: string, path: string) => ({ status, path });
    expect(parseChangeLog(CHANGE_LOG)).toEqual([
      { commit: 'a859d8a440cfb11660350a358e8db2603794ce90', reclaim: false, changes: [] },
      {
        commit: 'fde747fd5bf4e63c8d26bef45fa33ce755f11bfc',
        reclaim: false,
        changes: [change('D', 'p/unclaimed/sp ace')],
      },
      {
        commit: '17ce6bdb1685e69828e9365fa81e971d43b7d663',
        reclaim: false,
        changes: [change('A', 'p/unclaimed/b')],
      },
      {
        commit: '382fe1e95f9ca438678f0ebf0d2c3d560d68be8b',
        reclaim: false,
        changes: [change('M', 'p/unclaimed/a'), change('A', 'p/unclaimed/sp ace')],
      },
      {
        commit: 'ee13979089b61c88d063e63d18b6228d6dd68b9f',
        reclaim: true,
        changes: [change('D', 'p/claimed/a'), change('A', 'p/unclaimed/a')],
      },
      {
        commit: '9ab74ffe7216edd271cd420e3750294a9d4e6f82',
        reclaim: false,
        changes: [change('A', 'p/claimed/a'), change('D', 'p/unclaimed/a')],
      },
      {
        commit: 'fbc64d1c20816f428d347f48b07c366e59790255',
        reclaim: false,
        changes: [
          change('A', 'p/claimed/.gitkeep'),
          change('A', 'p/unclaimed/.gitkeep'),
          change('A', 'p/unclaimed/a'),
        ],
      },
    ]);
  });

  it('reads a path that looks like a status or holds a newline as a path', () => {
    const out = '\x1e' + 'a'.repeat(40) + '\0\0\nA\0p/unclaimed/M\0A\0p/claimed/x\ny\0';
    expect(parseChangeLog(out)[0]!.changes).toEqual([
      { status: 'A', path: 'p/unclaimed/M' },
      { status: 'A', path: 'p/claimed/x\ny' },
    ]);
  });

  it('reads nothing from nothing', () => {
    expect(parseChangeLog('')).toEqual([]);
  });
});
