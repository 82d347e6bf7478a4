// Every `out` operation run as Concourse runs it, against a real bare repository, on `master`
// and on a branch that is not the repository's default (where `master` holds a decoy pool).
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLockRepo, type LockRepo } from '../helpers/lock-repo.js';
import { runCommand } from '../helpers/run-command.js';
import {
  buildFolder,
  commitInfo,
  lockFile,
  guardDefaultBranch,
  lockResponse,
  OUT_BRANCHES,
  succeeded,
} from '../helpers/steps.js';
import { source, source as lockSource } from '../helpers/source.js';

const BUILD_ENV = {
  ATC_EXTERNAL_URL: 'https://ci.example.com',
  BUILD_TEAM_NAME: 'main',
  BUILD_PIPELINE_NAME: 'deploy',
  BUILD_JOB_NAME: 'smoke-test',
  BUILD_NAME: '7',
  BUILD_ID: '991',
};
const BUILD_URL = 'https://ci.example.com/teams/main/pipelines/deploy/jobs/smoke-test/builds/7';
const DEFAULT_COMMITTER = 'CI Pool Resource <ci-pool@localhost>';
/** Metadata that is not text: NUL, invalid UTF-8, CRLF and no final newline. */
const BINARY = Buffer.from([0x00, 0xff, 0xfe, 0x0d, 0x0a, 0x41, 0x00, 0x80]);

