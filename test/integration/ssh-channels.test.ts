// git's clones, fetches and pushes to an SSH lock repository run on channels of the run's one SSH
// connection, handed to git as its descriptor 3 without git's SSH program
// (src/git/ssh-channel-command.ts), against a real OpenSSH sshd. A `git` first on PATH notes the
// arguments of each command the resource runs; sshd's log counts logins and commands.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { gitShim, type GitShim } from '../helpers/git-shim.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { runCommand } from '../helpers/run-command.js';
import { runScript, startScript } from '../helpers/run-script.js';
import { renamed, source } from '../helpers/source.js';
import { generateKey, startSshd, type KeyPair, type Sshd } from '../helpers/sshd.js';
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
let keysDir: string;
let key: KeyPair;
let sshd: Sshd;
let repo: LockRepo;

beforeAll(async () => {
  shim = await gitShim({ packets: true });
  keysDir = await mkdtemp(join(tmpdir(), 'pool-keys-'));
  key = await generateKey(keysDir, 'client', { type: 'ed25519' });
  sshd = await startSshd([key.publicKey]);
});

afterAll(async () => {
  await sshd?.stop();
  await shim.cleanup();
  await rm(keysDir, { recursive: true, force: true });
});

beforeEach(async () => {
  await shim.reset();
  repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
});

afterEach(async () => {
  await repo?.cleanup();
});

const env = () => ({ PATH: shim.path });

const sshSource = (extra: Record<string, unknown> = {}) =>
  source(repo, {
    uri: sshd.url(repo.bare),
    private_key: key.privateKey,
    known_hosts: sshd.knownHostsLine,
    ...extra,
  });

/** `out` run with the shim's git: an acquire, `extra` added to its source. */
async function acquire(extra: Record<string, unknown> = {}) {
  return runCommand('out', {
    stdin: { source: sshSource(extra), params: { acquire: true } },
    args: [await buildFolder()],
    env: env(),
  });
}

/** `out` run with the shim's git: the release of lock-a. */
async function release() {
  return runCommand('out', {
    stdin: { source: sshSource(), params: { release: 'lock' } },
    args: [await lockStep('lock-a')],
    env: env(),
  });
}

/** The commands that reached the server, each as its arguments. */
async function remoteCommands(): Promise<string[][]> {
  return (await shim.commands()).filter(
    ([name]) => name === 'clone' || name === 'fetch' || name === 'push',
  );
}

/** Logins and commands sshd has seen since this was called. */
function watchLog() {
  const from = sshd.log().length;
  const count = (pattern: RegExp) =>
    sshd.log().slice(from).match(new RegExp(pattern, 'g'))?.length ?? 0;
  return {
    logins: () => count(/Accepted publickey for /),
    commands: () => count(/Starting session: command /),
  };
}

describe('a put waiting over SSH', () => {
  it('looks and fetches each moved tip itself on the shared connection, and commits its claim there: git only pushes', async () => {
    const first = await otherClone(repo).claim('lock-a');
    const waiting = startScript(
      'out',
      { source: sshSource({ retry_delay: '200ms' }), params: { acquire: true } },
      { args: [await buildFolder()], env: env() },
    );
    await waiting.waitForStderr(/waiting in line/, 20_000);
    const seen = watchLog();
    // Two moves that free nothing (a claimed lock added each time), then the release.
    await movesThatFreeNothing(repo, waiting);
    await otherClone(repo).release('lock-a');
    const result = await waiting.done;
    expect(result.code, result.stderr).toBe(0);
    expect(await repo.state('pool')).toEqual({
      claimed: ['lock-a', 'lock-b', 'lock-c'],
      unclaimed: [],
    });
    // git fetched once, at the start (16 commits, the line with the branch); the moves were
    // asked on the run's one login by the run itself, and its claim committed by it: git listed
    // the pool at that first tip only, wrote no commit, and pushed the claim once.
    const commands = await shim.commands();
    const own = commands.filter(([name, ...args]) => name === 'fetch' && args.includes('fd::3'));
    expect(own).toHaveLength(1);
    expect(own[0]).toContain('--depth=16');
    const listed = commands.filter(([name]) => name === 'ls-tree').map((args) => args.at(-3));
    expect(new Set(listed)).toEqual(new Set([first]));
    expect(commands.filter(([name]) => name === 'fast-import' || name === 'show')).toEqual([]);
    const claims = commands.filter(
      ([name, ...args]) =>
        name === 'push' && args.some((arg) => arg.endsWith(':refs/heads/master')),
    );
    expect(claims).toHaveLength(1);
    // The looks and the fetches of the moves: upload-packs on that login, no new one.
    expect(seen.logins()).toBe(0);
    expect(seen.commands()).toBeGreaterThanOrEqual(3);
    await git(repo.bare, 'fsck', '--strict', '--no-dangling');
  });
});

