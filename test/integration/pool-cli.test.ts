// assets/pool, the command-line tool for people, against real repositories: status, init, claim,
// release, add, remove, the source as flags or a file, help, one-line errors and exit codes.
import { hostname } from 'node:os';
import { connect, createServer } from 'node:net';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { commitTrailers } from '../helpers/steps.js';
import { afterEach, describe, expect, it } from 'vitest';
import { startGitDaemon } from '../helpers/git-daemon.js';
import { freePort } from '../helpers/net.js';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createLockRepo, git, GIT_TEST_ENV, type LockRepo } from '../helpers/lock-repo.js';
import { runScript, startScript, tempDir, type RunOptions } from '../helpers/run-script.js';

const exec = promisify(execFile);
let repo: LockRepo;
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await repo?.cleanup();
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

function sourceFlags(pool = 'pool'): string[] {
  return ['--uri', repo.bare, '--branch', repo.branch, '--pool', pool, '--retry-delay', '100ms'];
}

function pool(args: string[], options: RunOptions = {}) {
  return runScript('pool', '', { ...options, args });
}

const trailers = (ref?: string) => commitTrailers(repo, ref);

/** A bare repository with no commits at all (as a hosting service creates it). */
async function emptyRepo(): Promise<{ bare: string; root: string }> {
  const root = await tempDir('pool-empty-');
  const bare = join(root, 'locks.git');
  await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', bare);
  cleanups.push(() => rm(root, { recursive: true, force: true }));
  return { bare, root };
}

describe('pool --help', () => {
  it('prints the usage on stdout and exits 0, for the tool and each command', async () => {
    const top = await pool(['--help']);
    expect(top.code).toBe(0);
    expect(top.stdout).toMatch(/^usage: pool COMMAND \[options\]/);
    for (const command of [
      'status',
      'init',
      'claim',
      'release',
      'add',
      'remove',
      'report',
      'update',
      'acquire',
    ]) {
      const result = await pool([command, '--help']);
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(new RegExp(`^usage: pool ${command}\\b`));
      expect(result.stdout).toContain('--uri URI');
      expect(result.stderr).toBe('');
      expect((await pool(['help', command])).stdout).toBe(result.stdout);
    }
  });
});

