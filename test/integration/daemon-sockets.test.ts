// git's fetches and pushes to a git:// lock repository go over connections the run opens itself,
// with Nagle's algorithm off, handed to git as its descriptor 3 (src/git/daemon-command.ts). A `git`
// first on PATH notes the arguments of each command the resource runs.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { GitCommandError } from '../../src/base/errors.js';
import { createGitEnvironment } from '../../src/git/environment.js';
import { Git } from '../../src/git/git.js';
import { parseCheckRequest } from '../../src/protocol/request.js';
import type { Source } from '../../src/protocol/source.js';
import { FetchById } from '../../src/repo/branch-copy.js';
import { holderLookup } from '../../src/repo/holder-lookup.js';
import { LockRepository } from '../../src/repo/lock-repository.js';
import { fakeDaemons } from '../helpers/fake-daemon.js';
import { startGitDaemon, type GitDaemon } from '../helpers/git-daemon.js';
import { gitShim, type GitShim } from '../helpers/git-shim.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { runCommand } from '../helpers/run-command.js';
import { startScript } from '../helpers/run-script.js';
import { renamed, source } from '../helpers/source.js';
import {
  buildFolder,
  HOOK_REFUSAL,
  lockStep,
  movesThatFreeNothing,
  otherClone,
  protectBranch,
  refused,
  succeeded,
} from '../helpers/steps.js';

let shim: GitShim;
let repo: LockRepo;
let daemon: GitDaemon;

beforeAll(async () => {
  shim = await gitShim();
});

afterAll(async () => {
  await shim.cleanup();
});

beforeEach(async () => {
  await shim.reset();
  repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
  daemon = await startGitDaemon(repo.root);
});

afterEach(async () => {
  await daemon?.stop();
  await repo?.cleanup();
});

const env = () => ({ PATH: shim.path });

/** The commands that reached the server, each as its arguments. */
async function remoteCommands(): Promise<string[][]> {
  return (await shim.commands()).filter(
    ([name]) => name === 'clone' || name === 'fetch' || name === 'push',
  );
}

/** Runs `body` with a run's git for the daemon's repository, as `out` sets it up. */
async function withRunGit(
  body: (run: { git: Git; settings: Source; home: string }) => Promise<void>,
  url = daemon.url(repo.bare),
): Promise<void> {
  const { source: settings } = (
    await parseCheckRequest(JSON.stringify({ source: source(repo, { uri: url }) }))
  ).request;
  const environment = await createGitEnvironment(settings, { PATH: env().PATH });
  try {
    const git = new Git(environment, new AbortController().signal, 30_000);
    await body({ git, settings, home: environment.home });
  } finally {
    await environment.dispose();
  }
}

/** An acquire over git daemon (retry_delay 200ms) once it waits in line. */
async function waitingInLine() {
  const waiting = startScript(
    'out',
    {
      source: source(repo, { uri: daemon.url(repo.bare), retry_delay: '200ms' }),
      params: { acquire: true },
    },
    { args: [await buildFolder()], env: env() },
  );
  await waiting.waitForStderr(/waiting in line/, 20_000);
  return waiting;
}

/** An acquire over `url` that succeeded: its answer. */
async function acquireOver(url: string): Promise<{ version: { ref: string } }> {
  const result = await runCommand('out', {
    stdin: { source: source(repo, { uri: url }), params: { acquire: true } },
    args: [await buildFolder()],
    env: env(),
  });
  return succeeded(result) as { version: { ref: string } };
}

