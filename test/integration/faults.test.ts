// Faults: the remote vanishes, crawls, goes silent or is force-pushed while a put waits; pools and
// locks that are not what they should be; huge metadata; two puts racing for one name. Each ends
// with the right result or a clear error in bounded time, and the repository stays consistent.
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it, type TestContext } from 'vitest';
import { startGitDaemon, type GitDaemon } from '../helpers/git-daemon.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { consistencyProblems } from '../helpers/pool-invariants.js';
import { runScript, startScript, tempDir, type ScriptResult } from '../helpers/run-script.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { source } from '../helpers/source.js';

// Most of these tests spend their time waiting (backoff, timeouts), so they run side by side,
// each with its own repository, daemon and proxy, removed when it finishes.
async function lockRepo(
  ctx: TestContext,
  ...args: Parameters<typeof createLockRepo>
): Promise<LockRepo> {
  const repo = await createLockRepo(...args);
  ctx.onTestFinished(() => repo.cleanup());
  return repo;
}

async function gitDaemon(ctx: TestContext, root: string): Promise<GitDaemon> {
  const daemon = await startGitDaemon(root);
  ctx.onTestFinished(() => daemon.stop());
  return daemon;
}

async function tcpProxy(ctx: TestContext, port: number): Promise<TcpProxy> {
  const proxy = await startTcpProxy(port);
  ctx.onTestFinished(() => proxy.stop());
  return proxy;
}

async function step(name: string, metadata?: Buffer | string): Promise<string> {
  const src = await tempDir();
  await mkdir(join(src, 'step'));
  await writeFile(join(src, 'step', 'name'), `${name}\n`);
  if (metadata !== undefined) await writeFile(join(src, 'step', 'metadata'), metadata);
  return src;
}

function expectCleanFailure(result: ScriptResult, says: RegExp): void {
  expect(result.code, result.stderr).toBe(1);
  expect(result.stdout).toBe('');
  expect(result.stderr).toMatch(says);
  expect(result.stderr).not.toMatch(/^\s+at /m);
}

function expectOneDocument(result: ScriptResult): { version: { ref: string } } {
  expect(result.code, result.stderr).toBe(0);
  expect(result.stdout.endsWith('\n')).toBe(true);
  return JSON.parse(result.stdout);
}

async function expectConsistent(r: LockRepo, allowed?: string[]): Promise<void> {
  expect(await consistencyProblems(r.bare, r.branch, ['pool'], allowed)).toEqual([]);
}

describe.concurrent('the remote disappears in the middle of an operation', () => {
  it('git daemon stops while a put waits: a clear error in bounded time, nothing lost', async (ctx) => {
    const repo = await lockRepo(ctx, { pool: { claimed: ['lock-a'] } });
    const daemon = await gitDaemon(ctx, repo.root);
    const run = startScript(
      'out',
      { source: source(daemon.url(repo.bare)), params: { acquire: true } },
      { args: [await tempDir()] },
    );
    await run.waitForStderr(/waiting for lock/);
    const stoppedAt = Date.now();
    await daemon.stop();
    const result = await run.done;
    // Four retries with backoff (0.5 + 1 + 2 + 4 s), then the git error itself.
    expect(Date.now() - stoppedAt).toBeLessThan(30_000);
    expectCleanFailure(
      result,
      /gave up after 5 attempts: .*(unable to connect|Connection refused)/,
    );
    expect(await repo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });
    expect(await repo.subjects()).toEqual(['initial pools']);
  });

  it('the repository is moved away and comes back: the put carries on and claims', async (ctx) => {
    const repo = await lockRepo(ctx, { pool: { claimed: ['lock-a'] } });
    const r = repo;
    const run = startScript(
      'out',
      { source: source(r.bare), params: { claim: 'lock-a' } },
      { args: [await tempDir()] },
    );
    await run.waitForStderr(/waiting for lock/);
    await rename(r.bare, `${r.bare}.moved`);
    await run.waitForStderr(/trying again in/);
    await rename(`${r.bare}.moved`, r.bare);
    await r.commit('unclaiming: lock-a', (work) =>
      rename(join(work, 'pool/claimed/lock-a'), join(work, 'pool/unclaimed/lock-a')),
    );
    const response = expectOneDocument(await run.done);
    expect(response.version.ref).toBe(await r.tip());
    expect(await r.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });
    expect(await r.subjects()).toEqual(['claiming: lock-a', 'unclaiming: lock-a', 'initial pools']);
    await expectConsistent(r);
  });

  it('the repository is gone for good: every script fails clearly', async (ctx) => {
    const repo = await lockRepo(ctx, { pool: { unclaimed: ['lock-a'] } });
    const tip = await repo.tip();
    await rm(repo.bare, { recursive: true });
    const started = Date.now();
    const [check, fetched, put] = await Promise.all([
      runScript('check', { source: source(repo.bare) }),
      runScript(
        'in',
        { source: source(repo.bare), version: { ref: tip } },
        { args: [await tempDir()] },
      ),
      runScript(
        'out',
        { source: source(repo.bare), params: { acquire: true } },
        { args: [await tempDir()] },
      ),
    ]);
    expect(Date.now() - started).toBeLessThan(30_000);
    for (const result of [check, fetched, put])
      expectCleanFailure(
        result,
        /Could not read from remote repository|does not appear to be a git repository|repository '.*' does not exist/,
      );
  });
});

