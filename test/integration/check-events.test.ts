// `check` with `check_events` and `check_locks` (SPEC §13): only the commits of the listed kinds,
// about the listed locks, with §4's rules otherwise.
import { readdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendCommits, claimCommit, releaseCommit } from '../helpers/long-history.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { runCommand } from '../helpers/run-command.js';
import { source } from '../helpers/source.js';
import { otherClone, refused, scratchDir, succeeded } from '../helpers/steps.js';

let repo: LockRepo;
/** The branch's commits by what they did, oldest first. */
const commits: Record<string, string> = {};

/** Moves a claimed lock back to unclaimed/ as a reclaim does: `unclaiming:` with its trailers. */
async function reclaim(at: LockRepo, name: string): Promise<string> {
  await git(at.work, 'fetch', '--quiet', 'origin');
  await git(at.work, 'reset', '--quiet', '--hard', `origin/${at.branch}`);
  await rename(join(at.work, 'pool', 'claimed', name), join(at.work, 'pool', 'unclaimed', name));
  await git(at.work, 'add', '-A');
  await git(
    at.work,
    'commit',
    '--quiet',
    '-m',
    `unclaiming: ${name}`,
    '-m',
    [
      'Reclaimed-Token: 0b7a3c52-59f1-4c27-9d2e-6b1f0f3d1a11',
      'Reclaim-Reason: lease expired at 2026-01-01T00:10:00Z',
      'Reclaimed-By: https://ci.example.com/teams/main/pipelines/reap/jobs/reap/builds/7',
    ].join('\n'),
  );
  await git(at.work, 'push', '--quiet', 'origin', `HEAD:refs/heads/${at.branch}`);
  return (await git(at.work, 'rev-parse', 'HEAD')).trim();
}

beforeAll(async () => {
  repo = await createLockRepo({
    pool: { unclaimed: ['lock-a', 'lock-b'] },
    'other-pool': { unclaimed: ['lock-o'] },
  });
  commits.root = (await git(repo.bare, 'rev-list', '--max-parents=0', repo.branch)).trim();
  const pool = otherClone(repo);
  const other = otherClone(repo, 'other-pool');
  commits.claimA = await pool.claim('lock-a');
  commits.otherClaim = await other.claim('lock-o');
  commits.addC = await pool.add('lock-c');
  commits.addClaimedD = await repo.commit('adding claimed: lock-d', (work) =>
    writeFile(join(work, 'pool', 'claimed', 'lock-d'), 'd\n'),
  );
  commits.updateC = await pool.update('lock-c', 'c, second version\n');
  commits.releaseA = await pool.release('lock-a');
  commits.claimB = await pool.claim('lock-b');
  // Touches no file (SPEC §10).
  commits.renewB = await repo.commit('renewing: lock-b', async () => undefined);
  commits.reclaimB = await reclaim(repo, 'lock-b');
  commits.removeD = await pool.remove('lock-d');
  commits.otherRelease = await other.release('lock-o');
  commits.readme = await repo.commit('docs', (work) =>
    writeFile(join(work, 'README.md'), 'more\n'),
  );
});
afterAll(async () => repo.cleanup());

/** A check of `at` with `extra` source fields, in its own TMPDIR unless `tmp` is given. */
async function check(
  extra: Record<string, unknown>,
  version?: string,
  options: { at?: LockRepo; tmp?: string } = {},
) {
  return runCommand('check', {
    stdin: {
      source: source(options.at ?? repo, extra),
      ...(version === undefined ? {} : { version: { ref: commits[version] ?? version } }),
    },
    env: { TMPDIR: options.tmp ?? (await scratchDir('pool-check-tmp-')) },
  });
}

const refs = (...names: string[]) => names.map((name) => ({ ref: commits[name] ?? name }));

/** Each kind of commit in the history above, oldest first. */
const BY_EVENT = {
  claimed: ['claimA', 'claimB'],
  released: ['releaseA'],
  reclaimed: ['reclaimB'],
  // The root commit created lock-a and lock-b.
  added: ['root', 'addC', 'addClaimedD'],
  removed: ['removeD'],
  updated: ['updateC'],
};

