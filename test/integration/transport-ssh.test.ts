// SSH lock repositories through a real OpenSSH sshd on 127.0.0.1: keys in every accepted format,
// private_key_user, known_hosts pinning, agent forwarding, and clean one-line failures.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile, chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gitShim, realGit } from '../helpers/git-shim.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import {
  commitText,
  expectNoSecrets,
  expectOneLineFailure,
  runLockCycle,
} from '../helpers/lock-cycle.js';
import { runScript, startScript, tempDir, type ScriptResult } from '../helpers/run-script.js';
import { generateKey, startSshd, type KeyPair, type Sshd } from '../helpers/sshd.js';
import { renamed, source as lockSource } from '../helpers/source.js';
import { eventually } from '../helpers/eventually.js';

const exec = promisify(execFile);
const PASSPHRASE = 'correct horse $battery "staple"';

let keysDir: string;
let sshd: Sshd;
let repo: LockRepo;
let authorized: KeyPair;
let stranger: KeyPair;
let encrypted: KeyPair;
const outputs: ScriptResult[] = [];

beforeAll(async () => {
  keysDir = await mkdtemp(join(tmpdir(), 'pool-keys-'));
  authorized = await generateKey(keysDir, 'authorized', { type: 'ed25519' });
  stranger = await generateKey(keysDir, 'stranger', { type: 'ed25519' });
  encrypted = await generateKey(keysDir, 'encrypted', { type: 'ed25519', passphrase: PASSPHRASE });
  sshd = await startSshd([authorized.publicKey, encrypted.publicKey]);
  repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
});

afterAll(async () => {
  await sshd?.stop();
  await repo?.cleanup();
  await rm(keysDir, { recursive: true, force: true });
});

const source = (extra: Record<string, unknown> = {}) =>
  lockSource(sshd.url(repo.bare), {
    private_key: authorized.privateKey,
    // Pinned: without it, every run warns that it accepted the host key unchecked.
    known_hosts: sshd.knownHostsLine,
    ...extra,
  });

async function check(extra: Record<string, unknown>, env: Record<string, string> = {}) {
  const result = await runScript('check', { source: source(extra) }, { env });
  outputs.push(result);
  return result;
}

describe('ssh:// with private_key', () => {
  it('runs check, put acquire, get and put release, host key pinned by known_hosts', async () => {
    await runLockCycle(source({ known_hosts: sshd.knownHostsLine }), repo, { outputs });
  });

  it.each([
    ['OpenSSH Ed25519', { type: 'ed25519' }],
    ['OpenSSH ECDSA', { type: 'ecdsa' }],
    ['OpenSSH RSA', { type: 'rsa' }],
    ['PEM RSA', { type: 'rsa', format: 'PEM' }],
    ['PEM ECDSA', { type: 'ecdsa', format: 'PEM' }],
    ['PEM RSA with a passphrase', { type: 'rsa', format: 'PEM', passphrase: PASSPHRASE }],
  ] as const)('reads a %s key', async (name, options) => {
    const key = await generateKey(keysDir, name.replace(/\W+/g, '-'), options);
    await sshd.authorize([authorized.publicKey, encrypted.publicKey, key.publicKey]);
    const result = await check({
      private_key: key.privateKey,
      private_key_passphrase: 'passphrase' in options ? options.passphrase : undefined,
    });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });

  it('reads a key pasted without its trailing newline, with CRLF line ends or indented', async () => {
    for (const pasted of [
      authorized.privateKey.trimEnd(),
      authorized.privateKey.replace(/\n/g, '\r\n'),
      authorized.privateKey.replace(/^/gm, '  '),
    ]) {
      const result = await check({ private_key: pasted });
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
    }
  });

  it('decrypts an OpenSSH key with private_key_passphrase', async () => {
    const result = await check({
      private_key: encrypted.privateKey,
      private_key_passphrase: PASSPHRASE,
    });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });

  it('treats an empty private_key as absent', async () => {
    const result = await check({ private_key: '' });
    expectOneLineFailure(result, /authentication failed .*no private_key configured/);
  });

  it('logs in as private_key_user when the URI names no user', async () => {
    const uri = `ssh://127.0.0.1:${sshd.port}${repo.bare}`;
    const result = await check({ uri, private_key_user: sshd.user });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const wrongUser = await check({ uri, private_key_user: 'nobody-here' });
    expectOneLineFailure(wrongUser, /authentication failed for nobody-here@/);
  });
});