describe.concurrent('a remote that answers slowly', () => {
  it('every chunk delayed: the put still gets the right answer', async (ctx) => {
    const repo = await lockRepo(ctx, { pool: { unclaimed: ['lock-a'] } });
    const daemon = await gitDaemon(ctx, repo.root);
    const proxy = await tcpProxy(ctx, daemon.port);
    proxy.setDelay(100);
    const uri = `git://127.0.0.1:${proxy.port}/locks.git`;
    const acquired = expectOneDocument(
      await runScript(
        'out',
        { source: source(uri), params: { acquire: true } },
        { args: [await tempDir()] },
      ),
    );
    expect(acquired.version.ref).toBe(await repo.tip());
    const dest = await tempDir();
    expectOneDocument(
      await runScript('in', { source: source(uri), version: acquired.version }, { args: [dest] }),
    );
    expect(await readFile(join(dest, 'name'), 'utf8')).toBe('lock-a\n');
    expect(proxy.connections()).toBeGreaterThan(0);
    await expectConsistent(repo);
  });

  it('a remote that stops answering: git_timeout bounds every command', async (ctx) => {
    const repo = await lockRepo(ctx, { pool: { unclaimed: ['lock-a'] } });
    const daemon = await gitDaemon(ctx, repo.root);
    const proxy = await tcpProxy(ctx, daemon.port);
    proxy.setSilent(true);
    const uri = `git://127.0.0.1:${proxy.port}/locks.git`;
    const started = Date.now();
    const [check, put] = await Promise.all([
      runScript('check', { source: source(uri, { git_timeout: '1s' }) }),
      runScript(
        'out',
        { source: source(uri, { git_timeout: '1s' }), params: { acquire: true } },
        { args: [await tempDir()] },
      ),
    ]);
    // out: a timed-out command is tried once more, after a short backoff.
    expect(Date.now() - started).toBeLessThan(30_000);
    expectCleanFailure(check, /timed out after 1s \(source.git_timeout\)/);
    expectCleanFailure(
      put,
      /gave up after 2 attempts: .*timed out after 1s \(source.git_timeout\)/,
    );
    expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a'] });
  });
});

describe.concurrent('an HTTP remote that stops answering', () => {
  // git runs a helper (git-remote-http) for http(s): it must not outlive the timed-out
  // command and keep the script's pipes open.
  it('check fails on git_timeout and the process exits', async (ctx) => {
    const silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    ctx.onTestFinished(() => void silent.close());
    const port = (silent.address() as AddressInfo).port;
    const run = startScript('check', {
      source: source(`http://127.0.0.1:${port}/locks.git`, { git_timeout: '1s' }),
    });
    // A hung script is killed, so the failure reads as one rather than as a test timeout.
    const killer = setTimeout(() => run.child.kill('SIGKILL'), 15_000);
    const result = await run.done;
    clearTimeout(killer);
    expectCleanFailure(result, /timed out after 1s \(source.git_timeout\)/);
    expect(result.eofMs).toBeLessThan(10_000);
  });
});

