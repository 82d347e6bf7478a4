// The SSH program's lifetime: a silent server is given up on in bounded time, the program goes
// away when git does, and a put stopped while its git runs on the run's connection leaves no process.
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { createGitEnvironment } from '../../src/git/environment.js';
import { parseCheckRequest } from '../../src/protocol/request.js';
import { SSH_CONFIG_ENV, SSH_MUX_ENV } from '../../src/transport/ssh-config.js';
import { startSshMux } from '../../src/transport/ssh-mux.js';
import { runScript, SSH_PROGRAM } from '../helpers/run-script.js';
import { keepMoving } from '../helpers/steps.js';
import { startStoppable, waitForProcess } from '../helpers/stopping.js';
import { generateKey, startSshd, type KeyPair, type Sshd } from '../helpers/sshd.js';

let keysDir: string;
let key: KeyPair;
let sshd: Sshd;
let repo: LockRepo;

beforeAll(async () => {
  keysDir = await mkdtemp(join(tmpdir(), 'pool-keys-'));
  key = await generateKey(keysDir, 'client', { type: 'ed25519' });
  sshd = await startSshd([key.publicKey]);
  repo = await createLockRepo({ pool: { claimed: ['lock-a'] } });
});

afterAll(async () => {
  await sshd?.stop();
  await repo?.cleanup();
  await rm(keysDir, { recursive: true, force: true });
});

/** PIDs of our SSH program (node itself, not a shell around it) whose argv mentions `marker`. */
async function sshProcesses(marker: string): Promise<number[]> {
  const pids: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const argv = await readFile(`/proc/${name}/cmdline`, 'utf8').then(
      (text) => text.split('\0'),
      () => [],
    );
    if (
      argv[0] === process.execPath &&
      argv[1] === SSH_PROGRAM &&
      argv.some((a) => a.includes(marker))
    )
      pids.push(Number(name));
  }
  return pids;
}

/**
 * Runs our SSH program as git would (under a shell that stays its parent) with `env`, then kills
 * that parent once the remote command answered: the program must be gone within 2 s.
 */
async function expectGoneWithGit(env: NodeJS.ProcessEnv, name: string): Promise<void> {
  const marker = `${name}-${Date.now()}`;
  // `; true` keeps sh as the parent (no exec), like git waiting for its SSH command.
  const parent = spawn(
    'sh',
    [
      '-c',
      `"${process.execPath}" "${SSH_PROGRAM}" -p ${sshd.port} ${sshd.user}@127.0.0.1 "git-upload-pack '${repo.bare}' # ${marker}"; true`,
    ],
    { stdio: ['pipe', 'pipe', 'pipe'], env },
  );
  // upload-pack's advertisement arrives once the session is up; then git "dies".
  await new Promise<void>((r) => parent.stdout.once('data', () => r()));
  expect(await sshProcesses(marker)).toHaveLength(1);
  parent.kill('SIGKILL');
  expect(await eventually(async () => (await sshProcesses(marker)).length === 0, 2000)).toBe(true);
  parent.stdin.destroy();
}

/** `git ls-remote` of the repository over SSH, its SSH program relaying to the mux at `socket`. */
function lsRemoteThrough(socket: string): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve) => {
    const child = spawn('git', ['ls-remote', sshd.url(repo.bare)], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        POOL_RESOURCE_SSH_MUX: socket,
        GIT_SSH_COMMAND: `"${process.execPath}" "${SSH_PROGRAM}"`,
        GIT_SSH_VARIANT: 'ssh',
      },
    });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.on('close', (code) => resolve({ code, stdout }));
  });
}