describe.each(OUT_BRANCHES)('out $where', ({ branch, decoy }) => {
  let repo: LockRepo;
  /** Nothing ever lands on the repository's default branch. */
  let defaultBranchUnmoved: () => Promise<void>;

  beforeEach(async () => {
    repo = await createLockRepo(
      {
        pool: {
          claimed: { 'lock-c': '{"held":"c"}\n' },
          unclaimed: { 'lock-a': '{"env":"a"}\n', 'lock-b': '{"env":"b"}\n' },
        },
        'other-pool': { unclaimed: ['lock-a'] },
      },
      { branch },
    );
    defaultBranchUnmoved = await guardDefaultBranch(repo, decoy);
  });

  afterEach(async () => {
    await defaultBranchUnmoved();
    await repo.cleanup();
  });

  const out = async (params: Record<string, unknown>, src?: string, extra = {}) =>
    runCommand('out', {
      stdin: { source: source(repo, extra), params },
      args: [src ?? (await buildFolder())],
      env: BUILD_ENV,
    });

  it('acquire: claims an unclaimed lock in one commit', async () => {
    const result = await out({ acquire: true });
    const response = succeeded(result) as ReturnType<typeof lockResponse>;
    const name = response.metadata[0]!.value;
    expect(['lock-a', 'lock-b']).toContain(name);
    expect(response).toEqual(lockResponse(await repo.tip(), name));
    const state = await repo.state('pool');
    expect(state.claimed).toEqual(['lock-c', name].sort());
    expect(state.unclaimed).toEqual(['lock-a', 'lock-b'].filter((n) => n !== name));

    const commit = await commitInfo(repo, response.version.ref);
    expect(commit.subject).toBe(`claiming: ${name}`);
    expect(commit.body.startsWith(`claiming: ${name}\n\nBuild URL: ${BUILD_URL}\n`)).toBe(true);
    expect(commit.committer).toBe(DEFAULT_COMMITTER);
    expect(commit.author).toBe(DEFAULT_COMMITTER);
    expect(commit.files.sort()).toEqual([`pool/claimed/${name}`, `pool/unclaimed/${name}`]);
    expect(await lockFile(repo, `pool/claimed/${name}`)).toEqual(
      Buffer.from(`{"env":"${name.slice(-1)}"}\n`),
    );
    expect(result.stderr).toContain('acquiring lock on: pool');
    expect(result.stderr).toContain('acquired!');
  });

  it('claim: claims the named lock', async () => {
    const result = await out({ claim: 'lock-b' });
    expect(succeeded(result)).toEqual(lockResponse(await repo.tip(), 'lock-b'));
    expect(await repo.state('pool')).toEqual({
      claimed: ['lock-b', 'lock-c'],
      unclaimed: ['lock-a'],
    });
    const commit = await commitInfo(repo, await repo.tip());
    expect(commit.subject).toBe('claiming: lock-b');
    expect(commit.body).toContain(`\n\nBuild URL: ${BUILD_URL}\n`);
    expect(result.stderr).toContain('claimed!');
  });

  it('release: moves the step’s lock back to unclaimed', async () => {
    const before = await repo.subjects();
    const src = await buildFolder({ held: { name: 'lock-c\n', metadata: 'ignored' } });
    const result = await out({ release: 'held' }, src);
    expect(succeeded(result)).toEqual(lockResponse(await repo.tip(), 'lock-c'));
    expect(await repo.state('pool')).toEqual({
      claimed: [],
      unclaimed: ['lock-a', 'lock-b', 'lock-c'],
    });
    expect(await repo.subjects()).toEqual(['unclaiming: lock-c', ...before]);
    const commit = await commitInfo(repo, await repo.tip());
    expect(commit.body).toBe(`unclaiming: lock-c\n\nBuild URL: ${BUILD_URL}\n`);
    expect(commit.committer).toBe(DEFAULT_COMMITTER);
    // The lock keeps its metadata when it moves.
    expect(await lockFile(repo, 'pool/unclaimed/lock-c')).toEqual(Buffer.from('{"held":"c"}\n'));
  });

  it('add: creates an unclaimed lock with the step’s metadata, byte for byte', async () => {
    const src = await buildFolder({ new: { name: 'lock-new', metadata: BINARY } });
    const result = await out({ add: 'new' }, src);
    expect(succeeded(result)).toEqual(lockResponse(await repo.tip(), 'lock-new'));
    expect(await lockFile(repo, 'pool/unclaimed/lock-new')).toEqual(BINARY);
    const commit = await commitInfo(repo, await repo.tip());
    expect(commit.subject).toBe('adding unclaimed: lock-new');
    expect(commit.body).toBe(`adding unclaimed: lock-new\n\nBuild URL: ${BUILD_URL}\n`);
    expect(commit.files).toEqual(['pool/unclaimed/lock-new']);
  });

  it('add_claimed: creates a claimed lock', async () => {
    const src = await buildFolder({ new: { name: 'lock-new\n', metadata: '{"x":1}\n' } });
    const result = await out({ add_claimed: 'new' }, src);
    expect(succeeded(result)).toEqual(lockResponse(await repo.tip(), 'lock-new'));
    expect(await lockFile(repo, 'pool/claimed/lock-new')).toEqual(Buffer.from('{"x":1}\n'));
    const commit = await commitInfo(repo, await repo.tip());
    expect(commit.subject).toBe('adding claimed: lock-new');
    expect(commit.body.startsWith(`adding claimed: lock-new\n\nBuild URL: ${BUILD_URL}\n`)).toBe(
      true,
    );
  });

  it('remove: deletes a claimed lock', async () => {
    const src = await buildFolder({ held: { name: 'lock-c' } });
    const result = await out({ remove: 'held' }, src);
    expect(succeeded(result)).toEqual(lockResponse(await repo.tip(), 'lock-c'));
    expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a', 'lock-b'] });
    const commit = await commitInfo(repo, await repo.tip());
    expect(commit.body).toBe(`removing: lock-c\n\nBuild URL: ${BUILD_URL}\n`);
    expect(commit.files).toEqual(['pool/claimed/lock-c']);
  });

  it('update: replaces an unclaimed lock’s metadata', async () => {
    const src = await buildFolder({ meta: { name: 'lock-a', metadata: '{"env":"a2"}\n' } });
    const result = await out({ update: 'meta' }, src);
    expect(succeeded(result)).toEqual(lockResponse(await repo.tip(), 'lock-a'));
    expect(await lockFile(repo, 'pool/unclaimed/lock-a')).toEqual(Buffer.from('{"env":"a2"}\n'));
    const commit = await commitInfo(repo, await repo.tip());
    expect(commit.body).toBe(`updating: lock-a\n\nBuild URL: ${BUILD_URL}\n`);
    expect(commit.files).toEqual(['pool/unclaimed/lock-a']);
  });

  it('update: adds the lock unclaimed when it does not exist', async () => {
    const src = await buildFolder({ meta: { name: 'lock-z', metadata: BINARY } });
    const result = await out({ update: 'meta' }, src);
    expect(succeeded(result)).toEqual(lockResponse(await repo.tip(), 'lock-z'));
    expect(await lockFile(repo, 'pool/unclaimed/lock-z')).toEqual(BINARY);
    expect((await commitInfo(repo, await repo.tip())).subject).toBe('adding unclaimed: lock-z');
  });

  it('update: with the metadata the lock already has, commits nothing', async () => {
    const lockCommit = await repo.tip();
    await repo.commit('unrelated', (work) => writeFile(join(work, 'README.md'), 'changed\n'));
    const tip = await repo.tip();
    const src = await buildFolder({ meta: { name: 'lock-a', metadata: '{"env":"a"}\n' } });
    const result = await out({ update: 'meta' }, src);
    // The answer is the commit that gave the lock this metadata: `in` of it finds the lock.
    expect(succeeded(result)).toEqual(lockResponse(lockCommit, 'lock-a'));
    expect(await repo.tip()).toBe(tip);
  });

  it('check: answers at once with the observed tip when the lock is unclaimed', async () => {
    const tip = await repo.tip();
    const src = await buildFolder({ want: { name: 'lock-a' } });
    const result = await out({ check: 'want' }, src);
    expect(succeeded(result)).toEqual(lockResponse(tip, 'lock-a'));
    expect(await repo.tip()).toBe(tip);
    expect(result.stderr).not.toContain('waiting');
  });

  it('check_unclaimed: answers at once with the observed tip when the lock is claimed', async () => {
    const tip = await repo.tip();
    const src = await buildFolder({ want: { name: 'lock-c' } });
    const result = await out({ check_unclaimed: 'want' }, src);
    expect(succeeded(result)).toEqual(lockResponse(tip, 'lock-c'));
    expect(await repo.tip()).toBe(tip);
  });

  it('commits as the identity git_config sets', async () => {
    const result = await out({ claim: 'lock-a' }, undefined, {
      git_config: [
        { name: 'user.name', value: 'Deploy Bot' },
        { name: 'user.email', value: 'deploy-bot@example.com' },
      ],
    });
    succeeded(result);
    const commit = await commitInfo(repo, await repo.tip());
    expect(commit.committer).toBe('Deploy Bot <deploy-bot@example.com>');
    expect(commit.author).toBe('Deploy Bot <deploy-bot@example.com>');
  });

  it('writes the Build URL that Concourse gives in BUILD_URL', async () => {
    const src = await buildFolder({ held: { name: 'lock-c' } });
    const result = await runCommand('out', {
      stdin: { source: source(repo), params: { release: 'held' } },
      args: [src],
      env: { ...BUILD_ENV, BUILD_URL: 'https://ci.example.com/builds/991' },
    });
    succeeded(result);
    expect((await commitInfo(repo, await repo.tip())).body).toBe(
      'unclaiming: lock-c\n\nBuild URL: https://ci.example.com/builds/991\n',
    );
  });
});