describe.concurrent('the branch is force-pushed while a put waits', () => {
  async function rewrite(r: LockRepo, files: Record<string, string>): Promise<string> {
    const work = r.work;
    await git(work, 'checkout', '--quiet', '--orphan', 'rewrite');
    await git(work, 'rm', '-r', '--quiet', '--cached', '.');
    await git(work, 'clean', '-fdxq');
    for (const [path, content] of Object.entries(files)) {
      await mkdir(join(work, path, '..'), { recursive: true });
      await writeFile(join(work, path), content);
    }
    await git(work, 'add', '-A');
    await git(work, 'commit', '--quiet', '-m', 'rewritten');
    await git(work, 'push', '--quiet', '--force', 'origin', 'HEAD:refs/heads/master');
    return (await git(work, 'rev-parse', 'HEAD')).trim();
  }

  it('to a history where the lock is free: claims it on top of the new history', async (ctx) => {
    const repo = await lockRepo(ctx, { pool: { claimed: ['lock-a'] } });
    const r = repo;
    const daemon = await gitDaemon(ctx, r.root);
    const run = startScript(
      'out',
      { source: source(daemon.url(r.bare)), params: { claim: 'lock-a' } },
      { args: [await tempDir()] },
    );
    await run.waitForStderr(/waiting for lock/);
    const rewritten = await rewrite(r, {
      'README.md': 'locks\n',
      'pool/claimed/.gitkeep': '',
      'pool/unclaimed/.gitkeep': '',
      'pool/unclaimed/lock-a': 'new life\n',
      'pool/unclaimed/lock-z': 'z\n',
    });
    const response = expectOneDocument(await run.done);
    expect(response.version.ref).toBe(await r.tip());
    expect((await git(r.bare, 'rev-parse', `${response.version.ref}^`)).trim()).toBe(rewritten);
    expect(await r.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: ['lock-z'] });
    expect(await r.subjects()).toEqual(['claiming: lock-a', 'rewritten']);
    await expectConsistent(r);
  });

  it('to a history without the pool: fails clearly and commits nothing', async (ctx) => {
    const repo = await lockRepo(ctx, { pool: { claimed: ['lock-a'] } });
    const r = repo;
    const daemon = await gitDaemon(ctx, r.root);
    const run = startScript(
      'out',
      { source: source(daemon.url(r.bare)), params: { acquire: true } },
      { args: [await tempDir()] },
    );
    await run.waitForStderr(/waiting for lock/);
    const rewritten = await rewrite(r, { 'README.md': 'no pools here\n' });
    expectCleanFailure(await run.done, /pool "pool" does not exist on branch "master"/);
    expect(await r.tip()).toBe(rewritten);
  });
});

describe.concurrent('a push whose answer never arrives', () => {
  // A post-receive hook runs after the branch moved, and git push waits for it: with a hook
  // slower than git_timeout, the push lands but the client times out without the answer.
  async function slowHook(r: LockRepo): Promise<void> {
    const hook = join(r.bare, 'hooks', 'post-receive');
    await writeFile(hook, '#!/bin/sh\nsleep 3\n');
    await chmod(hook, 0o755);
  }

  it('release, add and acquire end with the result that landed, not an error', async (ctx) => {
    const r = await lockRepo(ctx, { pool: { claimed: ['lock-a'], unclaimed: ['lock-b'] } });
    await slowHook(r);
    const slow = source(r.bare, { git_timeout: '1500ms' });
    const released = await runScript(
      'out',
      { source: slow, params: { release: 'step' } },
      {
        args: [await step('lock-a')],
      },
    );
    expect(expectOneDocument(released).version.ref).toBe(await r.tip());
    expect(released.stderr).toMatch(/released!/);

    const added = await runScript(
      'out',
      { source: slow, params: { add: 'step' } },
      {
        args: [await step('lock-c', 'c\n')],
      },
    );
    expect(expectOneDocument(added).version.ref).toBe(await r.tip());

    const acquired = await runScript(
      'out',
      { source: slow, params: { acquire: true } },
      {
        args: [await tempDir()],
      },
    );
    expect(expectOneDocument(acquired).version.ref).toBe(await r.tip());
    expect(await r.subjects()).toEqual([
      expect.stringMatching(/^claiming: lock-[abc]$/),
      'adding unclaimed: lock-c',
      'unclaiming: lock-a',
      'initial pools',
    ]);
    await expectConsistent(r);
  });
});

