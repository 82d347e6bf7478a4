// Acquiring by metadata and name (`match`, `match_name`) end to end, as Concourse runs `out`, over
// a real git daemon: only matching locks are taken, a put waits while every matching lock is held
// and fails at once when none exists, and a put with a filter never holds up the waiting line.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startGitDaemon, type GitDaemon } from '../helpers/git-daemon.js';
import { createLockRepo, git, type LockRepo, type PoolSeed } from '../helpers/lock-repo.js';
import { runScript, startScript } from '../helpers/run-script.js';
import { buildFolder, lockResponse, otherClone, refused, succeeded } from '../helpers/steps.js';
import { source } from '../helpers/source.js';
import { stop } from '../helpers/stopping.js';

let repo: LockRepo | undefined;
let daemon: GitDaemon | undefined;

afterEach(async () => {
  await daemon?.stop();
  await repo?.cleanup();
  daemon = undefined;
  repo = undefined;
});

/** A lock repository with pool `pool` served by a git daemon. */
async function served(seed: PoolSeed): Promise<LockRepo> {
  repo = await createLockRepo({ pool: seed });
  daemon = await startGitDaemon(repo.root);
  return repo;
}

function request(params: Record<string, unknown>, sourceExtra: Record<string, unknown> = {}) {
  return {
    source: source(daemon!.url(repo!.bare), sourceExtra),
    params: { acquire: true, ...params },
  };
}

async function acquire(params: Record<string, unknown>, sourceExtra = {}, build = '1') {
  return runScript('out', request(params, sourceExtra), {
    args: [await buildFolder()],
    env: { BUILD_URL: `https://ci.example.com/builds/${build}` },
  });
}

function start(params: Record<string, unknown>, build: string) {
  return buildFolder().then((src) =>
    startScript('out', request(params), {
      args: [src],
      env: { BUILD_URL: `https://ci.example.com/builds/${build}` },
    }),
  );
}

async function refs(): Promise<string> {
  return git(repo!.bare, 'for-each-ref', '--format=%(refname) %(objectname)');
}

const ENVS = {
  'eu-large': 'region: eu\nsize: large\n',
  'eu-small': 'region: eu\nsize: small\n',
  'eu-xlarge': '{"region": "eu", "size": "xlarge", "tags": ["gpu", "ssd"]}\n',
  'us-large': '{"region": "us", "size": "large"}\n',
  'us-xlarge': 'region: us\nsize: xlarge\n',
  broken: 'region: eu\n  size: [large\n',
};

/** Adds an unclaimed lock whose bytes are not UTF-8 (so not YAML). */
async function addBinaryLock(): Promise<void> {
  await repo!.commit('adding unclaimed: binary', (work) =>
    writeFile(join(work, 'pool', 'unclaimed', 'binary'), Buffer.from([0xff, 0xfe, 0x0a, 0x72])),
  );
}