describe('git over the run’s own connections to git daemon', () => {
  it('an acquire, its get and the release fetch on the run’s session and push on a socket of the run', async () => {
    const url = daemon.url(repo.bare);
    const acquired = await acquireOver(url);
    succeeded(
      await runCommand('in', {
        stdin: { source: source(repo, { uri: url }), version: acquired.version },
        args: [await buildFolder()],
        env: env(),
      }),
    );
    succeeded(
      await runCommand('out', {
        stdin: { source: source(repo, { uri: url }), params: { release: 'lock' } },
        args: [await lockStep('lock-a')],
        env: env(),
      }),
    );
    // The fetches (each run's first) were asked on the run's session and written by the run, and
    // the claim and the release pushed by the run on receive-pack's connection (own-push.ts): git
    // spoke to the server not once.
    expect(await remoteCommands()).toEqual([]);
    expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a'] });
  });

  it('a get of a claim further back than the first fetch reached deepens the copy the run wrote', async () => {
    const url = daemon.url(repo.bare);
    const acquired = await acquireOver(url);
    // Twenty commits that leave the claim alone: the get's first 16 commits do not reach it.
    for (let i = 0; i < 20; i++) await otherClone(repo).add(`lock-${i}`);
    const dest = join(await buildFolder(), 'lock');
    const fetched = succeeded(
      await runCommand('in', {
        stdin: { source: source(repo, { uri: url }), version: acquired.version },
        args: [dest],
        env: env(),
      }),
    ) as { version: { ref: string } };
    expect(fetched.version).toEqual(acquired.version);
    expect(await readFile(join(dest, 'name'), 'utf8')).toBe('lock-a\n');
    // Its first fetch was the run's own (no clone); git deepened that shallow copy from the
    // server as it would its own.
    const remote = await remoteCommands();
    expect(remote.map(([name]) => name)).toEqual(['fetch']);
    expect(remote[0]).toContain('--depth=64');
  });

  it('a put that waits asks only for the commits since its last fetch, and reads the holders there', async () => {
    await otherClone(repo).claim('lock-a');
    const waiting = await waitingInLine();
    await otherClone(repo).release('lock-a');
    const result = await waiting.done;
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/"lock-a" held by /);
    const fetches = (await shim.commands()).filter(([name]) => name === 'fetch');
    // No fetch from the server by git: the put's first (16 commits, and the line with the branch)
    // and, first in line, the released tip, asked by its id and for what was new since its tip
    // only, were asked on its kept session by the run itself (git/session-pack.ts).
    expect(fetches.filter((args) => args.includes('fd::3'))).toEqual([]);
    // The holders on its progress line were read from the commits it had fetched itself
    // (repo/fetched-log.ts): no fetch into a copy of the lookup's own either.
    expect(fetches).toEqual([]);
  });

  it('a put in line reads the pool and its holders at each tip fetched on its session, and commits its claim there, without git', async () => {
    const first = await otherClone(repo).claim('lock-a');
    const waiting = await waitingInLine();
    // Two moves that free nothing (a claimed lock added each time), then the release.
    await movesThatFreeNothing(repo, waiting);
    await otherClone(repo).release('lock-a');
    const result = await waiting.done;
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout).version.ref).not.toBe(first);
    // git listed the pool nowhere: the first tip and those fetched on the session after were
    // read from what came (the waiting line named each new holder).
    const commands = await shim.commands();
    expect(commands.filter(([name]) => name === 'ls-tree')).toEqual([]);
    expect(commands.filter(([name]) => name === 'show')).toEqual([]);
    const claimLogs = commands.filter((args) => args.some((arg) => arg.includes('Claim-Token')));
    expect(claimLogs).toEqual([]);
    // The claim's commit was written by the run, on the released tip, and pushed by it.
    expect(commands.filter(([name]) => name === 'fast-import')).toEqual([]);
    expect(commands.filter(([name]) => name === 'push')).toEqual([]);
    expect(await repo.state('pool')).toEqual({
      claimed: ['lock-a', 'lock-b', 'lock-c'],
      unclaimed: [],
    });
    await git(repo.bare, 'fsck', '--strict', '--no-dangling');
  });

  it('names the git:// uri, never the socket, in what git says', async () => {
    await protectBranch(repo);
    const url = daemon.url(repo.bare);
    const result = await runCommand('out', {
      stdin: { source: source(repo, { uri: url }), params: { acquire: true } },
      args: [await buildFolder()],
      env: env(),
    });
    refused(result, HOOK_REFUSAL);
    expect((await remoteCommands()).at(-1)).toContain('fd::3');
    expect(result.stderr).not.toContain('fd::');
  });

  it('leaves the connection to git when git_config may send git elsewhere (url.<base>.insteadOf)', async () => {
    const other = renamed(daemon.url(repo.bare));
    succeeded(
      await runCommand('out', {
        stdin: { source: source(repo, other), params: { acquire: true } },
        args: [await buildFolder()],
        env: env(),
      }),
    );
    const remote = await remoteCommands();
    expect(remote.length).toBeGreaterThan(0);
    for (const args of remote) {
      expect(args).toContain(other.uri);
      expect(args).not.toContain('fd::3');
    }
    expect(await repo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });
  });

  it('lets git say why when the server cannot be reached', async () => {
    const url = daemon.url(repo.bare);
    await daemon.stop();
    const result = await runCommand('check', {
      stdin: { source: source(repo, { uri: url, git_timeout: '5s' }) },
      env: env(),
    });
    expect(result.code).toBe(1);
    // git connected itself, and its own words name the server.
    expect((await remoteCommands()).at(-1)).toContain(url);
    expect(result.stderr).toMatch(/unable to connect to 127\.0\.0\.1/);
    expect(result.stderr).not.toContain('fd::');
  });

  // git daemon, once it serves --max-connections, drops a new connection unread: a reset.
  it.each([
    ['fetch', ['fetch', '--no-tags']],
    ['push', ['push', '--porcelain']],
  ])('a %s on a connection the server resets fails at once in git’s words', async (_, command) => {
    const fakes = fakeDaemons();
    const url = await fakes.start((socket) => socket.once('data', () => socket.resetAndDestroy()));
    try {
      await withRunGit(async ({ git }) => {
        const failure = await git
          .run([...command, '--', url, 'refs/heads/master:refs/heads/other'], { cwd: repo.bare })
          .catch((error: unknown) => error);
        // Not a GitTimeoutError: git's fd:: transport, handed the socket itself, waited for ever.
        expect(failure).toBeInstanceOf(GitCommandError);
        expect((failure as GitCommandError).stderr).toContain('Could not read from remote');
      }, url);
    } finally {
      fakes.closeAll();
    }
  });

  it('says what git said with the uri where git named the socket', async () => {
    const url = daemon.url(repo.bare);
    await withRunGit(async ({ git }) => {
      const failure = await git
        .run(['push', '--', url, 'refs/heads/none:refs/heads/other'], { cwd: repo.bare })
        .catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(GitCommandError);
      expect((await remoteCommands()).at(-1)).toContain('fd::3');
      const { stderr } = failure as GitCommandError;
      expect(stderr).toContain(`failed to push some refs to '${url}'`);
      expect(stderr).not.toContain('fd::');
    });
  });

  it("reads how long the pool's locks are held from the commits of the put's own copy", async () => {
    await otherClone(repo).add('lock-b');
    await otherClone(repo).claim('lock-a');
    await otherClone(repo).release('lock-a');
    await otherClone(repo).claim('lock-b');
    await otherClone(repo).claim('lock-a');
    const lastClaim = Number(await git(repo.bare, 'log', '-1', '--format=%ct', repo.branch));
    // Another pool on the branch, with a lock of its own claimed and a hold of its own: not read.
    await repo.commit('another pool', async (work) => {
      for (const state of ['claimed', 'unclaimed']) {
        await mkdir(join(work, 'other', state), { recursive: true });
        await writeFile(join(work, 'other', state, '.gitkeep'), '');
      }
    });
    const other = otherClone(repo, 'other');
    for (const name of ['lock-x', 'lock-y']) {
      await other.add(name);
      await other.claim(name);
    }
    await other.release('lock-y');
    await withRunGit(async ({ git: runGit, settings, home }) => {
      const workdir = join(home, 'repository');
      // A put in line: its first fetch brings the newest commits, not the tip alone.
      const store = new LockRepository(runGit, { ...settings, workdir, line: true });
      await store.sync();
      await daemon.stop();
      // Read from the copy alone: one hold that began and ended (lock-a's first), and when the
      // locks claimed now were claimed.
      const history = await store.holdHistory();
      expect(history.holds).toHaveLength(1);
      expect([...history.claimedAt.keys()].sort()).toEqual(['lock-a', 'lock-b']);
      expect(history.claimedAt.get('lock-a')).toBe(lastClaim * 1_000);
    });
  });

  it("reads the holders at a tip the put has fetched from the put's own copy", async () => {
    await otherClone(repo).add('lock-b');
    await otherClone(repo).claim('lock-a');
    await withRunGit(async ({ git, settings, home }) => {
      const workdir = join(home, 'repository');
      const store = new LockRepository(git, { ...settings, workdir });
      const first = await store.sync();
      const local = () => store.keptCopy;
      const signal = new AbortController().signal;
      const lookup = holderLookup(
        git,
        settings,
        home,
        signal,
        undefined,
        new FetchById(false),
        local,
      );
      const names = async (tip: string) =>
        (await lookup.claimed(['lock-a', 'lock-b'], tip)).map(({ name, by }) => [name, by]);
      expect(await names(first)).toEqual([['lock-a', expect.any(String)]]);
      await otherClone(repo).claim('lock-b');
      const tip = await store.sync();
      // The put fetched the claim of lock-b; with the server gone, its holder is still found.
      await daemon.stop();
      expect(await names(tip)).toEqual([
        ['lock-a', expect.any(String)],
        ['lock-b', expect.any(String)],
      ]);
    });
  });
});
