// What a release or renew from a get's folder reads without git from the window of history it
// fetched itself (repo/fetched-log.ts): the commits that added each lock and the renewals since,
// each against what git's own logs print of the same copy, whole and shallow.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { unpack } from '../../src/git/pack-objects.js';
import { commitMessage } from '../../src/protocol/build-info.js';
import { firstLine, renewalLogArgs } from '../../src/repo/claim-trailers.js';
import { addingLog, holdLog, renewalLog } from '../../src/repo/fetched-log.js';
import { FetchedObjects } from '../../src/repo/fetched-objects.js';
import { holdHistoryArgs } from '../../src/repo/hold-history.js';
import {
  HOLDER_LOG_FORMAT,
  parseHolderLog,
  type HolderLogRecord,
} from '../../src/repo/git-output.js';
import { GIT_TEST_ENV } from '../helpers/lock-repo.js';

const dir = mkdtempSync(join(tmpdir(), 'fetched-log-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const work = join(dir, 'work');
const gitIn = (cwd: string, args: string[], input?: Buffer) =>
  execFileSync('git', args, { cwd, env: GIT_TEST_ENV, input, maxBuffer: 1 << 26 });
const git = (args: string[]) => gitIn(work, args);
gitIn(dir, ['init', '--quiet', '-b', 'master', work]);

const build = { url: 'https://ci.example/builds/7', team: 'main', name: '7' };
let claims = 0;

/** Commits what `change` did to the work tree with `message`, verbatim; its id. */
function commit(message: string, change: () => void = () => undefined): string {
  change();
  git(['add', '-A']);
  git(['commit', '--quiet', '--allow-empty', '--cleanup=verbatim', '-m', message]);
  return git(['rev-parse', 'HEAD']).toString().trim();
}

const claimOf = (token: string, hours = 1) => ({
  token,
  at: new Date('2026-12-04T10:00:00Z'),
  waitedMs: 0,
  leaseExpires: new Date(Date.UTC(2026, 11, 4, 10 + hours)),
});

/** Claims `name` as the put of a new token; the token. */
function claim(name: string): string {
  const token = `00000000-0000-4000-8000-${String(++claims).padStart(12, '0')}`;
  commit(commitMessage(`claiming: ${name}`, build, claimOf(token)), () =>
    git(['mv', `pool/unclaimed/${name}`, `pool/claimed/${name}`]),
  );
  return token;
}

const renew = (name: string, token: string, hours: number) =>
  commit(commitMessage(`renewing: ${name}`, build, claimOf(token, hours)));
const release = (name: string) =>
  commit(commitMessage(`unclaiming: ${name}`, build), () =>
    git(['mv', `pool/claimed/${name}`, `pool/unclaimed/${name}`]),
  );

/** Every object `head` reaches in the copy at `cwd`, parsed as a run's fetch keeps them. */
function kept(cwd: string, head = 'HEAD'): FetchedObjects {
  const fetched = new FetchedObjects();
  fetched.learn(
    unpack(gitIn(cwd, ['pack-objects', '--revs', '--stdout', '-q'], Buffer.from(`${head}\n`))),
  );
  return fetched;
}

function shallowOf(cwd: string): Set<string> {
  try {
    return new Set(
      readFileSync(join(cwd, '.git', 'shallow'), 'utf8')
        .split('\n')
        .filter(Boolean),
    );
  } catch {
    return new Set();
  }
}

const PATHS = ['lock-a', 'lock-b', 'lock-c', 'lock-gone'].flatMap((name) => [
  `pool/claimed/${name}`,
  `pool/unclaimed/${name}`,
]);

/** What LockHolders takes from an adding log: each path's first commit but a shallow one. */
function firstAdding(log: readonly HolderLogRecord[], shallow: ReadonlySet<string>) {
  const first = new Map<
    string,
    { commit: string; time: number; trailers: string; subject: string }
  >();
  const settled = new Set<string>();
  for (const { commit, time, trailers, body, paths } of log)
    for (const path of paths) {
      if (settled.has(path)) continue;
      settled.add(path);
      if (!shallow.has(commit))
        first.set(path, { commit, time, trailers, subject: firstLine(body) });
    }
  return first;
}

const brief = (log: readonly HolderLogRecord[]) =>
  log.map(({ commit, time, author, trailers, body }) => ({
    commit,
    time,
    author,
    trailers,
    subject: firstLine(body),
  }));

function gitAddingLog(cwd: string, head: string): HolderLogRecord[] {
  const args = ['log', '-z', '--no-renames', '--diff-filter=A', '--name-only'];
  return parseHolderLog(
    gitIn(cwd, [...args, `--format=${HOLDER_LOG_FORMAT}`, head, '--', ...PATHS]).toString(),
  );
}

const gitRenewalLog = (cwd: string, head: string) =>
  parseHolderLog(gitIn(cwd, renewalLogArgs([head])).toString());

/** The `%ct %s` records of a hold log, as parseHoldHistory reads them. */
const holds = (out: string | undefined) =>
  out
    ?.split('\0')
    .map((record) => record.replace(/^\n+|\n+$/g, ''))
    .filter(Boolean);

const gitHoldLog = (cwd: string, head: string, max = 64) =>
  holds(
    gitIn(
      cwd,
      holdHistoryArgs(head, 'pool').map((arg) => arg.replace(/=64$/, `=${max}`)),
    ).toString(),
  );

/** The history: locks claimed, renewed, released and claimed again, one removed. */
mkdirSync(join(work, 'pool', 'claimed'), { recursive: true });
mkdirSync(join(work, 'pool', 'unclaimed'), { recursive: true });
commit('initial pool', () => {
  writeFileSync(join(work, 'pool', 'claimed', '.gitkeep'), '');
  for (const name of ['lock-a', 'lock-b', 'lock-c', 'lock-gone'])
    writeFileSync(join(work, 'pool', 'unclaimed', name), `${name}\n`);
});
const first = claim('lock-a');
renew('lock-a', first, 2);
claim('lock-b');
commit('removing: lock-gone', () => git(['rm', '--quiet', 'pool/unclaimed/lock-gone']));
commit('beside the pool', () => writeFileSync(join(work, 'README'), 'not a lock\n'));
release('lock-a');
const second = claim('lock-a');
renew('lock-a', second, 3);
commit('updating: lock-c', () => writeFileSync(join(work, 'pool', 'unclaimed', 'lock-c'), 'c2\n'));
renew('lock-a', second, 4);
release('lock-b');
const history = git(['rev-list', 'HEAD']).toString().trim().split('\n');

describe('the logs of a window the run fetched', () => {
  it('read as git reads the whole history, from every commit', () => {
    const fetched = kept(work);
    for (const head of history) {
      const adding = addingLog(fetched, head, PATHS, new Set());
      expect(adding).toBeDefined();
      expect(firstAdding(adding!, new Set())).toEqual(
        firstAdding(gitAddingLog(work, head), new Set()),
      );
      expect(brief(renewalLog(fetched, head, new Set())!)).toEqual(
        brief(gitRenewalLog(work, head)),
      );
      for (const max of [64, 3])
        expect(holds(holdLog(fetched, head, 'pool', new Set(), max))).toEqual(
          gitHoldLog(work, head, max),
        );
    }
    // Something was compared: lock-a's second claim, and its renewals newest first.
    const tip = history[0]!;
    expect(
      firstAdding(addingLog(fetched, tip, PATHS, new Set())!, new Set()).get('pool/claimed/lock-a')
        ?.subject,
    ).toBe('claiming: lock-a');
    expect(
      renewalLog(fetched, tip, new Set())!.filter(({ body }) => body.startsWith('renewing:')),
    ).toHaveLength(3);
    // The hold log leaves out the renewals (no change to the pool) and the commit beside it.
    const subjects = holds(holdLog(fetched, tip, 'pool', new Set(), 64))!.map((record) =>
      record.replace(/^\d+ /, ''),
    );
    expect(subjects).toContain('removing: lock-gone');
    expect(subjects).not.toContain('beside the pool');
    expect(subjects.filter((subject) => subject.startsWith('renewing:'))).toEqual([]);
  });

  it('reads the renewals down to a commit as git reads them from the tip, not past that commit', () => {
    const fetched = kept(work);
    const tip = history[0]!;
    for (const last of history) {
      const ours = renewalLog(fetched, tip, new Set(), last);
      const theirs = parseHolderLog(git(renewalLogArgs([tip, '--not', `${last}^@`])).toString());
      expect(brief(ours!)).toEqual(brief(theirs));
    }
    // Something was compared: from lock-a's second claim, that claim and its two renewals.
    const claimed = history[4]!;
    expect(renewalLog(fetched, tip, new Set(), claimed)).toHaveLength(3);
    // A commit the walk never meets is left to git.
    expect(renewalLog(fetched, history[6]!, new Set(), claimed)).toBeUndefined();
  });

  it('read as git reads a shallow copy, which stops at its shallow commit', () => {
    for (const depth of [1, 3, 5, 8]) {
      const copy = join(dir, `shallow-${depth}`);
      gitIn(dir, ['clone', '--quiet', '--depth', String(depth), `file://${work}`, copy]);
      const shallow = shallowOf(copy);
      expect(shallow.size).toBe(1);
      const fetched = kept(copy);
      const head = history[0]!;
      const adding = addingLog(fetched, head, PATHS, shallow);
      expect(firstAdding(adding!, shallow)).toEqual(firstAdding(gitAddingLog(copy, head), shallow));
      expect(brief(renewalLog(fetched, head, shallow)!)).toEqual(brief(gitRenewalLog(copy, head)));
      expect(holds(holdLog(fetched, head, 'pool', shallow, 64))).toEqual(gitHoldLog(copy, head));
    }
  });

  it('undefined where a commit of the window is not kept or has two parents', () => {
    const tip = history[0]!;
    expect(addingLog(new FetchedObjects(), tip, PATHS, new Set())).toBeUndefined();
    expect(renewalLog(new FetchedObjects(), tip, new Set())).toBeUndefined();
    // The newest six commits kept, down to lock-a's release: the adding log finds lock-a's
    // claim above it, the renewal log needs every commit.
    const newest = new Set(history.slice(0, 6));
    const partial = new FetchedObjects();
    partial.learn(
      unpack(
        gitIn(work, ['pack-objects', '--revs', '--stdout', '-q'], Buffer.from(`${tip}\n`)),
      ).filter((object) => object.type !== 'commit' || newest.has(object.id)),
    );
    expect(addingLog(partial, tip, ['pool/claimed/lock-a'], new Set())?.[0]?.body).toMatch(
      /^claiming: lock-a/,
    );
    expect(addingLog(partial, tip, ['pool/claimed/lock-c'], new Set())).toBeUndefined();
    expect(renewalLog(partial, tip, new Set())).toBeUndefined();

    git(['checkout', '--quiet', '-b', 'side', history[1]!]);
    const side = commit('a side commit');
    git(['checkout', '--quiet', 'master']);
    git(['merge', '--quiet', '--no-ff', '-m', 'merging', side]);
    const merge = git(['rev-parse', 'HEAD']).toString().trim();
    expect(addingLog(kept(work), merge, PATHS, new Set())).toBeUndefined();
    expect(renewalLog(kept(work), merge, new Set())).toBeUndefined();
  });

  it('undefined for renewals where a message of the window is one git might read otherwise, holds read on', () => {
    git(['checkout', '--quiet', '-b', 'odd', history[0]!]);
    commit('renewing: lock-a\n\n---\nClaim-Token: x\n');
    const tip = commit(commitMessage('unclaiming: lock-a', build), () =>
      git(['mv', 'pool/claimed/lock-a', 'pool/unclaimed/lock-a']),
    );
    const fetched = kept(work);
    expect(renewalLog(fetched, tip, new Set())).toBeUndefined();
    // The adding log reads the release above it, and needs no other message.
    const [released] = addingLog(fetched, tip, ['pool/unclaimed/lock-a'], new Set())!;
    expect(released?.commit).toBe(tip);
    // The hold log reads only the commits that change the pool: the odd renewal changes none.
    expect(holds(holdLog(fetched, tip, 'pool', new Set(), 64))).toEqual(gitHoldLog(work, tip));
    git(['checkout', '--quiet', 'master']);
  });

  it('undefined for holds where a subject runs over two lines, which git joins', () => {
    git(['checkout', '--quiet', '-b', 'two-lines', history[0]!]);
    const tip = commit('updating: lock-c\nwith a second line\n', () =>
      writeFileSync(join(work, 'pool', 'unclaimed', 'lock-c'), 'c3\n'),
    );
    expect(holdLog(kept(work), tip, 'pool', new Set(), 64)).toBeUndefined();
    expect(gitHoldLog(work, tip)!.at(-1)).toMatch(/ updating: lock-c with a second line$/);
    git(['checkout', '--quiet', 'master']);
  });
});
