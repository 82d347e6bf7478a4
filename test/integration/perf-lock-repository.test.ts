import { execFile } from 'node:child_process';
import { rename } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { createGitEnvironment, type GitEnvironment } from '../../src/git/environment.js';
import { Git } from '../../src/git/git.js';
import { LockRepository } from '../../src/repo/lock-repository.js';
import { holderLookup } from '../../src/repo/holder-lookup.js';
import { FetchById } from '../../src/repo/branch-copy.js';
import { parseCheckRequest } from '../../src/protocol/request.js';
import { appendCommits, otherPoolCommits } from '../helpers/long-history.js';
import { createLockRepo, type LockRepo } from '../helpers/lock-repo.js';

const exec = promisify(execFile);

let repo: LockRepo;
let environment: GitEnvironment | undefined;
afterEach(async () => {
  await environment?.dispose();
  await repo?.cleanup();
});

async function openGit() {
  const { source } = (
    await parseCheckRequest(
      JSON.stringify({ source: { uri: repo.bare, branch: repo.branch, pool: 'pool' } }),
    )
  ).request;
  environment = await createGitEnvironment(source, { PATH: process.env.PATH });
  return { git: new Git(environment, new AbortController().signal, 60_000), source, environment };
}

async function openRepository(
  options: { line?: boolean; fetchById?: FetchById } = {},
): Promise<LockRepository> {
  const { git, source, environment } = await openGit();
  return new LockRepository(git, {
    uri: source.uri,
    branch: source.branch,
    pool: source.pool,
    workdir: join(environment.home, 'repository'),
    ...options,
  });
}

describe('the lock repository after a push whose outcome was never seen', () => {
  it('tells whether the remote still carries the claim, however far back it is', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a', 'b'] }, other: { unclaimed: ['x'] } });
    const store = await openRepository();
    await store.sync();
    expect((await store.pool()).unclaimed).toEqual(new Set(['a', 'b']));
    await store.apply({ kind: 'move', name: 'a', from: 'unclaimed', to: 'claimed' });
    expect(await store.hasStagedChanges()).toBe(true);
    const commit = (await store.commit(['claiming: a\n']))[0]!;
    expect(await store.push()).toBe('pushed');
    expect(await repo.tip()).toBe(commit);

    // Others kept working: hundreds of commits, none touching `a`.
    await appendCommits(repo.bare, repo.branch, otherPoolCommits('other', 'x', 300));
    await store.sync();
    expect(await store.holds({ name: 'a', commit })).toBe(true);

    // Then `a` was released and many more commits followed.
    await appendCommits(repo.bare, repo.branch, [
      { message: 'unclaiming: a', changes: ['R pool/claimed/a pool/unclaimed/a'] },
      ...otherPoolCommits('other', 'x', 300),
    ]);
    await store.sync();
    expect(await store.holds({ name: 'a', commit })).toBe(false);
  });

  it('does not hold a claim whose push never landed', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a'] } });
    const store = await openRepository();
    await store.sync();
    await store.apply({ kind: 'move', name: 'a', from: 'unclaimed', to: 'claimed' });
    const commit = (await store.commit(['claiming: a\n']))[0]!;
    await store.sync();
    expect(await store.holds({ name: 'a', commit })).toBe(false);
  });

  it('tells a claim never landed without fetching history older than the tip it was made on', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a'] }, other: { unclaimed: ['x'] } });
    await appendCommits(repo.bare, repo.branch, otherPoolCommits('other', 'x', 1_000));
    const store = await openRepository();
    const parent = await store.sync();
    await store.apply({ kind: 'move', name: 'a', from: 'unclaimed', to: 'claimed' });
    const commit = (await store.commit(['claiming: a\n']))[0]!;
    // The push was lost and never landed; another build moved the branch on.
    await appendCommits(repo.bare, repo.branch, otherPoolCommits('other', 'x', 2));
    await store.sync();
    expect(await store.holds({ name: 'a', commit, parent })).toBe(false);
    const workdir = join(environment!.home, 'repository');
    const local = await exec('git', ['-C', workdir, 'rev-list', '--count', 'HEAD']);
    expect(Number(local.stdout)).toBeLessThan(100);
  });

  it('loses a race against a push it did not see, then wins from the new tip', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a', 'b'] } });
    const store = await openRepository();
    await store.sync();
    await store.pool();
    await store.apply({ kind: 'move', name: 'a', from: 'unclaimed', to: 'claimed' });
    await store.commit(['claiming: a\n']);
    await appendCommits(repo.bare, repo.branch, [
      { message: 'claiming: b', changes: ['R pool/unclaimed/b pool/claimed/b'] },
    ]);
    expect(await store.push()).toBe('rejected');
    await store.sync();
    expect(await store.pool()).toEqual({
      claimed: new Set(['b']),
      unclaimed: new Set(['a']),
      irregular: new Map(),
    });
    await store.apply({ kind: 'move', name: 'a', from: 'unclaimed', to: 'claimed' });
    await store.commit(['claiming: a\n']);
    expect(await store.push()).toBe('pushed');
    expect(await repo.state('pool')).toEqual({ claimed: ['a', 'b'], unclaimed: [] });
  });
});