describe('ssh failures are one line, quick, and never retried', () => {
  it('a key the server does not accept', async () => {
    const started = Date.now();
    const result = await check({ private_key: stranger.privateKey });
    expectOneLineFailure(
      result,
      /^error: git fetch cannot use the lock repository: ssh: authentication failed for \w+@\[127\.0\.0\.1\]:\d+ \(private_key\)$/,
    );
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('a put with a refused key gives up at once instead of retrying', async () => {
    const before = await repo.tip();
    const result = await runScript(
      'out',
      { source: source({ private_key: stranger.privateKey }), params: { acquire: true } },
      { args: [await mkdtemp(join(repo.root, 'src-'))] },
    );
    outputs.push(result);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/authentication failed/);
    expect(result.stderr).not.toMatch(/retrying|attempt/i);
    expect(await repo.tip()).toBe(before);
  });

  it('an encrypted key without its passphrase, or with a wrong one, is refused before any git work', async () => {
    const missing = await check({ private_key: encrypted.privateKey });
    expectOneLineFailure(
      missing,
      /^invalid payload \(private_key is encrypted: set private_key_passphrase\)$/,
    );
    const wrong = await check({
      private_key: encrypted.privateKey,
      private_key_passphrase: 'not it at all',
    });
    expectOneLineFailure(
      wrong,
      /^invalid payload \(private_key_passphrase does not decrypt private_key\)$/,
    );
    const junk = await check({ private_key: 'not a key' });
    expectOneLineFailure(junk, /^invalid payload \(private_key is not an OpenSSH or PEM/);
  });

  it('a host key that does not match the pinned one', async () => {
    const other = await generateKey(keysDir, 'other-host', { type: 'ed25519' });
    const [type, blob] = other.publicKey.split(' ');
    const result = await check({ known_hosts: `[127.0.0.1]:${sshd.port} ${type} ${blob}` });
    expectOneLineFailure(
      result,
      /ssh: host key of \[127\.0\.0\.1\]:\d+ does not match known_hosts \(server offered ssh-ed25519 SHA256:/,
    );
  });

  it('a known_hosts without a line for this host', async () => {
    const line = sshd.knownHostsLine.replace(/^\S+/, 'github.com');
    const result = await check({ known_hosts: line });
    expectOneLineFailure(result, /known_hosts has no line for \[127\.0\.0\.1\]:\d+/);
  });

  it('a host pattern of thousands of stars neither freezes the run nor keeps it from stopping', async () => {
    const [, type, blob] = sshd.knownHostsLine.split(' ');
    const known_hosts = `${'*'.repeat(10_000)}x ${type} ${blob}\n${sshd.knownHostsLine}\n`;
    const running = startScript('check', { source: source({ known_hosts }) });
    const finished = await Promise.race([
      running.done,
      new Promise<undefined>((resolve) => setTimeout(resolve, 10_000, undefined)),
    ]);
    if (finished === undefined) {
      // Still running: it must at least answer SIGTERM as any run does.
      running.child.kill('SIGTERM');
      const stopped = await Promise.race([
        running.done,
        new Promise<undefined>((resolve) => setTimeout(resolve, 1_000, undefined)),
      ]);
      if (!stopped) running.child.kill('SIGKILL');
      expect.fail(`check did not finish in 10 s, and ${stopped ? 'stopped' : 'ignored SIGTERM'}`);
    }
    expect(finished.code, finished.stderr).toBe(0);
    expect(JSON.parse(finished.stdout)).toHaveLength(1);
  });

  it('known_hosts that is not in known_hosts format', async () => {
    const result = await check({ known_hosts: 'just some text' });
    expectOneLineFailure(
      result,
      /^invalid payload \(known_hosts: line 1 is not "HOSTS KEYTYPE KEY"/,
    );
  });

  it('a port nobody listens on', async () => {
    const { createServer } = await import('node:net');
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    await new Promise((resolve) => server.close(resolve));
    const result = await check({ uri: `ssh://${sshd.user}@127.0.0.1:${port}${repo.bare}` });
    expectOneLineFailure(result, /ssh: cannot connect to \[127\.0\.0\.1\]:\d+: ECONNREFUSED/);
  });
});

describe('forward_agent', () => {
  let agent: ChildProcess | undefined;
  afterAll(() => {
    agent?.kill();
  });

  it('serves the configured key to the server through the forwarded agent', async () => {
    // This key's authorized_keys line runs a script that uses the forwarded agent (as a jump
    // host would: list its keys and sign with ours), then runs git's command.
    const jumper = await generateKey(keysDir, 'jumper', { type: 'ed25519' });
    const report = join(keysDir, 'agent-report');
    const script = join(keysDir, 'jump.sh');
    await writeFile(
      script,
      [
        '#!/bin/sh',
        `ssh-add -L > '${report}' 2>&1`,
        `ssh-add -T '${jumper.path}.pub' >> '${report}' 2>&1 && echo signed >> '${report}'`,
        'exec sh -c "$SSH_ORIGINAL_COMMAND"',
        '',
      ].join('\n'),
    );
    await chmod(script, 0o755);
    await sshd.authorize([authorized.publicKey, `command="${script}" ${jumper.publicKey}`]);
    try {
      const result = await check({ private_key: jumper.privateKey, forward_agent: true });
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      const seen = await readFile(report, 'utf8');
      expect(seen).toContain(jumper.publicKey.split(' ')[1]);
      expect(seen).toContain('signed');

      // Without forward_agent, the server sees no agent.
      await rm(report);
      expect((await check({ private_key: jumper.privateKey })).code).toBe(0);
      expect(await readFile(report, 'utf8')).not.toContain('signed');
    } finally {
      await sshd.authorize([authorized.publicKey, encrypted.publicKey]);
    }
  });

  it('carries on without forwarding when the server refuses it', async () => {
    await sshd.authorize([`no-agent-forwarding ${authorized.publicKey}`]);
    try {
      const result = await check({ forward_agent: true });
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
    } finally {
      await sshd.authorize([authorized.publicKey, encrypted.publicKey]);
    }
  });

  it('uses the agent at SSH_AUTH_SOCK when no private_key is configured', async () => {
    const socket = join(keysDir, 'agent.sock');
    agent = spawn('ssh-agent', ['-D', '-a', socket], { stdio: 'ignore' });
    await eventually(async () => (await readdir(keysDir)).includes('agent.sock'), 5_000);
    await exec('ssh-add', [authorized.path], { env: { ...process.env, SSH_AUTH_SOCK: socket } });
    const result = await check(
      { private_key: undefined, forward_agent: true },
      { SSH_AUTH_SOCK: socket },
    );
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });
});

describe('a lost race over SSH', () => {
  // git turns down a push whose branch moved since its fetch by itself, and says so on its stderr
  // once the connection is over: through git's SSH program, that line must not find git's stderr
  // shut by the program's exit.
  it.each([
    ['on a channel of the run’s connection', false],
    ['through git’s SSH program (a url.<base>.insteadOf)', true],
  ])(
    'a push git turns down itself (the branch moved since the fetch) is a lost race, taken again from the new state: %s',
    async (_how, rewritten) => {
      const moved = await createLockRepo({ pool: { unclaimed: ['lock-a', 'lock-b'] } });
      const shim = await gitShim({
        beforeFirst: {
          command: 'push',
          script: `'${realGit}' -C '${moved.bare}' update-ref refs/heads/${moved.branch} "$(cat '${moved.root}/other')"`,
        },
      });
      try {
        const initial = await moved.tip();
        const other = await moved.commit('another build changed the pool', async () => undefined);
        await writeFile(join(moved.root, 'other'), other);
        await git(moved.bare, 'update-ref', `refs/heads/${moved.branch}`, initial);
        const url = sshd.url(moved.bare);
        const result = await runScript(
          'out',
          {
            source: lockSource(url, {
              private_key: authorized.privateKey,
              known_hosts: sshd.knownHostsLine,
              ...(rewritten ? renamed(url) : {}),
            }),
            params: { acquire: true },
          },
          { args: [await tempDir()], env: { PATH: shim.path } },
        );
        outputs.push(result);
        expect(result.stderr).toContain('the pool changed while taking');
        expect(result.stderr).not.toContain('git failed');
        expect(result.code).toBe(0);
        expect((await moved.subjects()).slice(0, 2)).toEqual([
          expect.stringMatching(/^claiming: lock-[ab]$/),
          'another build changed the pool',
        ]);
      } finally {
        await shim.cleanup();
        await moved.cleanup();
      }
    },
  );
});

describe('secrets', () => {
  it('no output of any run above shows a key, a passphrase or a key line', async () => {
    expect(outputs.length).toBeGreaterThan(10);
    expectNoSecrets(
      [...outputs, await commitText(repo)],
      [authorized.privateKey, stranger.privateKey, encrypted.privateKey, PASSPHRASE],
    );
  });

  it('leaves nothing behind in its temporary folder (the key file included)', async () => {
    const scratch = await mkdtemp(join(tmpdir(), 'pool-tmp-'));
    const ok = await runScript('check', { source: source() }, { tmpdir: scratch });
    const refused = await runScript(
      'check',
      { source: source({ private_key: stranger.privateKey }) },
      { tmpdir: scratch },
    );
    outputs.push(ok, refused);
    expect(ok.code).toBe(0);
    expect(refused.code).toBe(1);
    // Only check's cached copy of the branch stays (Concourse reuses check containers), and
    // nothing in it holds key material.
    expect(await readdir(scratch)).toEqual(['pool-resource-check']);
    const keyLine = source().private_key.split('\n')[1]!;
    for (const entry of await readdir(scratch, { recursive: true, withFileTypes: true })) {
      if (!entry.isFile()) continue;
      const text = await readFile(join(entry.parentPath, entry.name), 'latin1');
      expect(text.includes(keyLine), entry.name).toBe(false);
    }
    await rm(scratch, { recursive: true, force: true });
  });
});