describe('the SSH program', () => {
  it('gives up on a server that accepts but never speaks, within half of git_timeout', async () => {
    const sockets: Socket[] = [];
    const silent: Server = createServer((socket) => sockets.push(socket));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const address = silent.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    try {
      const started = Date.now();
      const result = await runScript('check', {
        source: {
          uri: `ssh://git@127.0.0.1:${port}/locks.git`,
          branch: 'master',
          pool: 'pool',
          private_key: key.privateKey,
          git_timeout: '4s',
        },
      });
      const took = Date.now() - started;
      expect(result.code).toBe(1);
      expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
      expect(result.stderr).toMatch(/ssh: no SSH handshake with \[127\.0\.0\.1\]:\d+ within 2s/);
      // check makes at most two connections (fetch, then ls-remote to tell a missing branch).
      expect(took).toBeGreaterThanOrEqual(2000);
      expect(took).toBeLessThan(6000);
    } finally {
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });

  it('exits when git (its parent) dies, even with its pipes still open', async () => {
    const config = { privateKey: key.privateKey, forwardAgent: false, connectTimeoutMs: 10_000 };
    await expectGoneWithGit(
      { ...process.env, POOL_RESOURCE_SSH_CONFIG: JSON.stringify(config) },
      'orphan',
    );
  });

  it("relaying to the run's connection, exits when git dies, and the connection serves the next command", async () => {
    const muxDir = await mkdtemp(join(tmpdir(), 'pool-mux-'));
    const mux = await startSshMux(join(muxDir, 'ssh.sock'), {
      privateKey: key.privateKey,
      forwardAgent: false,
      connectTimeoutMs: 10_000,
    });
    try {
      expect(mux).toBeDefined();
      const env = { ...process.env, POOL_RESOURCE_SSH_MUX: mux!.path };
      const seen = sshd.log().length;
      const logins = () =>
        sshd
          .log()
          .slice(seen)
          .match(/Accepted publickey for /g)?.length ?? 0;
      await expectGoneWithGit(env, 'relay-orphan');

      // The next command runs on the same connection: git ls-remote through the relay.
      const listed = await lsRemoteThrough(mux!.path);
      expect(listed.code).toBe(0);
      expect(listed.stdout).toMatch(/refs\/heads\/master/);
      expect(logins()).toBe(1);
    } finally {
      mux?.close();
      await rm(muxDir, { recursive: true, force: true });
    }
  });

  it('closes a shared connection left unused, and the next command opens a new one', async () => {
    const muxDir = await mkdtemp(join(tmpdir(), 'pool-mux-'));
    const mux = await startSshMux(
      join(muxDir, 'ssh.sock'),
      { privateKey: key.privateKey, forwardAgent: false, connectTimeoutMs: 10_000 },
      { idleMs: 300 },
    );
    try {
      const seen = sshd.log().length;
      const count = (pattern: RegExp) => sshd.log().slice(seen).match(pattern)?.length ?? 0;
      const listed = await lsRemoteThrough(mux!.path);
      expect(listed.code).toBe(0);
      expect(
        await eventually(
          async () => count(/Closing connection to |Connection reset by /g) === 1,
          3000,
        ),
      ).toBe(true);
      expect((await lsRemoteThrough(mux!.path)).code).toBe(0);
      expect(count(/Accepted publickey for /g)).toBe(2);
    } finally {
      mux?.close();
      await rm(muxDir, { recursive: true, force: true });
    }
  });

  it('a put stopped while its fetch runs on a channel of its SSH connection exits within a second, leaving no process', async () => {
    // A put that wants only some locks waits outside the line, and once a look on its
    // connection saw the branch move, git fetches it over fd::3 (a put in line fetches a moved
    // tip itself).
    const run = await sshPut({ acquire: true, match_name: 'lock-*' });
    const stopMoving = keepMoving(repo);
    try {
      await run.waitForStderr(/waiting for lock/i);
      // Stop it while it fetches.
      await waitForProcess(run, /^git fetch .*fd::3/);
      await stopsCleanly(run);
      // It claimed nothing, and left nothing in the waiting line.
      expect(await repo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });
      expect(
        await git(repo.bare, 'for-each-ref', '--format=%(refname)', 'refs/pool-resource/'),
      ).toBe('');
    } finally {
      await stopMoving();
      await run.cleanup();
    }
  });
});

/** Stops `run` with SIGTERM: it exits 143 within a second and a half, leaving no process. */
async function stopsCleanly(run: Awaited<ReturnType<typeof startStoppable>>) {
  const stoppedAt = Date.now();
  run.child.kill('SIGTERM');
  const result = await run.done;
  expect(result.code).toBe(143);
  expect(Date.now() - stoppedAt).toBeLessThan(1500);
  expect(await eventually(async () => (await run.leftovers()).length === 0, 1000)).toBe(true);
  return result;
}

/** A put over sshd with `params`, polling every 200 ms, to be stopped. */
async function sshPut(params: Record<string, unknown>) {
  const source = {
    uri: sshd.url(repo.bare),
    branch: repo.branch,
    pool: 'pool',
    private_key: key.privateKey,
    retry_delay: '200ms',
  };
  return startStoppable('out', { source, params }, [await mkdtemp(join(repo.root, 'src-'))]);
}

describe('a put in line over SSH', () => {
  it('stopped while it asks its connection for the tips it saw move, exits within a second, leaving no process', async () => {
    const run = await sshPut({ acquire: true });
    const stopMoving = keepMoving(repo, 50);
    try {
      await run.waitForStderr(/waiting in line/i);
      // Among its looks and its fetches of the moves, made without git.
      await sleep(400);
      const result = await stopsCleanly(run);
      await stopMoving();
      expect(await repo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });
      // It took itself out of the waiting line; or, when the stop's second ran out first (a
      // loaded machine), it says so, and the puts behind it pass its entry once it is stale.
      const line = await git(
        repo.bare,
        'for-each-ref',
        '--format=%(refname)',
        'refs/pool-resource/',
      );
      if (line !== '')
        expect(result.stderr).toMatch(
          /could not take this put out of the waiting line .*: the puts behind it will, after /,
        );
    } finally {
      await stopMoving();
      await run.cleanup();
    }
  });
});

describe('the shared SSH connections', () => {
  /** A run's git environment for `uri`, with `gitConfig`; what it says about SSH. */
  async function sshOf(uri: string, gitConfig: { name: string; value: string }[] = []) {
    const { source } = (
      await parseCheckRequest(
        JSON.stringify({ source: { uri, branch: 'master', pool: 'pool', git_config: gitConfig } }),
      )
    ).request;
    const environment = await createGitEnvironment(source, { PATH: process.env.PATH });
    try {
      return {
        shared: environment.mux !== undefined && environment.env[SSH_MUX_ENV] !== undefined,
        settingsInEnv: environment.env[SSH_CONFIG_ENV] !== undefined,
      };
    } finally {
      await environment.dispose();
    }
  }

  it('are set up only where git may go over SSH', async () => {
    for (const uri of ['ssh://git@host/locks.git', 'git@host:locks.git'])
      expect(await sshOf(uri)).toEqual({ shared: true, settingsInEnv: false });
    // No SSH there: no socket listening, and no SSH settings in git's environment.
    for (const uri of ['https://host/locks.git', 'git://host/locks.git', '/srv/locks.git'])
      expect(await sshOf(uri)).toEqual({ shared: false, settingsInEnv: false });
    // A url.<base>.insteadOf may lead git to an SSH server.
    const insteadOf = [{ name: 'url.ssh://git@host/.insteadOf', value: 'https://host/' }];
    expect(await sshOf('https://host/locks.git', insteadOf)).toEqual({
      shared: true,
      settingsInEnv: false,
    });
  });
});
