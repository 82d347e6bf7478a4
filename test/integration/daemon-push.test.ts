// A push to a git:// lock repository reads receive-pack's advertisement before git starts
// (src/git/daemon-push.ts): a branch that moved since the put's sync is a lost race told without
// git, and the connection it came on carries the put's next push. Against a real git daemon on
// 127.0.0.1; the other builds' pushes go to the bare repository itself, past the daemon.
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { daemonSession } from '../../src/git/daemon-session.js';
import { createGitEnvironment } from '../../src/git/environment.js';
import { Git } from '../../src/git/git.js';
import { parseCheckRequest } from '../../src/protocol/request.js';
import { LockRepository } from '../../src/repo/lock-repository.js';
import { startGitDaemon, type GitDaemon } from '../helpers/git-daemon.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { source } from '../helpers/source.js';
import { otherClone } from '../helpers/steps.js';

let repo: LockRepo;
let daemon: GitDaemon;

beforeEach(async () => {
  repo = await createLockRepo({ pool: { unclaimed: ['lock-a', 'lock-b'] } });
  daemon = await startGitDaemon(repo.root);
});

afterEach(async () => {
  await daemon?.stop();
  await repo?.cleanup();
});

/** The pushes' connections git daemon served. */
const receivePacks = () => (daemon.log().match(/Request receive-pack /g) ?? []).length;

/**
 * The pushes' connections git daemon served since `before` was counted, once `expected` of them
 * are in its log or 2 s have passed, and then 200 ms more. git daemon's child writes its log line
 * as it starts, which may reach the log after the put has been answered: read at once, a
 * connection could go uncounted.
 */
async function receivePacksSince(before: number, expected: number): Promise<number> {
  const until = Date.now() + 2_000;
  while (receivePacks() - before < expected && Date.now() < until) await sleep(20);
  await sleep(200);
  return receivePacks() - before;
}

/** Runs `body` with a put's copy of the pool, its git and its kept session as `out` sets them up. */
async function withCopy(body: (copy: LockRepository) => Promise<void>): Promise<void> {
  const uri = daemon.url(repo.bare);
  const { source: settings } = (
    await parseCheckRequest(JSON.stringify({ source: source(repo, { uri }) }))
  ).request;
  const environment = await createGitEnvironment(settings, { PATH: process.env.PATH ?? '' });
  const run = new AbortController();
  const session = daemonSession(settings, run.signal);
  try {
    const copy = new LockRepository(new Git(environment, run.signal, 30_000), {
      uri,
      branch: settings.branch,
      pool: settings.pool,
      workdir: join(environment.home, 'repository'),
      session,
    });
    await body(copy);
  } finally {
    run.abort();
    await environment.dispose();
  }
}

/** Syncs `copy` to the branch tip and commits a claim of `name` on it, as an attempt does. */
async function claimAtTip(copy: LockRepository, name: string): Promise<void> {
  await copy.sync();
  await copy.pool();
  await copy.apply({ kind: 'move', name, from: 'unclaimed', to: 'claimed' });
  await copy.commit([`claiming: ${name}`]);
}

/**
 * A claim of lock-a committed, then another build's claim of lock-b landing before its push: the
 * push loses its race. Returns how many pushes' connections git daemon had served before it.
 */
async function loseRace(copy: LockRepository): Promise<number> {
  await claimAtTip(copy, 'lock-a');
  await otherClone(repo).claim('lock-b');
  const before = receivePacks();
  expect(await copy.push()).toBe('rejected');
  return before;
}

describe('a push to git daemon whose branch moved since the sync', () => {
  it('loses its race without git, and the next push goes over the same connection', async () => {
    await withCopy(async (copy) => {
      const before = await loseRace(copy);
      expect(await receivePacksSince(before, 1)).toBe(1);

      await claimAtTip(copy, 'lock-a');
      expect(await copy.push()).toBe('pushed');
      expect(await receivePacksSince(before, 1)).toBe(1);
    });
    expect(await repo.state('pool')).toEqual({ claimed: ['lock-a', 'lock-b'], unclaimed: [] });
    expect((await repo.subjects()).slice(0, 2)).toEqual(['claiming: lock-a', 'claiming: lock-b']);
  });

  it('is refused by the server when the branch moved again while the connection waited', async () => {
    await withCopy(async (copy) => {
      const before = await loseRace(copy);

      await claimAtTip(copy, 'lock-a');
      // Another build's push lands after the kept connection's advertisement.
      await otherClone(repo).release('lock-b');
      expect(await copy.push()).toBe('rejected');
      expect(await receivePacksSince(before, 1)).toBe(1);

      await claimAtTip(copy, 'lock-a');
      expect(await copy.push()).toBe('pushed');
      expect(await receivePacksSince(before, 2)).toBe(2);
    });
    expect(await repo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: ['lock-b'] });
    expect((await repo.subjects()).slice(0, 3)).toEqual([
      'claiming: lock-a',
      'unclaiming: lock-b',
      'claiming: lock-b',
    ]);
  });

  it('carries the put’s join of the waiting line that follows its lost race', async () => {
    await withCopy(async (copy) => {
      const before = await loseRace(copy);

      await copy.sync();
      const entry = { since: Date.now(), retryDelayMs: 1_000, token: 'a1b2c3' };
      expect(await copy.join(entry)).toBe(true);
      expect(await receivePacksSince(before, 1)).toBe(1);
      // Moving an entry that exists takes a connection of its own.
      expect(await copy.join(entry)).toBe(true);
      expect(await receivePacksSince(before, 2)).toBe(2);
    });
    const line = await git(repo.bare, 'for-each-ref', '--format=%(refname)', 'refs/pool-resource');
    expect(line.trim().split('\n')).toEqual([
      expect.stringMatching(/^refs\/pool-resource\/waiting\/master\/pool\/\d+-1000-a1b2c3$/),
    ]);
  });

  it('carries the next push made on a tip that landed after the kept advertisement', async () => {
    await withCopy(async (copy) => {
      const before = await loseRace(copy);

      // Another build's push lands after the kept connection's advertisement, and the put makes
      // its commit again on that.
      await otherClone(repo).release('lock-b');
      await claimAtTip(copy, 'lock-a');
      expect(await copy.push()).toBe('pushed');
      expect(await receivePacksSince(before, 1)).toBe(1);
    });
    expect(await repo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: ['lock-b'] });
    expect((await repo.subjects()).slice(0, 3)).toEqual([
      'claiming: lock-a',
      'unclaiming: lock-b',
      'claiming: lock-b',
    ]);
  });

  it('is refused by the server when a push made on a tip seen after the advertisement is stale too', async () => {
    await withCopy(async (copy) => {
      const before = await loseRace(copy);

      await otherClone(repo).release('lock-b');
      await claimAtTip(copy, 'lock-a');
      // And another after the put's sync: its commit's parent is no longer the tip.
      await otherClone(repo).claim('lock-b');
      expect(await copy.push()).toBe('rejected');
      expect(await receivePacksSince(before, 1)).toBe(1);

      await claimAtTip(copy, 'lock-a');
      expect(await copy.push()).toBe('pushed');
      expect(await receivePacksSince(before, 2)).toBe(2);
    });
    expect(await repo.state('pool')).toEqual({ claimed: ['lock-a', 'lock-b'], unclaimed: [] });
    expect((await repo.subjects()).slice(0, 4)).toEqual([
      'claiming: lock-a',
      'claiming: lock-b',
      'unclaiming: lock-b',
      'claiming: lock-b',
    ]);
  });
});
