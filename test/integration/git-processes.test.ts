// How many git processes each operation starts: every one costs a start of git and, from node,
// a fork, and the operations are meant to cost little more than plain git's own claim. A `git`
// first on PATH notes each command the resource runs and turns on git's trace for it (and so for
// the processes git starts in turn), over git daemon, so that the server's own git is not counted.
import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startGitDaemon, type GitDaemon } from '../helpers/git-daemon.js';
import { gitShim, type GitShim } from '../helpers/git-shim.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { runCommand } from '../helpers/run-command.js';
import { source } from '../helpers/source.js';
import { eventually } from '../helpers/eventually.js';
import { waitingLineRefs } from '../helpers/hold-checks.mjs';
import { lockStep, otherClone, scratchDir, succeeded } from '../helpers/steps.js';

let repo: LockRepo;
let daemon: GitDaemon;
let shim: GitShim;

beforeAll(async () => {
  shim = await gitShim({ trace: true });
});

afterAll(async () => {
  await shim.cleanup();
});

beforeEach(async () => {
  repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
  daemon = await startGitDaemon(repo.root);
});

afterEach(async () => {
  await daemon?.stop();
  await repo?.cleanup();
});

/** Runs one script with the counting `git`; returns its answer and what git ran. */
async function counted(script: 'check' | 'in' | 'out', request: object, args: string[] = []) {
  await shim.reset();
  const result = await runCommand(script, {
    stdin: { source: source(repo, { uri: daemon.url(repo.bare) }), ...request },
    args,
    // A TMPDIR of its own: no check cache from another test.
    env: { PATH: shim.path, TMPDIR: await scratchDir() },
  });
  const response = succeeded(result);
  const commands = await shim.commands();
  const started = commands.map(([name]) => name!);
  // One `built-in: git NAME` line per git process, the ones git started included.
  const processes = [...(await shim.trace()).matchAll(/trace: built-in: git ([\w-]+)/g)].map(
    (match) => match[1]!,
  );
  return { response, started, commands, processes, stderr: result.stderr };
}

describe('git processes per operation', () => {
  it('an acquire starts no git process', async () => {
    const acquire = await counted('out', { params: { acquire: true } }, [await scratchDir()]);
    // The first fetch is asked on the run's session and written by the run, which reads the pool
    // from what it wrote, builds the claim's commit itself and pushes it on receive-pack's
    // connection (git/session-pack.ts, repo/moved-commits.ts, git/own-push.ts): no fetch,
    // ls-tree, fast-import or push.
    expect(acquire.started).toEqual([]);
    // No `git var` (the identity is known), no `git init` (the copy is four files), no
    // `index-pack` or `unpack-objects`.
    expect(acquire.processes).not.toContain('var');
    expect(acquire.processes).not.toContain('init');
    expect(acquire.processes).not.toContain('index-pack');
    expect(acquire.processes).not.toContain('unpack-objects');
    expect(await repo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });

    const dest = join(await scratchDir(), 'lock');
    const fetched = await counted('in', { version: (acquire.response as Response).version }, [
      dest,
    ]);
    // The claim is the tip the get fetched itself: which lock it claimed, its trailers and the
    // lock's file are read from what came (repo/commit-diff.ts, FetchedObjects), and nothing can
    // have touched the lock after the tip. No git process at all.
    expect(fetched.started).toEqual([]);
    expect(await readFile(join(dest, 'metadata'), 'utf8')).toBe(
      await git(repo.bare, 'show', 'master:pool/claimed/lock-a'),
    );
    expect((await readFile(join(dest, 'claim_token'), 'utf8')).trim()).toMatch(/^[0-9a-f-]{36}$/);

    const release = await counted('out', { params: { release: 'lock' } }, [
      await lockStep('lock-a'),
    ]);
    expect(release.started).toEqual([]);
    expect(release.processes).not.toContain('var');
    expect(release.processes).not.toContain('unpack-objects');
    expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a'] });

    const check = await counted('check', {});
    expect(check.started).toEqual(['clone', 'log']);
    expect(check.processes).not.toContain('maintenance');
  });

  it('a release from the get of its claim reads the claim from the commits it fetched', async () => {
    const acquire = await counted('out', { params: { acquire: true } }, [await scratchDir()]);
    const step = await scratchDir();
    await counted('in', { version: (acquire.response as Response).version }, [join(step, 'lock')]);
    const release = await counted('out', { params: { release: 'lock' } }, [step]);
    // The claim's commit and its renewals since are read from the commits it fetched
    // (repo/fetched-log.ts), and the release pushed by the run itself.
    expect(release.started).toEqual([]);
    expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a'] });
  });

  it('a put waiting in line fetches the moved branch on its session, with no git fetch', async () => {
    await otherClone(repo).claim('lock-a');
    const waiting = counted(
      'out',
      {
        params: { acquire: true },
        source: source(repo, { uri: daemon.url(repo.bare), retry_delay: '100ms' }),
      },
      [await scratchDir()],
    );
    expect(
      await eventually(async () => (await waitingLineRefs(repo.bare)).length > 0, 10_000),
    ).toBe(true);
    // Another lock comes: the put sees the branch move on its session and takes it.
    await otherClone(repo).add('lock-b');
    const { response, started, commands, stderr } = await waiting;
    expect((response as Response).metadata).toContainEqual({ name: 'lock_name', value: 'lock-b' });
    // Nothing from the server by git: its first fetch and the commit it saw come are asked on
    // the session and written by the run.
    const fromServer = commands.filter(
      ([name, ...args]) => name === 'fetch' && args.includes('fd::3'),
    );
    expect(fromServer).toHaveLength(0);
    expect(started).not.toContain('unpack-objects');
    // Who holds lock-a, and how long locks are held, are read from the commits it fetched
    // itself (repo/fetched-log.ts): no fetch into a copy of the lookup's own, no log. Its place
    // in line and its claim are pushed by the run itself (git/own-push.ts).
    expect(stderr).toMatch(/waiting for lock: .*"lock-a" held by Fixture/);
    expect(started).toEqual([]);
  });

  it('asks git for the identity when git_config sets one, and commits as it', async () => {
    const acquire = await counted(
      'out',
      {
        params: { acquire: true },
        source: source(repo, {
          uri: daemon.url(repo.bare),
          git_config: [{ name: 'user.name', value: 'Pool Bot' }],
        }),
      },
      [await scratchDir()],
    );
    expect(acquire.started).toContain('var');
    const author = execFileSync('git', ['log', '-1', '--format=%an <%ae>', repo.branch], {
      cwd: repo.bare,
      encoding: 'utf8',
    });
    expect(author.trim()).toBe('Pool Bot <ci-pool@localhost>');
  });
});

interface Response {
  version: { ref: string };
  metadata: { name: string; value: string }[];
}
