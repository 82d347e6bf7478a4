// SSH host keys through a real OpenSSH sshd: a key accepted without known_hosts is said on stderr
// (one line per connection), and forward_agent without known_hosts is refused before connecting.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLockRepo, type LockRepo } from '../helpers/lock-repo.js';
import { expectOneLineFailure } from '../helpers/lock-cycle.js';
import { runScript, tempDir } from '../helpers/run-script.js';
import { generateKey, startSshd, type KeyPair, type Sshd } from '../helpers/sshd.js';
import { source as lockSource } from '../helpers/source.js';

let keysDir: string;
let sshd: Sshd;
let repo: LockRepo;
let key: KeyPair;

beforeAll(async () => {
  keysDir = await mkdtemp(join(tmpdir(), 'pool-keys-'));
  key = await generateKey(keysDir, 'authorized', { type: 'ed25519' });
  sshd = await startSshd([key.publicKey]);
  repo = await createLockRepo({ pool: { unclaimed: ['lock-a', 'lock-b'] } });
});

afterAll(async () => {
  await sshd?.stop();
  await repo?.cleanup();
  await rm(keysDir, { recursive: true, force: true });
});

const source = (extra: Record<string, unknown> = {}) =>
  lockSource(sshd.url(repo.bare), { private_key: key.privateKey, ...extra });

const UNCHECKED =
  /^warning: accepted the host key of \[127\.0\.0\.1\]:\d+ unchecked \(ssh-ed25519 SHA256:[A-Za-z0-9+/]+\): set known_hosts to pin it$/;

describe('a host key accepted unchecked', () => {
  it('is said in one line on stderr, once per connection however many git commands use it', async () => {
    const checked = await runScript('check', { source: source() });
    expect(checked.code, checked.stderr).toBe(0);
    const lines = checked.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(UNCHECKED);

    // An acquire lists, fetches and pushes: all on the run's one connection, one warning.
    const acquired = await runScript(
      'out',
      { source: source(), params: { acquire: true } },
      { args: [await tempDir()] },
    );
    expect(acquired.code, acquired.stderr).toBe(0);
    const warnings = acquired.stderr.split('\n').filter((line) => line.startsWith('warning:'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(UNCHECKED);
  });

  it('is not said when known_hosts pins the key', async () => {
    const checked = await runScript('check', {
      source: source({ known_hosts: sshd.knownHostsLine }),
    });
    expect(checked.code, checked.stderr).toBe(0);
    expect(checked.stderr).toBe('');
  });
});

describe('forward_agent', () => {
  it('without known_hosts is refused in one line naming both fields, before connecting', async () => {
    const connections = () =>
      sshd
        .log()
        .split('\n')
        .filter((line) => /Connection from/.test(line));
    const before = connections().length;
    const state = await repo.state('pool');
    const result = await runScript(
      'out',
      {
        source: source({ forward_agent: true }),
        params: { acquire: true },
      },
      { args: [await tempDir()] },
    );
    expectOneLineFailure(
      result,
      /^invalid payload \(forward_agent needs known_hosts: an unchecked host could use the forwarded key\)$/,
    );
    expect(connections().length).toBe(before);
    expect(await repo.state('pool')).toEqual(state);
  });

  it('with known_hosts works, without a warning', async () => {
    const result = await runScript('check', {
      source: source({ forward_agent: true, known_hosts: sshd.knownHostsLine }),
    });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toBe('');
  });
});
