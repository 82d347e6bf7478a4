// A put waiting on an SSH lock repository looks at the refs on the run's shared connection: one
// upload-pack asked protocol v2's ls-refs for the branch and the line, no git and no SSH program
// started. Against OpenSSH's sshd on 127.0.0.1, with and without GIT_PROTOCOL accepted.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { sshRefsFor, uploadPackInvocation } from '../../src/git/ssh-refs.js';
import { startSshMux, type SshMux } from '../../src/transport/ssh-mux.js';
import { createLockRepo, type LockRepo } from '../helpers/lock-repo.js';
import { LINE_ENTRY, LOOKED, sha256Repository, withHostedRefs } from '../helpers/looked-refs.js';
import { generateKey, startSshd, type KeyPair, type Sshd } from '../helpers/sshd.js';

let keysDir: string;
let key: KeyPair;
let repo: LockRepo;
let muxDir: string;
let mux: SshMux | undefined;
/** Where the line's one entry points: the first tip. */
let lineTip: string;

beforeAll(async () => {
  keysDir = await mkdtemp(join(tmpdir(), 'pool-keys-'));
  key = await generateKey(keysDir, 'client', { type: 'ed25519' });
  repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
  // A hosted repository advertises a pair of refs per pull request.
  lineTip = await withHostedRefs(repo, 300);
});

afterAll(async () => {
  await repo?.cleanup();
  await rm(keysDir, { recursive: true, force: true });
});

let sshd: Sshd | undefined;
afterEach(async () => {
  mux?.close();
  mux = undefined;
  await sshd?.stop();
  sshd = undefined;
  if (muxDir) await rm(muxDir, { recursive: true, force: true });
});

/**
 * Looks at `path` (the lock repository by default) over a fresh mux to an sshd with
 * `extraConfig`, for a run whose stop is `signal`; counts the logins the server saw.
 */
async function looks(
  extraConfig: string[] = [],
  { path = repo.bare, signal = new AbortController().signal } = {},
) {
  sshd = await startSshd([key.publicKey], extraConfig);
  muxDir = await mkdtemp(join(tmpdir(), 'pool-mux-'));
  mux = await startSshMux(join(muxDir, 'ssh.sock'), {
    privateKey: key.privateKey,
    forwardAgent: false,
    connectTimeoutMs: 10_000,
  });
  const refs = sshRefsFor(mux, { uri: sshd.url(path), gitTimeoutMs: 60_000 }, signal)!;
  const server = sshd;
  const logins = () => server.log().match(/Accepted publickey for /g)?.length ?? 0;
  return { refs, logins };
}

describe('SSH looks', () => {
  it('asks only the branch and the line, again and again on one login, and sees every change', async () => {
    const { refs, logins } = await looks();
    const expected = async () => [
      { id: await repo.tip(), ref: 'refs/heads/master' },
      { id: lineTip, ref: LINE_ENTRY },
    ];
    for (let i = 0; i < 3; i++) expect(await refs.listRefs(LOOKED)).toEqual(await expected());
    await repo.commit('unclaiming: nothing', async () => undefined);
    expect(await refs.listRefs(LOOKED)).toEqual(await expected());
    expect(refs.usable).toBe(true);
    expect(logins()).toBe(1);
  });

  it('a server that does not take GIT_PROTOCOL: its v0 advertisement, read the same', async () => {
    // SetEnv wins over what the client sends: upload-pack sees protocol v0.
    const { refs, logins } = await looks(['SetEnv GIT_PROTOCOL=version=0']);
    for (let i = 0; i < 3; i++)
      expect(await refs.listRefs(LOOKED)).toEqual([
        { id: await repo.tip(), ref: 'refs/heads/master' },
        { id: lineTip, ref: LINE_ENTRY },
      ]);
    expect(logins()).toBe(1);
  });

  it('a stop ends a look in flight at once', async () => {
    // Every command hangs: the look is in flight when the run stops.
    const run = new AbortController();
    const { refs, logins } = await looks(['ForceCommand sleep 30'], { signal: run.signal });
    const look = refs.listRefs(LOOKED);
    await vi.waitFor(() => expect(logins()).toBe(1), 5_000);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const stopped = Date.now();
    run.abort();
    await expect(look).rejects.toThrow();
    expect(Date.now() - stopped).toBeLessThan(500);
    expect(refs.usable).toBe(false);
  });

  it('an answer that never ends is cut at 16 MiB: the looks end for the run, and git is asked', async () => {
    // `yes` writes forever: without a bound, the look would keep it all in memory.
    const { refs, logins } = await looks(['ForceCommand yes']);
    await expect(refs.listRefs(LOOKED)).rejects.toThrow(/the answer is over 16777216 bytes/);
    expect(refs.usable).toBe(false);
    expect(logins()).toBe(1);
  }, 30_000);

  it('a sha256 repository: the first look learns its object format and asks again in it', async () => {
    const { bare, tip } = await sha256Repository(repo.root);
    const { refs, logins } = await looks([], { path: bare });
    for (let i = 0; i < 3; i++)
      expect(await refs.listRefs(LOOKED)).toEqual([{ id: tip, ref: 'refs/heads/master' }]);
    expect(tip).toMatch(/^[0-9a-f]{64}$/);
    expect(refs.usable).toBe(true);
    expect(logins()).toBe(1);
  });

  it('a repository that is not there: the looks end for the run, and git is asked', async () => {
    const { refs } = await looks([], { path: join(repo.root, 'missing.git') });
    await expect(refs.listRefs(LOOKED)).rejects.toThrow(/no refs/);
    expect(refs.usable).toBe(false);
  });

  it('spells the upload-pack command as git does', () => {
    expect(uploadPackInvocation('ssh://git@host:2222/srv/locks.git')).toEqual({
      user: 'git',
      host: 'host',
      port: 2222,
      command: "git-upload-pack '/srv/locks.git'",
      sendEnv: ['GIT_PROTOCOL'],
    });
    expect(uploadPackInvocation('git@github.com:org/lo!cks.git')).toMatchObject({
      user: 'git',
      host: 'github.com',
      port: 22,
      command: "git-upload-pack 'org/lo'\\!'cks.git'",
    });
    expect(uploadPackInvocation("ssh://[::1]/~user/it's.git")).toMatchObject({
      host: '::1',
      command: "git-upload-pack '~user/it'\\''s.git'",
    });
    for (const uri of ['https://host/locks.git', 'git://host/locks.git', '/srv/locks.git'])
      expect(uploadPackInvocation(uri)).toBeUndefined();
  });
});
