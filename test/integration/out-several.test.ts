// Several locks in one put (SPEC §11): `count: N` and `claim: [a, b]` take all or none in one
// push of one commit per lock, `in` of the set's version writes every lock, and a release of
// that folder frees them all in one push. Over git daemon, with a hook counting the pushes.
import { chmod, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startGitDaemon, type GitDaemon } from '../helpers/git-daemon.js';
import { createLockRepo, git, type LockRepo, type PoolSeed } from '../helpers/lock-repo.js';
import { runCommand } from '../helpers/run-command.js';
import { startScript, type RunningScript } from '../helpers/run-script.js';
import { source } from '../helpers/source.js';
import { buildFolder, commitInfo, escape, scratchDir, succeeded } from '../helpers/steps.js';

let repo: LockRepo | undefined;
let daemon: GitDaemon | undefined;
const running: RunningScript[] = [];
afterEach(async () => {
  for (const run of running.splice(0)) run.child.kill('SIGKILL');
  await daemon?.stop();
  daemon = undefined;
  await repo?.cleanup();
  repo = undefined;
});

/** A lock repository served by git daemon, whose pushes a post-receive hook counts. */
async function served(claimed: PoolSeed['claimed'], unclaimed: PoolSeed['unclaimed']) {
  const lockRepo = await createLockRepo({ pool: { claimed, unclaimed } });
  repo = lockRepo;
  daemon = await startGitDaemon(lockRepo.root);
  const log = join(lockRepo.root, 'pushes');
  await writeFile(log, '');
  const hook = join(lockRepo.bare, 'hooks', 'post-receive');
  await writeFile(hook, `#!/bin/sh\ncat >> '${log}'\n`);
  await chmod(hook, 0o755);
  const uri = daemon.url(lockRepo.bare);
  return {
    repo: lockRepo,
    source: (extra: Record<string, unknown> = {}) => source(uri, { ...extra }),
    /** Each push's ref updates (one line per ref), in order. */
    pushes: async () =>
      (await readFile(log, 'utf8'))
        .split('\n')
        .filter((line) => line.endsWith(' refs/heads/master')),
  };
}

async function putOk(request: unknown, src?: string) {
  const result = await runCommand('out', { stdin: request, args: [src ?? (await scratchDir())] });
  expect(result.stderr).not.toMatch(/error/i);
  return { ...result, response: succeeded(result) as Response };
}

interface Response {
  version: { ref: string };
  metadata: { name: string; value: string }[];
}

function metadata(response: Response): Record<string, string> {
  return Object.fromEntries(response.metadata.map(({ name, value }) => [name, value]));
}

/** The commits of the branch after `from`, oldest first, with what each changed. */
async function commitsAfter(lockRepo: LockRepo, from: string) {
  const ids = (await git(lockRepo.bare, 'rev-list', '--reverse', `${from}..master`))
    .split('\n')
    .filter(Boolean);
  return Promise.all(ids.map(async (id) => ({ id, ...(await commitInfo(lockRepo, id)) })));
}

function trailer(body: string, key: string): string | undefined {
  return new RegExp(`^${key}: (.*)$`, 'm').exec(body)?.[1];
}