describe('the lock repository syncing to a tip a look saw', () => {
  const claimB = { message: 'claiming: b', changes: ['R pool/unclaimed/b pool/claimed/b'] };

  it('fetches that commit, and takes the line the look saw with it', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a', 'b'] } });
    const store = await openRepository({ line: true, fetchById: new FetchById(true) });
    await store.sync();
    await appendCommits(repo.bare, repo.branch, [claimB]);
    const seen = await store.look();
    expect(seen.tip).toBe(await repo.tip());
    const line = [{ since: 1, retryDelayMs: 1_000, token: 'abc', at: seen.tip! }];
    expect(await store.syncTo({ tip: seen.tip!, line })).toBe(seen.tip);
    expect(store.syncedLine()).toEqual(line);
    expect((await store.pool()).claimed).toEqual(new Set(['b']));
  });

  it('fetches the branch instead where the server refuses the commit, and from then on', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a', 'b'] } });
    const store = await openRepository({ line: true, fetchById: new FetchById(true) });
    const first = await store.sync();
    await appendCommits(repo.bare, repo.branch, [claimB]);
    const tip = await repo.tip();
    // A commit the server does not have: it refuses it, and the branch is fetched.
    expect(await store.syncTo({ tip: 'f'.repeat(40), line: [] })).toBe(tip);
    expect((await store.pool()).claimed).toEqual(new Set(['b']));
    // From then on the branch is fetched: not the older commit asked for, which the server has.
    expect(await store.syncTo({ tip: first, line: [] })).toBe(tip);
  });
});

/** A waiting put's holder lookup for `repo`, in a run's private home. */
async function holderLookupOf(fetchById: FetchById) {
  const { git, source, environment } = await openGit();
  return holderLookup(
    git,
    source,
    environment.home,
    new AbortController().signal,
    undefined,
    fetchById,
  );
}

describe('the holders a waiting put looks up, at the tip it fetched', () => {
  const claimB = { message: 'claiming: b', changes: ['R pool/unclaimed/b pool/claimed/b'] };

  it('reads them at that tip, fetched by its id', async () => {
    repo = await createLockRepo({ pool: { claimed: ['a'], unclaimed: ['b'] } });
    const tip = await repo.tip();
    await appendCommits(repo.bare, repo.branch, [claimB]);
    const lookup = await holderLookupOf(new FetchById(true));
    // At the tip the put fetched, b was not claimed yet.
    expect((await lookup.claimed(['a', 'b'], tip)).map(({ name }) => name)).toEqual(['a']);
  });

  it('fetches nothing while its copy is at that tip', async () => {
    repo = await createLockRepo({ pool: { claimed: ['a'], unclaimed: ['b'] } });
    const tip = await repo.tip();
    // Even where nothing is fetched by id (git://).
    const lookup = await holderLookupOf(new FetchById(false));
    expect((await lookup.claimed(['a'], tip)).map(({ name }) => name)).toEqual(['a']);
    // With the server gone, the copy at that tip still answers.
    await rename(repo.bare, `${repo.bare}.away`);
    try {
      const [record] = await lookup.claimed(['a'], tip);
      expect(record?.name).toBe('a');
      expect(record?.commit).toBeDefined();
    } finally {
      await rename(`${repo.bare}.away`, repo.bare);
    }
  });

  it('fetches the branch where the server refuses a tip asked for by id, and from then on', async () => {
    repo = await createLockRepo({
      pool: { claimed: ['a'], unclaimed: ['b'] },
      other: { unclaimed: ['x'] },
    });
    const lookup = await holderLookupOf(new FetchById(true));
    const refused = await lookup.claimed(['a', 'b'], 'f'.repeat(40));
    expect(refused.map(({ name }) => name)).toEqual(['a']);
    await appendCommits(repo.bare, repo.branch, otherPoolCommits('other', 'x', 1));
    const between = await repo.tip();
    await appendCommits(repo.bare, repo.branch, [claimB]);
    // Asked about the tip before b's claim, it fetches the branch instead, where b is claimed.
    const names = (await lookup.claimed(['a', 'b'], between)).map(({ name }) => name);
    expect(names).toEqual(['a', 'b']);
  });

  it("fetches nothing by id once the run was refused one, by the put's own fetch", async () => {
    repo = await createLockRepo({
      pool: { claimed: ['a'], unclaimed: ['b'] },
      other: { unclaimed: ['x'] },
    });
    const fetchById = new FetchById(true);
    const { git, source, environment: env } = await openGit();
    const store = new LockRepository(git, {
      uri: source.uri,
      branch: source.branch,
      pool: source.pool,
      workdir: join(env.home, 'repository'),
      line: true,
      fetchById,
    });
    const signal = new AbortController().signal;
    const lookup = holderLookup(git, source, env.home, signal, undefined, fetchById);
    await store.sync();
    await appendCommits(repo.bare, repo.branch, otherPoolCommits('other', 'x', 1));
    const between = await repo.tip();
    await appendCommits(repo.bare, repo.branch, [claimB]);
    await store.syncTo({ tip: 'f'.repeat(40), line: [] });
    // The run's lookup shares the refusal: asked about the tip before b's claim, it fetches the
    // branch, where b is claimed.
    const names = (await lookup.claimed(['a', 'b'], between)).map(({ name }) => name);
    expect(names).toEqual(['a', 'b']);
  });
});
