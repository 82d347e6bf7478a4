// https_tunnel: SSH to a real sshd through an HTTP CONNECT proxy on 127.0.0.1, with and without
// proxy basic auth; refused proxy credentials fail with one line that never shows them.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startConnectProxy, type ConnectProxy } from '../helpers/connect-proxy.js';
import { createLockRepo, type LockRepo } from '../helpers/lock-repo.js';
import {
  commitText,
  expectNoSecrets,
  expectOneLineFailure,
  runLockCycle,
} from '../helpers/lock-cycle.js';
import { freePort } from '../helpers/net.js';
import { runScript, type ScriptResult } from '../helpers/run-script.js';
import { generateKey, startSshd, type KeyPair, type Sshd } from '../helpers/sshd.js';
import { source as lockSource } from '../helpers/source.js';

const PROXY_USER = 'tunneller';
const PROXY_PASSWORD = 'proxy pass: $ecret "quoted"';

let keysDir: string;
let key: KeyPair;
let sshd: Sshd;
let open: ConnectProxy;
let guarded: ConnectProxy;
let repo: LockRepo;
const outputs: ScriptResult[] = [];

beforeAll(async () => {
  keysDir = await mkdtemp(join(tmpdir(), 'pool-keys-'));
  key = await generateKey(keysDir, 'client', { type: 'ed25519' });
  sshd = await startSshd([key.publicKey]);
  open = await startConnectProxy();
  guarded = await startConnectProxy({ user: PROXY_USER, password: PROXY_PASSWORD });
  repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
});

afterAll(async () => {
  await open?.stop();
  await guarded?.stop();
  await sshd?.stop();
  await repo?.cleanup();
  await rm(keysDir, { recursive: true, force: true });
});

const source = (tunnel: Record<string, unknown>) =>
  lockSource(sshd.url(repo.bare), {
    private_key: key.privateKey,
    known_hosts: sshd.knownHostsLine,
    https_tunnel: tunnel,
  });

describe('https_tunnel', () => {
  it('tunnels through a proxy without auth', async () => {
    const before = open.tunnels.length;
    await runLockCycle(source({ proxy_host: '127.0.0.1', proxy_port: open.port }), repo, {
      outputs,
    });
    const used = open.tunnels.slice(before);
    expect(used.length).toBeGreaterThanOrEqual(4);
    expect(used.every((t) => t.allowed && t.target === `127.0.0.1:${sshd.port}`)).toBe(true);
  });

  it('tunnels through a proxy that requires basic auth', async () => {
    const before = guarded.tunnels.length;
    await runLockCycle(
      source({
        proxy_host: '127.0.0.1',
        proxy_port: String(guarded.port),
        proxy_user: PROXY_USER,
        proxy_password: PROXY_PASSWORD,
      }),
      repo,
      { outputs },
    );
    expect(guarded.tunnels.slice(before).every((t) => t.allowed)).toBe(true);
  });

  it('refused proxy credentials fail at once with one line', async () => {
    for (const tunnel of [{ proxy_user: PROXY_USER, proxy_password: 'wrong proxy password' }, {}]) {
      const started = Date.now();
      const result = await runScript('check', {
        source: source({ proxy_host: '127.0.0.1', proxy_port: guarded.port, ...tunnel }),
      });
      outputs.push(result);
      expectOneLineFailure(
        result,
        /^error: git fetch cannot use the lock repository: ssh: proxy 127\.0\.0\.1:\d+ refused the tunnel to 127\.0\.0\.1:\d+ \(407 Proxy Authentication Required\): check https_tunnel\.proxy_user and https_tunnel\.proxy_password$/,
      );
      expect(Date.now() - started).toBeLessThan(10_000);
    }
  });

  it('a proxy nobody listens on', async () => {
    const result = await runScript('check', {
      source: source({ proxy_host: '127.0.0.1', proxy_port: await freePort() }),
    });
    outputs.push(result);
    expectOneLineFailure(result, /ssh: cannot reach proxy 127\.0\.0\.1:\d+: ECONNREFUSED/);
  });

  it('never shows the proxy password', async () => {
    expect(outputs.length).toBeGreaterThan(8);
    expectNoSecrets(
      [...outputs, await commitText(repo)],
      [
        PROXY_PASSWORD,
        'wrong proxy password',
        Buffer.from(`${PROXY_USER}:${PROXY_PASSWORD}`).toString('base64'),
        key.privateKey,
      ],
    );
  });
});