describe('check_events', () => {
  it.each(Object.entries(BY_EVENT))(
    'from the root commit, reports only the %s commits',
    async (event, expected) => {
      expect(succeeded(await check({ check_events: [event] }, 'root'))).toEqual(refs(...expected));
    },
  );

  it.each(Object.entries(BY_EVENT))(
    'without a version, reports only the latest %s commit',
    async (event, expected) => {
      expect(succeeded(await check({ check_events: [event] }))).toEqual(refs(expected.at(-1)!));
    },
  );

  it('reports the commits of every kind listed, oldest first', async () => {
    expect(
      succeeded(await check({ check_events: ['removed', 'claimed', 'updated'] }, 'claimA')),
    ).toEqual(refs('claimA', 'updateC', 'claimB', 'removeD'));
  });

  it('does not report a starting version of another kind, but the matching commits after it', async () => {
    expect(succeeded(await check({ check_events: ['released'] }, 'claimA'))).toEqual(
      refs('releaseA'),
    );
    expect(succeeded(await check({ check_events: ['claimed'] }, 'releaseA'))).toEqual(
      refs('claimB'),
    );
    expect(succeeded(await check({ check_events: ['released'] }, 'releaseA'))).toEqual(
      refs('releaseA'),
    );
    // No release after it (a reclaim is not one): nothing new.
    expect(succeeded(await check({ check_events: ['released'] }, 'claimB'))).toEqual([]);
  });

  it('tells a reclaim from a release by its Reclaimed-Token trailer', async () => {
    expect(succeeded(await check({ check_events: ['released', 'reclaimed'] }, 'claimA'))).toEqual(
      refs('releaseA', 'reclaimB'),
    );
    expect(succeeded(await check({ check_events: ['reclaimed'] }, 'claimA'))).toEqual(
      refs('reclaimB'),
    );
    expect(succeeded(await check({ check_events: ['released'] }))).toEqual(refs('releaseA'));
  });

  it('never reports a renewal, which touches no file', async () => {
    expect(
      succeeded(await check({ check_events: ['claimed', 'released', 'updated'] }, 'renewB')),
    ).toEqual([]);
    expect(succeeded(await check({ check_locks: ['*'] }, 'claimB'))).toEqual(
      refs('claimB', 'reclaimB', 'removeD'),
    );
  });

  it('returns the latest matching commit when the version is not on the branch', async () => {
    expect(succeeded(await check({ check_events: ['claimed'] }, 'deadbeef'.repeat(5)))).toEqual(
      refs('claimB'),
    );
  });

  it('returns an empty list when no commit is of a listed kind', async () => {
    const quiet = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    try {
      await otherClone(quiet).claim('lock-a');
      expect(
        succeeded(await check({ check_events: ['released'] }, undefined, { at: quiet })),
      ).toEqual([]);
    } finally {
      await quiet.cleanup();
    }
  });
});