describe('acquire with count', () => {
  it('waits holding nothing while too few are free, then takes both in one push', async () => {
    const pool = await served(['lock-a', 'lock-b'], ['lock-c']);
    const before = await pool.repo.tip();
    const put = startScript(
      'out',
      {
        source: pool.source(),
        params: { acquire: true, count: 2 },
      },
      { args: [await scratchDir()] },
    );
    running.push(put);
    await put.waitForStderr(escape('2 locks wanted, 1 unclaimed'));
    // Waiting, it holds nothing: lock-c stays unclaimed.
    expect(await pool.repo.state('pool')).toEqual({
      claimed: ['lock-a', 'lock-b'],
      unclaimed: ['lock-c'],
    });
    await pool.repo.commit('unclaiming: lock-a', (work) =>
      git(work, 'mv', 'pool/claimed/lock-a', 'pool/unclaimed/lock-a').then(() => undefined),
    );
    const released = await pool.repo.tip();
    const done = await put.done;
    expect(done.code).toBe(0);
    const response = JSON.parse(done.stdout) as Response;

    const commits = await commitsAfter(pool.repo, released);
    expect(commits.map(({ subject }) => subject).sort()).toEqual([
      'claiming: lock-a',
      'claiming: lock-c',
    ]);
    // Each commit moves one lock, so the reference's `in` (first file of the commit) reads one
    // lock of the set from each.
    for (const { files, subject } of commits) {
      const name = subject.slice('claiming: '.length);
      expect(files).toEqual([`pool/claimed/${name}`, `pool/unclaimed/${name}`]);
    }
    const names = commits.map(({ subject }) => subject.slice('claiming: '.length));
    for (const { body } of commits) {
      expect(trailer(body, 'Claim-Set')).toBe(names.join(', '));
      expect(trailer(body, 'Claim-Token')).toBe(trailer(commits[0]!.body, 'Claim-Token'));
    }
    expect(response.version.ref).toBe(commits.at(-1)!.id);
    expect(metadata(response)).toEqual({
      lock_name: names[0],
      pool_name: 'pool',
      lock_names: names.join(','),
      lock_count: '2',
    });
    // The release by hand, then the claim of both: one push each.
    expect((await pool.pushes()).length).toBe(2);
    expect(await pool.repo.state('pool')).toEqual({
      claimed: ['lock-a', 'lock-b', 'lock-c'],
      unclaimed: [],
    });
    expect((await commitsAfter(pool.repo, before)).length).toBe(3);
  });

  it('fails at once when the pool holds fewer locks than asked for, committing nothing', async () => {
    const pool = await served(['lock-a'], ['lock-b', 'lock-c']);
    const tip = await pool.repo.tip();
    const result = await runCommand('out', {
      stdin: { source: pool.source(), params: { acquire: true, count: 4 } },
      args: [await scratchDir()],
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      'cannot acquire 4 locks: pool "pool" holds 3 (claimed and unclaimed)',
    );
    expect(await pool.repo.tip()).toBe(tip);
    // A claim list longer than the pool, the same.
    const listed = await runCommand('out', {
      stdin: { source: pool.source(), params: { claim: ['lock-a', 'lock-b', 'lock-c', 'lock-d'] } },
      args: [await scratchDir()],
    });
    expect(listed.code).toBe(1);
    expect(listed.stderr).toContain(
      'cannot claim 4 locks: pool "pool" holds 3 (claimed and unclaimed)',
    );
    expect(await pool.repo.tip()).toBe(tip);
  });

  it('two puts for 2 locks of a pool of 3 never deadlock and never hold more than the pool has', async () => {
    const pool = await served([], ['lock-a', 'lock-b', 'lock-c']);
    const request = { source: pool.source(), params: { acquire: true, count: 2 } };
    const first = startScript('out', request, { args: [await scratchDir()] });
    const second = startScript('out', request, { args: [await scratchDir()] });
    running.push(first, second);
    // One of them gets two locks; the other waits for two, holding none.
    const winner = await Promise.race([
      first.done.then(() => first),
      second.done.then(() => second),
    ]);
    const loser = winner === first ? second : first;
    const won = JSON.parse((await winner.done).stdout) as Response;
    await loser.waitForStderr(escape('2 locks wanted, 1 unclaimed'));
    expect((await pool.repo.state('pool')).claimed).toHaveLength(2);

    // The winner's get, then its release of the whole set.
    const build = await scratchDir();
    const fetched = await runCommand('in', {
      stdin: { source: pool.source(), version: won.version },
      args: [join(build, 'set')],
    });
    expect(fetched.code).toBe(0);
    const released = await putOk({ source: pool.source(), params: { release: 'set' } }, build);
    expect(released.stderr).toContain('released! locks:');

    const lost = await loser.done;
    expect(lost.code).toBe(0);
    const names = metadata(JSON.parse(lost.stdout) as Response).lock_names!.split(',');
    expect(names).toHaveLength(2);
    expect((await pool.repo.state('pool')).claimed).toEqual([...names].sort());
  });
});

describe('claim of a list', () => {
  it('takes both or neither', async () => {
    const pool = await served(['lock-b'], ['lock-a', 'lock-c']);
    const put = startScript(
      'out',
      {
        source: pool.source(),
        params: { claim: ['lock-a', 'lock-b'] },
      },
      { args: [await scratchDir()] },
    );
    running.push(put);
    await put.waitForStderr(
      escape(
        'the set "lock-a", "lock-b" in pool "pool" is not all unclaimed: "lock-b" claimed (1 claimed, 2 unclaimed)',
      ),
    );
    expect((await pool.repo.state('pool')).claimed).toEqual(['lock-b']);
    await pool.repo.commit('unclaiming: lock-b', (work) =>
      git(work, 'mv', 'pool/claimed/lock-b', 'pool/unclaimed/lock-b').then(() => undefined),
    );
    const done = await put.done;
    expect(done.code).toBe(0);
    expect(done.stderr).toContain('claimed! locks: lock-a, lock-b');
    expect(await pool.repo.state('pool')).toEqual({
      claimed: ['lock-a', 'lock-b'],
      unclaimed: ['lock-c'],
    });
    expect((await pool.repo.subjects()).slice(0, 2)).toEqual([
      'claiming: lock-b',
      'claiming: lock-a',
    ]);
  });
});

describe('in and release of a set', () => {
  /** A pool of three whose lock-a and lock-c one put claimed together; its response. */
  async function claimedSet() {
    const pool = await served([], {
      'lock-a': 'region: eu\n',
      'lock-b': 'region: us\n',
      'lock-c': 'region: ap\n',
    });
    const { response } = await putOk({
      source: pool.source(),
      params: { claim: ['lock-a', 'lock-c'] },
    });
    return { pool, response };
  }

  it('in writes name and metadata of the first lock, names, locks/* and claim_token', async () => {
    const { pool, response } = await claimedSet();
    const build = await scratchDir();
    const dest = join(build, 'set');
    const fetched = await runCommand('in', {
      stdin: { source: pool.source(), version: response.version },
      args: [dest],
    });
    expect(fetched.code).toBe(0);
    expect(metadata(JSON.parse(fetched.stdout) as Response)).toEqual({
      lock_name: 'lock-a',
      pool_name: 'pool',
      lock_names: 'lock-a,lock-c',
      lock_count: '2',
    });
    expect(await readFile(join(dest, 'name'), 'utf8')).toBe('lock-a\n');
    expect(await readFile(join(dest, 'metadata'), 'utf8')).toBe('region: eu\n');
    expect(await readFile(join(dest, 'names'), 'utf8')).toBe('lock-a\nlock-c\n');
    expect((await readdir(join(dest, 'locks'))).sort()).toEqual(['lock-a', 'lock-c']);
    expect(await readFile(join(dest, 'locks', 'lock-c'), 'utf8')).toBe('region: ap\n');
    const mode = async (file: string) => ((await stat(join(dest, file))).mode & 0o777).toString(8);
    expect(await mode('locks/lock-c')).toBe(await mode('names'));
    const token = trailer((await commitInfo(pool.repo, response.version.ref)).body, 'Claim-Token');
    expect((await readFile(join(dest, 'claim_token'), 'utf8')).trim()).toBe(token);

    // The release of that folder frees both, in one push of one commit each.
    const pushes = (await pool.pushes()).length;
    await putOk({ source: pool.source(), params: { release: 'set' } }, build);
    expect((await pool.pushes()).length).toBe(pushes + 1);
    expect((await pool.repo.subjects()).slice(0, 2)).toEqual([
      'unclaiming: lock-c',
      'unclaiming: lock-a',
    ]);
    expect((await pool.repo.state('pool')).claimed).toEqual([]);
  });

  it('in fails as for one lock when any lock of the set changed after the version', async () => {
    const { pool, response } = await claimedSet();
    await pool.repo.commit('unclaiming: lock-a', (work) =>
      git(work, 'mv', 'pool/claimed/lock-a', 'pool/unclaimed/lock-a').then(() => undefined),
    );
    const fetched = await runCommand('in', {
      stdin: { source: pool.source(), version: response.version },
      args: [await scratchDir()],
    });
    expect(fetched.code).toBe(1);
    expect(fetched.stderr).toContain('error: lock instance is no longer acquired');
  });

  it('a release of the set refuses, committing nothing, when one of it is not claimed', async () => {
    const { pool } = await claimedSet();
    await pool.repo.commit('unclaiming: lock-c', (work) =>
      git(work, 'mv', 'pool/claimed/lock-c', 'pool/unclaimed/lock-c').then(() => undefined),
    );
    const tip = await pool.repo.tip();
    const build = await buildFolder({ set: { name: 'lock-a\n' } });
    await writeFile(join(build, 'set', 'names'), 'lock-a\nlock-c\n');
    const result = await runCommand('out', {
      stdin: { source: pool.source(), params: { release: 'set' } },
      args: [build],
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      'cannot release lock "lock-c": it is not claimed in pool "pool" (it is unclaimed)',
    );
    expect(await pool.repo.tip()).toBe(tip);
  });
});