describe('out acquire with match', () => {
  it('takes only matching locks, answering with lock_name and pool_name alone', async () => {
    await served({ unclaimed: ENVS });
    const match = { region: 'eu', size: ['large', 'xlarge'] };
    const taken: string[] = [];
    for (const build of ['1', '2']) {
      const result = await acquire({ match }, {}, build);
      const response = succeeded(result) as { metadata: { value: string }[] };
      const name = response.metadata[0]!.value;
      expect(response).toEqual(lockResponse(await repo!.tip(), name));
      expect(result.stderr).toContain(
        'acquiring lock on: pool (one that matches match {region: eu, size: [large, xlarge]})',
      );
      taken.push(name);
    }
    expect(taken.sort()).toEqual(['eu-large', 'eu-xlarge']);
    expect((await repo!.state('pool')).claimed).toEqual(['eu-large', 'eu-xlarge']);
  });

  it('waits while every matching lock is claimed, naming them and their holders, then takes the one released', async () => {
    await served({ claimed: { 'eu-1': 'region: eu\n' }, unclaimed: { 'us-1': 'region: us\n' } });
    const run = await start({ match: { region: 'eu' } }, '7');
    await run.waitForStderr(/waiting for lock/);
    expect(run.stderrSoFar()).toMatch(
      /waiting for lock: every lock in pool "pool" that matches match \{region: eu\} is claimed \(1 matching lock\); "eu-1" held by /,
    );
    await otherClone(repo!).release('eu-1');
    const result = await run.done;
    expect(succeeded(result)).toEqual(lockResponse(await repo!.tip(), 'eu-1'));
    expect(await repo!.state('pool')).toEqual({ claimed: ['eu-1'], unclaimed: ['us-1'] });
  });

  it('stops within a second on SIGTERM while it waits, committing nothing', async () => {
    await served({ claimed: { 'eu-1': 'region: eu\n' }, unclaimed: { 'us-1': 'region: us\n' } });
    const before = await refs();
    const run = await start({ match: { region: 'eu' } }, '8');
    await run.waitForStderr(/waiting for lock/);
    const stopped = await stop(run, 'SIGTERM');
    expect(stopped.code).toBe(143);
    expect(stopped.stdout).toBe('');
    expect(stopped.eofAfterSignal).toBeLessThan(1000);
    expect(await refs()).toBe(before);
  });

  it('fails at once when no lock of the pool matches, claimed or not, with nothing committed', async () => {
    await served({ claimed: { 'eu-1': 'region: eu\n' }, unclaimed: ENVS });
    await addBinaryLock();
    const before = await refs();
    const started = Date.now();
    const result = await acquire({ match: { region: 'ap' } });
    refused(result, /./);
    expect(result.stderr.trim().split('\n').at(-1)).toBe(
      'error: no lock in pool "pool" matches match {region: ap} (looked at 8 locks; 2 of them are not a YAML or JSON map)',
    );
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(await refs()).toBe(before);
  });

  it('fails at once when fewer locks match than the count asks for, saying they are the matching ones', async () => {
    await served({ claimed: { 'eu-1': 'region: eu\n' }, unclaimed: ENVS });
    const before = await refs();
    const result = await acquire({ count: 5, match: { region: 'eu' } });
    refused(
      result,
      'error: cannot acquire 5 locks: pool "pool" holds 4 that pass match {region: eu} (claimed and unclaimed)',
    );
    expect(await refs()).toBe(before);
  });

  it('takes the source match as the default; a params match replaces it, match: {} turns it off', async () => {
    await served({ unclaimed: ENVS });
    const byDefault = { match: { size: 'small' } };
    const small = await acquire({}, byDefault);
    expect(succeeded(small)).toEqual(lockResponse(await repo!.tip(), 'eu-small'));
    const us = await acquire({ match: { region: 'us', size: 'xlarge' } }, byDefault, '2');
    expect(succeeded(us)).toEqual(lockResponse(await repo!.tip(), 'us-xlarge'));
    // The default alone would wait for eu-small, claimed above.
    const any = await acquire({ match: {}, wait_timeout: '20s' }, byDefault, '3');
    expect(succeeded(any)).toMatchObject({ version: { ref: await repo!.tip() } });
    expect(any.stderr).not.toContain('waiting for lock');
  });

  it('match_name alone, and with match reaching into nested maps and lists of the lock file', async () => {
    await served({
      unclaimed: {
        'db-1': 'net:\n  region: eu\ntags: [gpu]\n',
        'db-2': 'net:\n  region: us\ntags: [gpu]\n',
        'env-1': 'net:\n  region: eu\ntags: [gpu]\n',
        'env-2': '{"net": {"region": "eu"}, "tags": ["ssd"]}',
      },
    });
    const both = await acquire({ match_name: 'db-?', match: { 'net.region': 'eu', tags: 'gpu' } });
    expect(succeeded(both)).toEqual(lockResponse(await repo!.tip(), 'db-1'));
    const named = await acquire({ match_name: 'env-*', match: { tags: ['hdd', 'ssd'] } });
    expect(succeeded(named)).toEqual(lockResponse(await repo!.tip(), 'env-2'));
    const glob = await acquire({ match_name: 'db-*' });
    expect(succeeded(glob)).toEqual(lockResponse(await repo!.tip(), 'db-2'));
    const none = await acquire({ match_name: 'web-*' });
    refused(none, 'error: no lock in pool "pool" matches match_name "web-*" (looked at 4 locks)');
  });
});

describe('out acquire with match and the waiting line', () => {
  it.each([
    ['eu', 'us'],
    ['us', 'eu'],
  ])(
    'a put waiting for %s locks does not hold back a free %s lock from the put behind it',
    async (wanted, other) => {
      await served({
        claimed: { [`${wanted}-1`]: `region: ${wanted}\n`, [`${other}-1`]: `region: ${other}\n` },
      });
      const filtered = await start({ match: { region: wanted } }, 'filtered');
      await filtered.waitForStderr(/waiting for lock/, 20_000);
      const plain = await start({}, 'plain');
      await plain.waitForStderr(/waiting in line/, 20_000);
      // Nobody ahead: the put with a filter took no place in the line.
      expect(plain.stderrSoFar()).toContain('waiting in line for pool "pool": first');

      await otherClone(repo!).release(`${other}-1`);
      const taken = await plain.done;
      expect(succeeded(taken)).toEqual(lockResponse(await repo!.tip(), `${other}-1`));
      expect(filtered.stderrSoFar()).not.toContain('acquired!');

      await otherClone(repo!).release(`${wanted}-1`);
      const result = await filtered.done;
      expect(succeeded(result)).toEqual(lockResponse(await repo!.tip(), `${wanted}-1`));
      expect(await git(repo!.bare, 'for-each-ref', 'refs/pool-resource/')).toBe('');
    },
  );
});