describe('pool: bad input is one line naming what is wrong, exit 1', () => {
  const cases: [string, string[], RegExp][] = [
    ['no command', [], /^error: missing command \(one of status, init, claim/],
    ['unknown command', ['steal', 'a'], /^error: unknown command "steal"/],
    ['unknown option', ['status', '--colour'], /^error: unknown option --colour/],
    [
      'option of another command',
      ['status', '--lock', 'a'],
      /^error: pool status does not take --lock/,
    ],
    ['option without its value', ['status', '--uri'], /^error: option --uri needs a value/],
    [
      'option followed by another option',
      ['report', '--html', '--uri', 'x'],
      /^error: option --html needs a value, and the next argument starts with "-" \(write --html=VALUE/,
    ],
    [
      'option-like value',
      ['status', '--uri', '-oProxyCommand=x'],
      /^error: option --uri needs a value, and the next argument starts with "-"/,
    ],
    ['claim without a name', ['claim'], /^error: pool claim needs a lock NAME/],
    ['two names', ['release', 'a', 'b'], /^error: pool release takes one lock NAME, got 2/],
    ['unsafe lock name', ['claim', 'a/x'], /^error: lock name "a\/x" contains a path separator/],
    [
      'dotfile lock name',
      ['init', '--lock', '.gitkeep'],
      /^error: lock name ".gitkeep" is a dotfile/,
    ],
    [
      'bad duration',
      ['claim', 'a', '--uri', 'x', '--branch', 'b', '--pool', 'p', '--wait-timeout', 'soon'],
      /^error: --wait-timeout: invalid duration "soon"/,
    ],
    [
      'unreadable key file',
      ['status', '--private-key-file', '/nonexistent/key'],
      /^error: cannot read --private-key-file "\/nonexistent\/key" \(ENOENT\)/,
    ],
    [
      'bad git config flag',
      ['status', '--git-config', 'novalue'],
      /^error: --git-config needs NAME=VALUE, got "novalue"/,
    ],
  ];
  for (const [title, args, line] of cases) {
    it(title, async () => {
      const result = await pool(args);
      expect(result.code).toBe(1);
      expect(result.stdout).toBe('');
      expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
      expect(result.stderr).toMatch(line);
      expect(result.stderr).not.toMatch(/\bat .*\.js:\d+/);
    });
  }

  it('names the missing source flags, one line each', async () => {
    const result = await pool(['status']);
    expect(result.code).toBe(1);
    expect(result.stderr.trimEnd().split('\n')).toEqual([
      'error: missing --uri (or "uri" in the --source file)',
      'error: missing --branch (or "branch" in the --source file)',
      'error: missing --pool (or "pool" in the --source file)',
    ]);
  });

  it('never shows a password from --password-file', async () => {
    const dir = await tempDir();
    await writeFile(join(dir, 'password'), 's3cret-passw0rd\n');
    const result = await pool([
      'status',
      '--uri',
      'http://user:s3cret-passw0rd@127.0.0.1:9/locks.git',
      '--branch',
      'main',
      '--pool',
      'p',
      '--password-file',
      join(dir, 'password'),
      '--git-timeout',
      '5s',
    ]);
    expect(result.code).toBe(1);
    expect(result.stderr).not.toContain('s3cret-passw0rd');
  });
});

describe('pool init', () => {
  it('creates the branch, the folders with .gitkeep and unclaimed locks in an empty repository', async () => {
    const { bare } = await emptyRepo();
    const flags = ['--uri', bare, '--branch', 'locks', '--pool', 'envs'];
    const result = await pool(['init', ...flags, '--lock', 'staging', '--lock', 'prod']);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(
      /initialized! pool: envs \(created branch "locks"; added unclaimed staging, prod\)/,
    );
    const files = await git(bare, 'ls-tree', '-r', '--name-only', 'locks');
    expect(files.split('\n').filter(Boolean).sort()).toEqual([
      'envs/claimed/.gitkeep',
      'envs/unclaimed/.gitkeep',
      'envs/unclaimed/prod',
      'envs/unclaimed/staging',
    ]);
    const message = await git(bare, 'log', '-1', '--format=%B', 'locks');
    expect(message).toMatch(
      /^initializing pool: envs\n\nBuild URL: none \(pool command by .+@.+\)\n/,
    );

    // Running it again with nothing new is harmless.
    const again = await pool(['init', ...flags]);
    expect(again.code).toBe(0);
    expect(again.stderr).toContain('already exists on branch "locks": nothing to do');
    expect((await git(bare, 'rev-list', '--count', 'locks')).trim()).toBe('1');
  });

  it('adds a pool next to what the branch already holds, and the new pool works with out', async () => {
    repo = await createLockRepo({ other: { unclaimed: ['x'] } });
    const result = await pool(['init', ...sourceFlags('fresh'), '--lock', 'a']);
    expect(result.code).toBe(0);
    expect(await repo.state('fresh')).toEqual({ claimed: [], unclaimed: ['a'] });
    expect(await repo.state('other')).toEqual({ claimed: [], unclaimed: ['x'] });
    expect(await git(repo.bare, 'show', `${repo.branch}:README.md`)).toBe('locks\n');

    const acquired = await runScript(
      'out',
      { source: { uri: repo.bare, branch: repo.branch, pool: 'fresh' }, params: { acquire: true } },
      { args: [await tempDir()] },
    );
    expect(acquired.code).toBe(0);
    expect(await repo.state('fresh')).toEqual({ claimed: ['a'], unclaimed: [] });
  });

  it('tries again when the server is not reachable yet, as every other operation does', async () => {
    const { bare, root } = await emptyRepo();
    const daemon = await startGitDaemon(root);
    cleanups.push(() => daemon.stop());
    // Nothing listens on this port until init has failed once; then it leads to the daemon.
    const port = await freePort();
    const url = daemon.url(bare).replace(`:${daemon.port}/`, `:${port}/`);
    const running = startScript('pool', '', {
      args: ['init', '--uri', url, '--branch', 'locks', '--pool', 'envs', '--lock', 'a'],
    });
    await running.waitForStderr(/git failed \(attempt 1\), trying again in 500ms: .*refused/);
    const forward = createServer((client) => {
      const upstream = connect(daemon.port, '127.0.0.1');
      client.pipe(upstream).pipe(client);
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
    });
    await new Promise<void>((resolve) => forward.listen(port, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => forward.close(resolve)));
    const result = await running.done;
    expect(result.stderr).toMatch(
      /initialized! pool: envs \(created branch "locks"; added unclaimed a\)/,
    );
    expect(result.code).toBe(0);
    const files = await git(bare, 'ls-tree', '-r', '--name-only', 'locks');
    expect(files).toContain('envs/unclaimed/a');
  });

  it('refuses a lock that already exists, committing nothing', async () => {
    repo = await createLockRepo({ pool: { claimed: ['a'] } });
    const before = await repo.tip();
    const result = await pool(['init', ...sourceFlags(), '--lock', 'b', '--lock', 'a']);
    expect(result.code).toBe(1);
    expect(result.stderr.trimEnd()).toMatch(
      /^initializing pool: pool\nerror: lock "a" already exists in pool "pool" \(claimed\)$/,
    );
    expect(await repo.tip()).toBe(before);
  });
});

describe('pool status', () => {
  it('lists every lock with state, holder, since when and for how long; --json for scripts', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a', 'b', 'c'] } });
    const claimed = await runScript(
      'out',
      { source: { uri: repo.bare, branch: repo.branch, pool: 'pool' }, params: { claim: 'b' } },
      { args: [await tempDir()], env: { BUILD_URL: 'https://ci.example.com/builds/9' } },
    );
    expect(claimed.code).toBe(0);
    const claimedAt = (await trailers())['Claimed-At']!;

    const table = await pool(['status', ...sourceFlags()]);
    expect(table.code).toBe(0);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^LOCK\s+STATE\s+HOLDER\s+SINCE\s+FOR$/);
    expect(lines).toHaveLength(4);
    expect(lines[1]).toMatch(/^a\s+unclaimed\s+-\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\s+\d/);
    expect(lines[2]).toMatch(
      new RegExp(`^b\\s+claimed\\s+build #9\\s+${claimedAt}\\s+\\d+(\\.\\d)?m?s$`),
    );
    const wide = await pool(['status', '--wide', ...sourceFlags()]);
    expect(wide.stdout.split('\n')[2]).toMatch(
      /^b\s+claimed\s+https:\/\/ci\.example\.com\/builds\/9\s/,
    );
    expect(lines[3]).toMatch(/^c\s+unclaimed\s+-\s+/);

    const json = await pool(['status', '--json', ...sourceFlags()]);
    expect(json.code).toBe(0);
    const entries = JSON.parse(json.stdout);
    expect(entries).toHaveLength(3);
    expect(entries[1]).toEqual({
      name: 'b',
      state: 'claimed',
      holder: 'build #9',
      claimed_by: 'https://ci.example.com/builds/9',
      claimed_at: claimedAt,
      since: claimedAt,
    });
    expect(entries[0]).toMatchObject({
      name: 'a',
      state: 'unclaimed',
      claimed_by: null,
      claimed_at: null,
    });
    expect(Object.keys(entries[0]).sort()).toEqual([
      'claimed_at',
      'claimed_by',
      'holder',
      'name',
      'since',
      'state',
    ]);
  });

  it('marks a file whose name out refuses in out’s words, and out takes only the real lock', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a'] } });
    await repo.commit('a file no put can release', async (work) => {
      await writeFile(join(work, 'pool/unclaimed', 'bad\tname'), '');
    });

    const table = await pool(['status', ...sourceFlags()]);
    expect(table.code, table.stderr).toBe(0);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^LOCK\s+STATE\s+HOLDER\s+SINCE\s+FOR\s+NOTE$/);
    expect(lines).toHaveLength(3);
    expect(lines[1]).toMatch(/^a\s+unclaimed\s+-\s+\S+\s+\S+$/);
    expect(lines[2]).toMatch(
      /^bad\\x09name\s+unclaimed\s+-\s+\S+\s+\S+\s+not a valid lock name, not a lock file: fix the lock repository$/,
    );
    const entries = JSON.parse((await pool(['status', '--json', ...sourceFlags()])).stdout);
    expect(entries.map((entry: { problem?: string }) => entry.problem)).toEqual([
      undefined,
      'not a valid lock name',
    ]);

    const claimed = await runScript(
      'out',
      {
        source: { uri: repo.bare, branch: repo.branch, pool: 'pool' },
        params: { claim: 'bad\tname' },
      },
      { args: [await tempDir()] },
    );
    expect(claimed.code).toBe(1);
    expect(claimed.stderr).toContain('contains a control character');
    const acquired = await runScript(
      'out',
      { source: { uri: repo.bare, branch: repo.branch, pool: 'pool' }, params: { acquire: true } },
      { args: [await tempDir()] },
    );
    expect(acquired.code, acquired.stderr).toBe(0);
    expect(JSON.parse(acquired.stdout).metadata).toContainEqual({ name: 'lock_name', value: 'a' });
  });

  it('shows who waits in line and for how many locks, as the waiting put says it', async () => {
    repo = await createLockRepo({ pool: { claimed: ['a', 'b'], unclaimed: ['c'] } });
    const running = startScript(
      'out',
      {
        source: { uri: repo.bare, branch: repo.branch, pool: 'pool', retry_delay: '100ms' },
        params: { acquire: true, count: 2 },
      },
      {
        args: [await tempDir()],
        env: {
          BUILD_TEAM_NAME: 'main',
          BUILD_PIPELINE_NAME: 'deploy',
          BUILD_JOB_NAME: 'integration',
          BUILD_NAME: '42',
          BUILD_ID: '1001',
          ATC_EXTERNAL_URL: 'https://ci.example.com',
        },
      },
    );
    cleanups.push(async () => {
      running.child.kill('SIGKILL');
      await running.done;
    });
    await running.waitForStderr(/waiting for lock/);
    const row = /^1\s+main\/deploy\/integration #42\s+2\s+\S+Z\s+\S+\s+waiting$/m;
    let table = '';
    for (let tries = 0; tries < 50 && !row.test(table); tries++)
      table = (await pool(['status', ...sourceFlags()])).stdout;
    expect(table).toMatch(row);
    const report = JSON.parse((await pool(['report', '--json', ...sourceFlags()])).stdout) as {
      waiting: { who?: string; locks: number }[];
    };
    expect(report.waiting).toMatchObject([{ who: 'main/deploy/integration #42', locks: 2 }]);
    running.child.kill('SIGTERM');
    expect((await running.done).code).toBe(143);
    const prefix = `refs/pool-resource/waiting/${repo.branch}/pool/`;
    expect(await git(repo.bare, 'for-each-ref', prefix)).toBe('');
  });

  it('shows the waiting line, marks the puts gone, and the next put takes those out', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a', 'c'], claimed: ['b'] } });
    const before = (await git(repo.bare, 'rev-parse', repo.branch)).trim();
    // The tip was committed ten minutes ago: the free locks have been free since then at least.
    const tree = (await git(repo.bare, 'rev-parse', `${before}^{tree}`)).trim();
    const old = (
      await exec('git', ['commit-tree', '-p', before, '-m', 'updating: nothing', tree], {
        cwd: repo.bare,
        env: {
          ...GIT_TEST_ENV,
          GIT_COMMITTER_DATE: `${Math.floor(Date.now() / 1000) - 600} +0000`,
        },
      })
    ).stdout.trim();
    await git(repo.bare, 'update-ref', `refs/heads/${repo.branch}`, old);
    const prefix = `refs/pool-resource/waiting/${repo.branch}/pool/`;
    // Killed while it waited, before the tip: it never showed it was alive since.
    const gone = `${prefix}${Date.now() - 900_000}-1000-gone`;
    await git(repo.bare, 'update-ref', gone, before);
    // Joined at the tip: alive as far as anyone can tell. It says who it is.
    const alive = `${prefix}${Date.now() - 60_000}-1000-alive.main%2Fdeploy%2Fit%20%237`;
    await git(repo.bare, 'update-ref', alive, old);

    const table = await pool(['status', ...sourceFlags()]);
    expect(table.code, table.stderr).toBe(0);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[4]).toBe('');
    expect(lines[5]).toMatch(/^WAITING\s+WHO\s+LOCKS\s+SINCE\s+FOR\s+STATE$/);
    expect(lines[6]).toMatch(/^1\s+\?\s+1\s+\S+Z\s+15m\S*\s+gone \(left a free lock untaken\)$/);
    expect(lines[7]).toMatch(/^2\s+main\/deploy\/it #7\s+1\s+\S+Z\s+1m\S*\s+waiting$/);
    // --json stays a list of locks.
    expect(JSON.parse((await pool(['status', '--json', ...sourceFlags()])).stdout)).toHaveLength(3);

    const acquired = await runScript(
      'out',
      {
        source: { uri: repo.bare, branch: repo.branch, pool: 'pool', retry_delay: '100ms' },
        params: { acquire: true },
      },
      { args: [await tempDir()] },
    );
    expect(acquired.code, acquired.stderr).toBe(0);
    expect(acquired.stderr).toContain('the put ahead in line left a free lock untaken');
    const refs = await git(repo.bare, 'for-each-ref', '--format=%(refname)', prefix);
    expect(refs.split('\n').filter(Boolean)).toEqual([alive]);
  });

  it('finds holders far back in history', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a'] }, other: { unclaimed: ['x'] } });
    expect((await pool(['claim', 'a', '--by', 'ops@desk', ...sourceFlags()])).code).toBe(0);
    for (let i = 0; i < 40; i++) {
      await git(repo.work, 'pull', '--quiet', '--ff-only', 'origin', repo.branch);
      await writeFile(join(repo.work, 'other/unclaimed/x'), `${i}\n`);
      await git(repo.work, 'commit', '--quiet', '-am', 'updating: x');
    }
    await git(repo.work, 'push', '--quiet', 'origin', `HEAD:refs/heads/${repo.branch}`);
    const entries = JSON.parse((await pool(['status', '--json', ...sourceFlags()])).stdout);
    expect(entries).toEqual([expect.objectContaining({ name: 'a', claimed_by: 'ops@desk' })]);
  });

  it('says clearly when the pool or the branch does not exist', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a'] } });
    const noPool = await pool(['status', ...sourceFlags('nope')]);
    expect(noPool.code).toBe(1);
    expect(noPool.stderr.trim()).toBe(
      'error: pool "nope" does not exist on branch "master" (expected folders nope/claimed/ and nope/unclaimed/); pools on the branch: "pool"; create it with: pool init --uri URI --branch master --pool nope --lock NAME',
    );
    const noBranch = await pool([
      'status',
      '--uri',
      repo.bare,
      '--branch',
      'gone',
      '--pool',
      'pool',
    ]);
    expect(noBranch.code).toBe(1);
    expect(noBranch.stderr.trim()).toMatch(/^error: branch "gone" does not exist in /);
  });
});