describe.concurrent('claims that land after their push timed out', () => {
  // git daemon keeps applying a push whose client gave up: with a pre-receive hook slower than
  // git_timeout, a claim lands seconds after the put stopped waiting for it.
  async function slowClaims(repo: LockRepo, seconds: number): Promise<void> {
    const hook = join(repo.bare, 'hooks', 'pre-receive');
    await writeFile(
      hook,
      [
        '#!/bin/sh',
        'while read old new ref; do',
        `  case "$(git log -1 --format=%s "$new")" in claiming:*) sleep ${seconds} ;; esac`,
        'done',
        '',
      ].join('\n'),
    );
    await chmod(hook, 0o755);
  }

  async function expectReleasedOnce(repo: LockRepo): Promise<void> {
    const subjects = await repo.subjects();
    expect(subjects.slice(0, 2)).toEqual([
      expect.stringMatching(/^unclaiming: lock-[ab]$/),
      expect.stringMatching(/^claiming: lock-[ab]$/),
    ]);
    expect(subjects[0]!.slice(2)).toBe(subjects[1]!);
    await expectConsistent(repo);
    expect(await git(repo.bare, 'ls-tree', '--name-only', 'master', 'pool/claimed/')).not.toMatch(
      /lock-/,
    );
  }

  it.for<[string, number, string]>([
    // Claim 1 times out at 2 s and lands at 3.5 s; the retry (after 0.5 s) syncs before that and
    // pushes claim 2, which times out too: the put gives up at about 4.5 s, by when claim 1 is
    // on the branch and claim 2, made on the same tip, can no longer land.
    ['releases the claim that landed late, not only its last one', 3.5, '2s'],
    // Both claims time out (1 s each) long before the first lands (about 5.3 s): when the put
    // gives up, the branch is still where both were made, so either may yet land.
    ['waits for a claim the server is still applying, then releases it', 5, '1s'],
  ])('a put that gives up %s', async ([, hookSeconds, gitTimeout], ctx) => {
    const repo = await lockRepo(ctx, { pool: { unclaimed: ['lock-a', 'lock-b'] } });
    const daemon = await gitDaemon(ctx, repo.root);
    await slowClaims(repo, hookSeconds);
    const result = await runScript(
      'out',
      {
        source: source(daemon.url(repo.bare), { git_timeout: gitTimeout }),
        params: { acquire: true },
      },
      { args: [await tempDir()] },
    );
    expectCleanFailure(result, /gave up after 2 attempts/);
    expect(result.stderr).toMatch(/released "lock-[ab]": this run no longer holds it/);
    // Let claim 2's hook finish: the server rejects it.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    await expectReleasedOnce(repo);
  });

  it('a stop signal while the put that gave up waits for its late claim: that same release finishes', async (ctx) => {
    // As above with an 8 s hook: the put gives up at about 2.5 s and waits for claim 1, which
    // lands at about 8.3 s. SIGTERM comes in between, and the process stops waiting for the run
    // itself 3.5 s later: the release already under way is the one that must still finish (a
    // second one would find nothing to do and let the process exit before the claim lands).
    const repo = await lockRepo(ctx, { pool: { unclaimed: ['lock-a', 'lock-b'] } });
    const daemon = await gitDaemon(ctx, repo.root);
    await slowClaims(repo, 8);
    const running = startScript(
      'out',
      {
        source: source(daemon.url(repo.bare), { git_timeout: '1s' }),
        params: { acquire: true },
      },
      { args: [await tempDir()] },
    );
    await running.waitForStderr(/may have reached the remote: checking, to release it/, 10_000);
    running.child.kill('SIGTERM');
    const result = await running.done;
    expect(result.code, result.stderr).toBe(143);
    expect(result.stdout).toBe('');
    expect(result.stderr.match(/checking, to release it/g)).toHaveLength(1);
    expect(result.stderr).toMatch(/released "lock-[ab]": this run no longer holds it/);
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    await expectReleasedOnce(repo);
  });
});