describe('git on channels of the run’s SSH connection', () => {
  it('an acquire, its get and the release clone, fetch and push on channels, one login per run', async () => {
    const seen = watchLog();
    const acquired = succeeded(await acquire()) as { version: { ref: string } };
    succeeded(
      await runCommand('in', {
        stdin: { source: sshSource(), version: acquired.version },
        args: [await buildFolder()],
        env: env(),
      }),
    );
    succeeded(await release());
    const remote = await remoteCommands();
    expect(remote.map(([name]) => name)).toEqual(['fetch', 'push', 'clone', 'clone', 'push']);
    for (const args of remote) {
      expect(args).toContain('fd::3');
      expect(args).not.toContain(sshd.url(repo.bare));
    }
    expect(seen.logins()).toBe(3);
    expect(seen.commands()).toBe(5);
    expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a'] });
  });

  it('a push the server refuses names the uri, never the channel', async () => {
    await protectBranch(repo);
    const result = await acquire();
    refused(result, HOOK_REFUSAL);
    expect((await remoteCommands()).at(-1)).toContain('fd::3');
    expect(result.stderr).not.toContain('fd::');
  });

  it('says at once, in the server’s words, that there is no repository at the uri', async () => {
    const missing = sshd.url(join(repo.root, 'nothing.git'));
    const result = await acquire({ uri: missing });
    refused(result, /does not appear to be a git repository/);
    expect(result.stderr).not.toMatch(/trying again/);
    expect(result.stderr).not.toContain('fd::');
    expect((await remoteCommands())[0]).toContain('fd::3');
  });

  it('leaves the connection to git when git_config may send git elsewhere (url.<base>.insteadOf)', async () => {
    const other = renamed(sshd.url(repo.bare));
    succeeded(
      // The scripts themselves: git then runs the SSH program, which an in-process run has not.
      await runScript(
        'out',
        { source: sshSource(other), params: { acquire: true } },
        { args: [await buildFolder()], env: env() },
      ),
    );
    const remote = await remoteCommands();
    expect(remote.length).toBeGreaterThan(0);
    for (const args of remote) {
      expect(args).toContain(other.uri);
      expect(args).not.toContain('fd::3');
    }
  });

  it('asks upload-pack for protocol v2, as git does; a push speaks v0', async () => {
    succeeded(await acquire());
    const trace = await shim.trace();
    // The server's answer to a fetch starts with its v2 capabilities; to a push, with its refs.
    expect(trace).toMatch(/fetch< version 2$/m);
    expect(trace).toMatch(/fetch> command=ls-refs$/m);
    expect(trace).toMatch(/push< [0-9a-f]{40} refs\/heads\/master\\0report-status/m);
    expect(trace).not.toMatch(/push< version/m);
  });

  it('asks the protocol version git_config gives: v0 and v1 work as v2 does', async () => {
    for (const version of ['0', '1']) {
      await shim.reset();
      succeeded(await acquire({ git_config: [{ name: 'protocol.version', value: version }] }));
      succeeded(await release());
    }
    expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a'] });
  });
});