describe('out and the implicit get after it', () => {
  let repo: LockRepo;
  beforeEach(async () => {
    repo = await createLockRepo({ pool: { unclaimed: { 'lock a ü': 'ü\n', 'lock-b': 'b\n' } } });
  });
  afterEach(async () => repo.cleanup());

  it('works through a file:// URI with a lock name holding spaces and non-ASCII', async () => {
    const source = lockSource(`file://${repo.bare}`);
    const claimed = await runCommand('out', {
      stdin: { source, params: { claim: 'lock a ü' } },
      args: [await buildFolder()],
    });
    const response = succeeded(claimed) as ReturnType<typeof lockResponse>;
    expect(response).toEqual(lockResponse(await repo.tip(), 'lock a ü'));
    expect((await commitInfo(repo, response.version.ref)).subject).toBe('claiming: lock a ü');

    // Concourse fetches the version a put returned.
    const dest = join(await buildFolder(), 'lock');
    succeeded(
      await runCommand('in', { stdin: { source, version: response.version }, args: [dest] }),
    );
    expect(await readFile(join(dest, 'name'), 'utf8')).toBe('lock a ü\n');
    expect(await readFile(join(dest, 'metadata'), 'utf8')).toBe('ü\n');

    const released = await runCommand('out', {
      stdin: { source, params: { release: 'lock' } },
      args: [dest.slice(0, -'/lock'.length)],
    });
    succeeded(released);
    expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: ['lock a ü', 'lock-b'] });
  });
});