describe.concurrent('a pool folder that is missing', () => {
  const operations: [string, Record<string, unknown>, boolean][] = [
    ['acquire', { acquire: true }, false],
    ['claim', { claim: 'lock-a' }, false],
    ['release', { release: 'step' }, true],
    ['remove', { remove: 'step' }, true],
    ['add', { add: 'step' }, true],
    ['add_claimed', { add_claimed: 'step' }, true],
    ['update', { update: 'step' }, true],
    ['check', { check: 'step' }, true],
    ['check_unclaimed', { check_unclaimed: 'step' }, true],
  ];

  it('every out operation refuses at once, nothing committed', async (ctx) => {
    const repo = await lockRepo(ctx, { pool: { unclaimed: ['lock-a'] } });
    const r = repo;
    // "half" has claimed/ but no unclaimed/.
    await r.commit('half a pool', async (work) => {
      await mkdir(join(work, 'half', 'claimed'), { recursive: true });
      await writeFile(join(work, 'half', 'claimed', 'lock-a'), '');
    });
    const tip = await r.tip();
    for (const pool of ['missing', 'half']) {
      const results = await Promise.all(
        operations.map(async ([, params, needsStep]) =>
          runScript(
            'out',
            { source: source(r.bare, { pool }), params },
            { args: [needsStep ? await step('lock-a', 'm\n') : await tempDir()] },
          ),
        ),
      );
      for (const result of results)
        expectCleanFailure(result, new RegExp(`pool "${pool}" does not exist on branch "master"`));
    }
    expect(await r.tip()).toBe(tip);
  });

  it('check answers an empty list and in says the version is about no lock there', async (ctx) => {
    const repo = await lockRepo(ctx, { pool: { unclaimed: ['lock-a'] } });
    const tip = await repo.tip();
    const check = await runScript('check', { source: source(repo.bare, { pool: 'missing' }) });
    expect(check.code, check.stderr).toBe(0);
    expect(JSON.parse(check.stdout)).toEqual([]);
    const fetched = await runScript(
      'in',
      { source: source(repo.bare, { pool: 'missing' }), version: { ref: tip } },
      { args: [await tempDir()] },
    );
    expectCleanFailure(fetched, /not about any lock in pool "missing"/);
  });
});

describe.concurrent('locks that are directories, symlinks or badly named', () => {
  it('are never taken, moved, overwritten or followed', async (ctx) => {
    const repo = await lockRepo(ctx, { pool: { unclaimed: ['lock-a'] } });
    const r = repo;
    const oddities = await r.commit('odd entries', async (work) => {
      await mkdir(join(work, 'pool/unclaimed/dir'));
      await writeFile(join(work, 'pool/unclaimed/dir/inner'), 'inside a directory\n');
      await symlink('../../README.md', join(work, 'pool/unclaimed/link'));
      await symlink('/etc/passwd', join(work, 'pool/claimed/escape'));
      // A name the resource refuses: taking it would leave a lock nobody can release.
      await writeFile(join(work, 'pool/unclaimed/tab\tname'), 'x\n');
    });
    const allowed = [
      'README.md',
      'pool/unclaimed/dir/inner',
      'pool/unclaimed/link',
      'pool/claimed/escape',
      'pool/unclaimed/tab\tname',
    ];
    const before = await git(r.bare, 'ls-tree', '-r', 'HEAD');
    const src = async (name: string) => step(name, 'new metadata\n');
    const put = async (params: Record<string, unknown>, args: string[]) =>
      runScript('out', { source: source(r.bare), params }, { args });

    const refusals = await Promise.all([
      put({ claim: 'dir' }, [await tempDir()]),
      put({ claim: 'link' }, [await tempDir()]),
      put({ release: 'step' }, [await src('escape')]),
      put({ remove: 'step' }, [await src('escape')]),
      put({ add: 'step' }, [await src('dir')]),
      put({ add_claimed: 'step' }, [await src('link')]),
      put({ update: 'step' }, [await src('link')]),
      put({ check: 'step' }, [await src('dir')]),
    ]);
    for (const result of refusals)
      expectCleanFailure(result, /is a (directory|symlink), not a lock file/);
    expect(await r.tip()).toBe(oddities);

    // acquire takes the one real lock, then finds nothing else to take.
    const acquired = await put({ acquire: true }, [await tempDir()]);
    expectOneDocument(acquired);
    expect(acquired.stdout).toContain('"lock-a"');
    const starved = await put({ acquire: true, wait_timeout: '1s' }, [await tempDir()]);
    expectCleanFailure(starved, /timed out after 1s \(params.wait_timeout\)/);

    // in on the commit that added pool/claimed/escape -> /etc/passwd: the link is never followed.
    // Refusing the entry, or writing the link's own text as its metadata, are both safe.
    const dest = join(await tempDir(), 'dest');
    const fetched = await runScript(
      'in',
      { source: source(r.bare), version: { ref: oddities } },
      { args: [dest] },
    );
    if (fetched.code === 0) {
      expect(await readFile(join(dest, 'metadata'), 'utf8')).toBe('/etc/passwd');
    } else {
      expectCleanFailure(fetched, /not a regular file/);
      await expect(readFile(join(dest, 'metadata'))).rejects.toThrow();
    }

    // Nothing but lock-a moved.
    const after = await git(r.bare, 'ls-tree', '-r', 'HEAD');
    const sorted = (text: string) => text.split('\n').sort();
    expect(sorted(after.replace('pool/claimed/lock-a', 'pool/unclaimed/lock-a'))).toEqual(
      sorted(before),
    );
    await expectConsistent(r, allowed);
  });
});