describe('pool claim, release, add, remove', () => {
  it('claim records the operator in the trailers; release gives the lock back', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a'] } });
    const claimed = await pool(['claim', 'a', ...sourceFlags()], { env: { USER: 'tester' } });
    expect(claimed.code).toBe(0);
    expect(claimed.stdout).toBe('');
    expect(claimed.stderr).toMatch(
      /claiming lock: a on: pool\nclaimed! lock: a \(commit [0-9a-f]{12}\)/,
    );
    expect(await repo.state('pool')).toEqual({ claimed: ['a'], unclaimed: [] });
    const record = await trailers();
    expect(record['Claimed-By']).toBe(`tester@${hostname()}`);
    expect(record['Claim-Token']).toMatch(/^[0-9a-f-]{36}$/);
    expect(await git(repo.bare, 'log', '-1', '--format=%s', repo.branch)).toBe('claiming: a\n');

    const released = await pool(['release', 'a', '--json', ...sourceFlags()]);
    expect(released.code).toBe(0);
    expect(JSON.parse(released.stdout)).toEqual({
      version: { ref: await repo.tip() },
      metadata: [
        { name: 'lock_name', value: 'a' },
        { name: 'pool_name', value: 'pool' },
      ],
    });
    expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: ['a'] });
    expect(await git(repo.bare, 'log', '-1', '--format=%B', repo.branch)).toMatch(
      /^unclaiming: a\n\nBuild URL: none \(pool command by .+\)\n/,
    );
  });

  it('claim waits while the lock is held, naming the holder, and --wait-timeout bounds it', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a'] } });
    expect((await pool(['claim', 'a', '--by', 'alice@desk', ...sourceFlags()])).code).toBe(0);
    const before = await repo.tip();
    const result = await pool(['claim', 'a', '--wait-timeout', '1s', ...sourceFlags()]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /waiting for lock: lock "a" in pool "pool" is claimed \(1 claimed, 0 unclaimed\); "a" held by alice@desk since /,
    );
    expect(result.stderr).toContain(
      'error: timed out after 1s (--wait-timeout) waiting: lock "a" in pool "pool" is claimed (1 claimed, 0 unclaimed)',
    );
    expect(await repo.tip()).toBe(before);
  });

  it('claim gets the lock once it is released', async () => {
    repo = await createLockRepo({ pool: { claimed: ['a'] } });
    const running = startScript('pool', '', {
      args: ['claim', 'a', '--by', 'bob@desk', ...sourceFlags()],
    });
    await running.waitForStderr(/waiting for lock/);
    expect((await pool(['release', 'a', ...sourceFlags()])).code).toBe(0);
    const result = await running.done;
    expect(result.code).toBe(0);
    expect(result.stderr).toContain('claimed! lock: a');
    expect((await trailers())['Claimed-By']).toBe('bob@desk');
  });

  it('SIGTERM while waiting exits 143 at once and commits nothing', async () => {
    repo = await createLockRepo({ pool: { claimed: ['a'] } });
    const before = await repo.tip();
    const spawned = Date.now();
    const running = startScript('pool', '', { args: ['claim', 'a', ...sourceFlags()] });
    await running.waitForStderr(/waiting for lock/);
    const sent = Date.now();
    running.child.kill('SIGTERM');
    const result = await running.done;
    expect(result.code).toBe(143);
    // Both pipes reach end-of-file within a second of the signal.
    expect(spawned + result.eofMs - sent).toBeLessThan(1000);
    expect(result.stderr).toContain('received SIGTERM: stopping');
    expect(await repo.tip()).toBe(before);
  });

  it('release and remove refuse a lock that is not claimed, as out does', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a'] } });
    const before = await repo.tip();
    const release = await pool(['release', 'a', ...sourceFlags()]);
    expect(release.code).toBe(1);
    expect(release.stderr).toContain(
      'error: cannot release lock "a": it is not claimed in pool "pool" (it is unclaimed)',
    );
    const remove = await pool(['remove', 'missing', ...sourceFlags()]);
    expect(remove.code).toBe(1);
    expect(remove.stderr).toContain(
      'error: cannot remove lock "missing": it does not exist in pool "pool"',
    );
    expect(await repo.tip()).toBe(before);
  });

  it('add writes the metadata file; --claimed adds it claimed with holder trailers; remove deletes', async () => {
    repo = await createLockRepo({ pool: {} });
    const dir = await tempDir();
    await writeFile(join(dir, 'metadata'), '{"host":"10.0.0.1"}\n');
    const added = await pool(['add', 'a', '--metadata', join(dir, 'metadata'), ...sourceFlags()]);
    expect(added.code).toBe(0);
    expect(await git(repo.bare, 'show', `${repo.branch}:pool/unclaimed/a`)).toBe(
      '{"host":"10.0.0.1"}\n',
    );
    expect(await git(repo.bare, 'log', '-1', '--format=%s', repo.branch)).toBe(
      'adding unclaimed: a\n',
    );

    const twice = await pool(['add', 'a', ...sourceFlags()]);
    expect(twice.code).toBe(1);
    expect(twice.stderr).toContain('error: lock "a" already exists in pool "pool" (unclaimed)');

    const claimed = await pool(['add', 'b', '--claimed', '--by', 'carol@desk', ...sourceFlags()]);
    expect(claimed.code).toBe(0);
    expect(await repo.state('pool')).toEqual({ claimed: ['b'], unclaimed: ['a'] });
    expect(await git(repo.bare, 'show', `${repo.branch}:pool/claimed/b`)).toBe('');
    expect((await trailers())['Claimed-By']).toBe('carol@desk');

    const removed = await pool(['remove', 'b', ...sourceFlags()]);
    expect(removed.code).toBe(0);
    expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: ['a'] });
    expect(await git(repo.bare, 'log', '-1', '--format=%s', repo.branch)).toBe('removing: b\n');
  });

  it('refuses an unreadable --metadata file before any git work', async () => {
    repo = await createLockRepo({ pool: {} });
    const result = await pool(['add', 'a', '--metadata', '/nonexistent/meta', ...sourceFlags()]);
    expect(result.code).toBe(1);
    expect(result.stderr.trim()).toBe('error: cannot read --metadata "/nonexistent/meta" (ENOENT)');
  });
});