describe('check_locks', () => {
  it('reports only the commits about locks matching its globs', async () => {
    expect(succeeded(await check({ check_locks: ['lock-a'] }, 'root'))).toEqual(
      refs('root', 'claimA', 'releaseA'),
    );
    expect(succeeded(await check({ check_locks: ['*-c', 'lock-?'] }, 'claimB'))).toEqual(
      refs('claimB', 'reclaimB', 'removeD'),
    );
    expect(succeeded(await check({ check_locks: ['*-c', 'lock-d'] }, 'root'))).toEqual(
      refs('addC', 'addClaimedD', 'updateC', 'removeD'),
    );
    expect(succeeded(await check({ check_locks: ['lock-a'] }))).toEqual(refs('releaseA'));
    expect(succeeded(await check({ check_locks: ['lock-o', 'nothing-*'] }))).toEqual([]);
  });

  it('together with check_events, reports the commits where both hold', async () => {
    const both = { check_events: ['claimed'], check_locks: ['lock-b'] };
    expect(succeeded(await check(both, 'root'))).toEqual(refs('claimB'));
    expect(succeeded(await check(both))).toEqual(refs('claimB'));
    const addedA = { check_events: ['added'], check_locks: ['lock-a'] };
    expect(succeeded(await check(addedA, 'root'))).toEqual(refs('root'));
    expect(succeeded(await check(addedA, 'claimA'))).toEqual([]);
    expect(succeeded(await check({ check_events: ['removed'], check_locks: ['lock-a'] }))).toEqual(
      [],
    );
  });

  it('takes a commit of several locks when one of its changes matches', async () => {
    const several = await createLockRepo({ pool: { unclaimed: ['lock-x'] } });
    try {
      const commit = await several.commit('claiming: lock-x', async (work) => {
        await rename(
          join(work, 'pool', 'unclaimed', 'lock-x'),
          join(work, 'pool', 'claimed', 'lock-x'),
        );
        await writeFile(join(work, 'pool', 'unclaimed', 'lock-y'), 'y\n');
      });
      const at = { at: several };
      expect(succeeded(await check({ check_events: ['claimed'] }, undefined, at))).toEqual([
        { ref: commit },
      ]);
      expect(succeeded(await check({ check_locks: ['lock-y'] }, undefined, at))).toEqual([
        { ref: commit },
      ]);
      // lock-y was added, not claimed.
      const root = (await git(several.bare, 'rev-list', '--max-parents=0', several.branch)).trim();
      expect(
        succeeded(await check({ check_events: ['claimed'], check_locks: ['lock-y'] }, root, at)),
      ).toEqual([]);
    } finally {
      await several.cleanup();
    }
  });
});

describe('a filtered check kept between runs', () => {
  it('searches a long history for its first match once, then reads only what is new', async () => {
    const long = await createLockRepo({ pool: { unclaimed: ['a', 'b'] } });
    try {
      const tmp = await scratchDir('pool-check-tmp-');
      // Lock b claimed and released in turn, `count` times, starting with a claim or not.
      const busy = (count: number, claim: boolean) =>
        Array.from({ length: count }, (_, i) =>
          (i % 2 === 0) === claim ? claimCommit('pool', 'b') : releaseCommit('pool', 'b'),
        );
      const [, releaseA] = await appendCommits(long.bare, long.branch, [
        claimCommit('pool', 'a'),
        releaseCommit('pool', 'a'),
        ...busy(1500, true),
      ]);
      const filter = { check_events: ['released'], check_locks: ['a'] };
      const options = { at: long, tmp };
      /** How many commits the check's copy of the branch holds. */
      const held = async () => {
        const [folder] = await readdir(join(tmp, 'pool-resource-check'));
        const copy = join(tmp, 'pool-resource-check', folder!.replace(/\.lock$/, ''));
        return Number(await git(copy, 'rev-list', '--count', `refs/remotes/origin/${long.branch}`));
      };

      expect(succeeded(await check(filter, undefined, options))).toEqual([{ ref: releaseA }]);
      // Concourse asks from the version it was given next: answered from the last check's tip.
      expect(succeeded(await check(filter, releaseA, options))).toEqual([{ ref: releaseA }]);
      expect(await held()).toBeLessThan(100);

      const [, , releaseAgain] = await appendCommits(long.bare, long.branch, [
        claimCommit('pool', 'a'),
        ...busy(1, true),
        releaseCommit('pool', 'a'),
        ...busy(40, false),
      ]);
      expect(succeeded(await check(filter, releaseA, options))).toEqual([
        { ref: releaseA },
        { ref: releaseAgain },
      ]);
      expect(succeeded(await check(filter, undefined, options))).toEqual([{ ref: releaseAgain }]);
      expect(succeeded(await check(filter, releaseAgain, options))).toEqual([
        { ref: releaseAgain },
      ]);
      expect(await held()).toBeLessThan(200);
      // The same pool without the filter, through the same copy, answers as ever.
      expect(succeeded(await check({}, releaseAgain, options))).toHaveLength(41);
      expect(succeeded(await check(filter, releaseA, options))).toEqual([
        { ref: releaseA },
        { ref: releaseAgain },
      ]);
    } finally {
      await long.cleanup();
    }
  });
  it('answers right after the branch was force-pushed past what it kept', async () => {
    const rewritten = await createLockRepo({ pool: { unclaimed: ['a', 'b'] } });
    try {
      const tmp = await scratchDir('pool-check-tmp-');
      const options = { at: rewritten, tmp };
      const filter = { check_events: ['released'] };
      const initial = await rewritten.tip();
      const [, releaseA] = await appendCommits(rewritten.bare, rewritten.branch, [
        claimCommit('pool', 'a'),
        releaseCommit('pool', 'a'),
      ]);
      expect(succeeded(await check(filter, undefined, options))).toEqual([{ ref: releaseA }]);

      await git(rewritten.bare, 'update-ref', `refs/heads/${rewritten.branch}`, initial);
      const [, releaseB] = await appendCommits(rewritten.bare, rewritten.branch, [
        claimCommit('pool', 'b'),
        releaseCommit('pool', 'b'),
        claimCommit('pool', 'a'),
      ]);
      expect(succeeded(await check(filter, releaseA, options))).toEqual([{ ref: releaseB }]);
      expect(succeeded(await check(filter, undefined, options))).toEqual([{ ref: releaseB }]);
      expect(succeeded(await check(filter, releaseB, options))).toEqual([{ ref: releaseB }]);

      await git(rewritten.bare, 'update-ref', `refs/heads/${rewritten.branch}`, initial);
      await appendCommits(rewritten.bare, rewritten.branch, [claimCommit('pool', 'b')]);
      expect(succeeded(await check(filter, releaseB, options))).toEqual([]);
      expect(succeeded(await check(filter, undefined, options))).toEqual([]);
    } finally {
      await rewritten.cleanup();
    }
  });
});