describe.concurrent('metadata of 1 MiB (the most a step file may hold)', () => {
  it('is added, fetched, updated and carried through a claim byte for byte', async (ctx) => {
    const repo = await lockRepo(ctx, { pool: {} });
    const r = repo;
    // Random bytes: NULs, CR/LF pairs and invalid UTF-8 all occur.
    const first = Buffer.concat([randomBytes(1024 * 1024 - 6), Buffer.from('\r\n\0end')]);
    const second = randomBytes(1024 * 1024);
    const fetch = async (ref: string) => {
      const dest = await tempDir();
      expectOneDocument(
        await runScript('in', { source: source(r.bare), version: { ref } }, { args: [dest] }),
      );
      return readFile(join(dest, 'metadata'));
    };

    const added = expectOneDocument(
      await runScript(
        'out',
        { source: source(r.bare), params: { add: 'step' } },
        { args: [await step('big', first)] },
      ),
    );
    expect((await fetch(added.version.ref)).equals(first)).toBe(true);

    const updated = expectOneDocument(
      await runScript(
        'out',
        { source: source(r.bare), params: { update: 'step' } },
        { args: [await step('big', second)] },
      ),
    );
    expect((await fetch(updated.version.ref)).equals(second)).toBe(true);

    const claimed = expectOneDocument(
      await runScript(
        'out',
        { source: source(r.bare), params: { acquire: true } },
        { args: [await tempDir()] },
      ),
    );
    expect((await fetch(claimed.version.ref)).equals(second)).toBe(true);
    expect((await git(r.bare, 'cat-file', '-s', `${r.branch}:pool/claimed/big`)).trim()).toBe(
      String(second.length),
    );
    await expectConsistent(r);
  });
});

describe.concurrent('two puts adding the same name at once', () => {
  it('exactly one wins, the other fails cleanly, the lock exists once', async (ctx) => {
    const repo = await lockRepo(ctx, { pool: {} });
    const r = repo;
    const daemon = await gitDaemon(ctx, r.root);
    const uri = daemon.url(r.bare);
    for (let round = 0; round < 3; round++) {
      const name = `lock-${round}`;
      // One add and one add_claimed: a lost race must not leave the name in both states.
      const [first, second] = await Promise.all([
        runScript(
          'out',
          { source: source(uri), params: { add: 'step' } },
          { args: [await step(name, 'from first\n')] },
        ),
        runScript(
          'out',
          { source: source(uri), params: { add_claimed: 'step' } },
          { args: [await step(name, 'from second\n')] },
        ),
      ]);
      const winners = [first, second].filter((result) => result.code === 0);
      const losers = [first, second].filter((result) => result.code !== 0);
      expect(winners).toHaveLength(1);
      expect(losers).toHaveLength(1);
      expectCleanFailure(losers[0]!, new RegExp(`lock "${name}" already exists in pool "pool"`));
      const won = winners[0] === first ? 'unclaimed' : 'claimed';
      const content = await git(r.bare, 'show', `${r.branch}:pool/${won}/${name}`);
      expect(content).toBe(winners[0] === first ? 'from first\n' : 'from second\n');
      const subjects = await r.subjects();
      expect(subjects.filter((subject) => subject.endsWith(`: ${name}`))).toHaveLength(1);
    }
    await expectConsistent(r);
    const { claimed, unclaimed } = await r.state('pool');
    expect([...claimed, ...unclaimed].sort()).toEqual(['lock-0', 'lock-1', 'lock-2']);
  });
});