describe('pool acquire', () => {
  const seed = {
    unclaimed: {
      'eu-small': 'region: eu\nsize: small\n',
      'eu-xl': '{"region": "eu", "size": "xlarge"}\n',
      'us-xl': 'region: us\nsize: xlarge\n',
    },
  };

  it('--match takes only a matching lock; a key given twice matches any of its values', async () => {
    repo = await createLockRepo({ pool: seed });
    const result = await pool(
      ['acquire', '--match', 'region=eu', '--match', 'size=large', '--match', 'size=xlarge'].concat(
        '--json',
        sourceFlags(),
      ),
    );
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({
      version: { ref: await repo.tip() },
      metadata: [
        { name: 'lock_name', value: 'eu-xl' },
        { name: 'pool_name', value: 'pool' },
      ],
    });
    expect(result.stderr).toContain(
      'acquiring lock on: pool (one that matches match {region: eu, size: [large, xlarge]})',
    );
    expect(await repo.state('pool')).toEqual({
      claimed: ['eu-xl'],
      unclaimed: ['eu-small', 'us-xl'],
    });
  });

  it('--count takes that many locks at once, among those --match lets through', async () => {
    repo = await createLockRepo({ pool: seed });
    const result = await pool([
      'acquire',
      '--count',
      '2',
      '--match',
      'size=xlarge',
      '--json',
      ...sourceFlags(),
    ]);
    expect(result.code, result.stderr).toBe(0);
    const response = JSON.parse(result.stdout) as { metadata: { name: string; value: string }[] };
    expect(response.metadata.find(({ name }) => name === 'lock_count')?.value).toBe('2');
    expect(await repo.state('pool')).toEqual({
      claimed: ['eu-xl', 'us-xl'],
      unclaimed: ['eu-small'],
    });
    expect(result.stderr).toContain('acquired! locks:');
    // Two more than the pool holds fails at once.
    const tip = await repo.tip();
    const tooMany = await pool(['acquire', '--count', '4', ...sourceFlags()]);
    expect(tooMany.code).toBe(1);
    expect(tooMany.stderr).toContain(
      'cannot acquire 4 locks: pool "pool" holds 3 (claimed and unclaimed)',
    );
    expect(await repo.tip()).toBe(tip);
  });

  it('--match-name filters on the name; a filter nothing matches fails at once', async () => {
    repo = await createLockRepo({ pool: seed });
    const tip = await repo.tip();
    const none = await pool([
      'acquire',
      '--match-name',
      'us-*',
      '--match',
      'size=small',
      ...sourceFlags(),
    ]);
    expect(none.code).toBe(1);
    expect(none.stderr.trim().split('\n').at(-1)).toBe(
      'error: no lock in pool "pool" matches match_name "us-*" and match {size: small} (looked at 3 locks)',
    );
    expect(await repo.tip()).toBe(tip);
    const us = await pool(['acquire', '--match-name', 'us-*', ...sourceFlags()]);
    expect(us.code, us.stderr).toBe(0);
    expect(await repo.state('pool')).toMatchObject({ claimed: ['us-xl'] });
  });

  it("takes the --source file's match as the default, which --match replaces", async () => {
    repo = await createLockRepo({ pool: seed });
    const dir = await tempDir();
    const file = join(dir, 'source.json');
    await writeFile(
      file,
      JSON.stringify({
        uri: repo.bare,
        branch: repo.branch,
        pool: 'pool',
        match: { size: 'small' },
      }),
    );
    expect((await pool(['acquire', '--source', file])).code).toBe(0);
    expect(await repo.state('pool')).toMatchObject({ claimed: ['eu-small'] });
    expect((await pool(['acquire', '--source', file, '--match', 'region=us'])).code).toBe(0);
    expect(await repo.state('pool')).toMatchObject({ claimed: ['eu-small', 'us-xl'] });
  });
});