describe('the source fields', () => {
  it('refuses an unknown event with one line naming the field and the events', async () => {
    refused(
      await check({ check_events: ['released', 'relased'] }),
      'invalid payload (check_events: unknown event "relased" (did you mean "released"?); the events are claimed, released, reclaimed, added, removed, updated)',
    );
    const result = await check({ check_events: ['claimd', 'gone'] });
    refused(
      result,
      'invalid payload (check_events: unknown events "claimd" (did you mean "claimed"?), "gone"; the events are claimed, released, reclaimed, added, removed, updated)',
    );
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
  });

  it.each([
    [
      { check_events: 'released' },
      'invalid payload (check_events must be a list of events: claimed, released, reclaimed, added, removed, updated)',
    ],
    [
      { check_events: [] },
      'invalid payload (check_events must name at least one event: claimed, released, reclaimed, added, removed, updated)',
    ],
    [
      { check_locks: 'lock-*' },
      'invalid payload (check_locks must be a list of lock names or globs such as "env-*")',
    ],
    [
      { check_locks: [''] },
      'invalid payload (check_locks must be a list of lock names or globs such as "env-*")',
    ],
    [
      { check_locks: [] },
      'invalid payload (check_locks must name at least one lock or glob such as "env-*")',
    ],
  ])('refuses %j', async (extra, line) => {
    const result = await check(extra);
    refused(result, line);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('are taken, and ignored, by in and out', async () => {
    const own = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    try {
      const filtered = source(own, { check_events: ['released'], check_locks: ['lock-*'] });
      const put = await runCommand('out', {
        stdin: { source: filtered, params: { acquire: true } },
        args: [await scratchDir()],
      });
      const { version } = succeeded(put) as { version: { ref: string } };
      expect(version.ref).toBe(await own.tip());
      const get = await runCommand('in', {
        stdin: { source: filtered, version },
        args: [await scratchDir()],
      });
      succeeded(get);
      for (const { stderr } of [put, get]) expect(stderr).not.toContain('unknown source field');
    } finally {
      await own.cleanup();
    }
  });
});