describe('pool --source FILE', () => {
  it('reads the source object (or a resource definition holding one); flags win', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a'] }, other: { unclaimed: ['z'] } });
    const dir = await tempDir();
    await mkdir(dir, { recursive: true });
    const file = join(dir, 'source.json');
    await writeFile(
      file,
      JSON.stringify({ uri: repo.bare, branch: repo.branch, pool: 'pool', retry_delay: '1s' }),
    );
    const plain = JSON.parse((await pool(['status', '--json', '--source', file])).stdout);
    expect(plain.map((entry: { name: string }) => entry.name)).toEqual(['a']);

    const overridden = JSON.parse(
      (await pool(['status', '--json', '--source', file, '--pool', 'other'])).stdout,
    );
    expect(overridden.map((entry: { name: string }) => entry.name)).toEqual(['z']);

    await writeFile(
      file,
      JSON.stringify({
        name: 'locks',
        type: 'pool',
        source: { uri: repo.bare, branch: repo.branch, pool: 'pool' },
      }),
    );
    expect((await pool(['claim', 'a', '--source', file])).code).toBe(0);
    expect(await repo.state('pool')).toEqual({ claimed: ['a'], unclaimed: [] });
  });

  it('refuses a file that is not JSON without quoting it, and names bad fields', async () => {
    const dir = await tempDir();
    const file = join(dir, 'source.json');
    await writeFile(file, '{"uri": "x", "password": "hunter2-secret"');
    const broken = await pool(['status', '--source', file]);
    expect(broken.code).toBe(1);
    expect(broken.stderr.trim()).toBe(`error: --source file "${file}" is not valid JSON`);

    await writeFile(
      file,
      JSON.stringify({ uri: 'x', branch: 'b', pool: 'p', retry_delay: 'often' }),
    );
    const field = await pool(['status', '--source', file]);
    expect(field.code).toBe(1);
    expect(field.stderr.trim()).toMatch(/^error: source retry_delay: invalid duration "often"/);
    expect(await readFile(file, 'utf8')).toContain('often');
  });
});

describe('pool over git daemon', () => {
  it('initialises, claims and shows status through git://', async () => {
    const { bare, root } = await emptyRepo();
    const daemon = await startGitDaemon(root);
    cleanups.push(() => daemon.stop());
    const flags = ['--uri', daemon.url(bare), '--branch', 'main', '--pool', 'p'];
    expect((await pool(['init', ...flags, '--lock', 'a'])).code).toBe(0);
    expect((await pool(['claim', 'a', '--by', 'dan@desk', ...flags])).code).toBe(0);
    const entries = JSON.parse((await pool(['status', '--json', ...flags])).stdout);
    expect(entries).toEqual([
      expect.objectContaining({ name: 'a', state: 'claimed', claimed_by: 'dan@desk' }),
    ]);
  });
});
