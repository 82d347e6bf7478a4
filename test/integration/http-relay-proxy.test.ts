// Behind an HTTP proxy (the variables a Concourse worker passes on), a run still keeps one
// connection: a CONNECT tunnel for https, the proxy's own connection for http. Counted at a real
// proxy on 127.0.0.1 and at `git http-backend` behind basic auth.
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { startConnectProxy } from '../helpers/connect-proxy.js';
import {
  HTTP_PASSWORD as PASSWORD,
  HTTP_USER as USER,
  servedOverHttp,
} from '../helpers/http-git.js';
import { git, type LockRepo, type PoolSeed } from '../helpers/lock-repo.js';
import { freePort } from '../helpers/net.js';
import { runScript, startScript } from '../helpers/run-script.js';
import { source } from '../helpers/source.js';
import { scratchDir } from '../helpers/steps.js';
import {
  sleep,
  startSilentServer,
  startStoppable,
  stop,
  waitForProcess,
  type SilentServer,
  type StoppableRun,
} from '../helpers/stopping.js';

const PROXY_USER = 'proxied';
const PROXY_PASSWORD = 'proxy p@ss';

async function served(tls: boolean, proxyAuth = false, seed: PoolSeed = { unclaimed: ['lock-a'] }) {
  const { repo, server, uri } = await servedOverHttp(seed, { tls });
  const proxy = await startConnectProxy(
    proxyAuth ? { user: PROXY_USER, password: PROXY_PASSWORD } : undefined,
  );
  onTestFinished(() => proxy.stop());
  const src = source(uri, { username: USER, password: PASSWORD, skip_ssl_verification: tls });
  return { repo, server, proxy, uri, src };
}

/** An acquire with `env`, and the lock then claimed. */
async function acquire(src: unknown, env: Record<string, string>, lockRepo: LockRepo) {
  const result = await runScript(
    'out',
    { source: src, params: { acquire: true } },
    { args: [await scratchDir()], env },
  );
  expect(result.code, result.stderr).toBe(0);
  expect(await lockRepo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });
  return result;
}

describe('one connection per run behind an HTTP proxy', () => {
  it('https: one CONNECT tunnel for a whole acquire', async () => {
    const { repo: lockRepo, server: http, proxy: via, src } = await served(true);
    await acquire(src, { https_proxy: `http://127.0.0.1:${via.port}` }, lockRepo);
    // Without the relay, git opens a tunnel for its fetch and one for its push.
    expect(via.tunnels).toEqual([{ target: `127.0.0.1:${http.port}`, allowed: true }]);
    expect(http.connections()).toBe(1);
    expect(http.requests.length).toBeGreaterThanOrEqual(4);
  });

  it('http: every request on one connection to the proxy, naming the whole URL', async () => {
    const { repo: lockRepo, proxy: via, uri, src } = await served(false);
    await acquire(src, { http_proxy: `127.0.0.1:${via.port}` }, lockRepo);
    expect(via.connections()).toBe(1);
    expect(via.forwarded.length).toBeGreaterThanOrEqual(4);
    expect(via.forwarded.every(({ url, allowed }) => allowed && url.startsWith(`${uri}/`))).toBe(
      true,
    );
  });

  it('https: a put that waits, polls and claims in one tunnel', async () => {
    const { repo: lockRepo, proxy: via, src } = await served(true, false, { claimed: ['lock-a'] });
    const put = startScript(
      'out',
      { source: { ...src, retry_delay: '100ms' }, params: { acquire: true } },
      { args: [await scratchDir()], env: { https_proxy: `http://127.0.0.1:${via.port}` } },
    );
    await put.waitForStderr(/waiting in line/);
    await sleep(1_000);
    await lockRepo.commit('unclaiming: lock-a', (work) =>
      git(work, 'mv', 'pool/claimed/lock-a', 'pool/unclaimed/lock-a').then(() => undefined),
    );
    const done = await put.done;
    expect(done.code, done.stderr).toBe(0);
    expect(await lockRepo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });
    expect(via.tunnels).toHaveLength(1);
  });

  it('https: the proxy git_config names, before the variables', async () => {
    const { repo: lockRepo, proxy: via, src } = await served(true);
    const configured = {
      ...src,
      git_config: [{ name: 'http.proxy', value: `http://127.0.0.1:${via.port}` }],
    };
    await acquire(configured, { https_proxy: 'http://127.0.0.1:9' }, lockRepo);
    expect(via.tunnels).toHaveLength(1);
  });

  it('sends the credentials the proxy variable carries', async () => {
    const { repo: lockRepo, proxy: via, src } = await served(true, true);
    const user = encodeURIComponent(PROXY_USER);
    const password = encodeURIComponent(PROXY_PASSWORD);
    await acquire(
      src,
      { HTTPS_PROXY: `http://${user}:${password}@127.0.0.1:${via.port}` },
      lockRepo,
    );
    expect(via.tunnels).toHaveLength(1);
    expect(via.tunnels[0]!.allowed).toBe(true);
  });

  it.each([
    ['https', true, 'https_proxy'],
    ['http', false, 'http_proxy'],
  ] as const)(
    '%s: a proxy that refuses the run: git says why, naming the uri',
    async (_, tls, variable) => {
      const { proxy: via, uri, src } = await served(tls, true);
      const result = await runScript(
        'check',
        { source: src },
        { env: { [variable]: `http://127.0.0.1:${via.port}` } },
      );
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`unable to access '${uri}/'`);
      expect(result.stderr).toMatch(/407/);
      expect(result.stderr).not.toMatch(/127\.0\.0\.1:\d+\/relay/);
    },
  );

  it('no_proxy naming the server: straight to it, the proxy unused', async () => {
    const { repo: lockRepo, server: http, proxy: via, src } = await served(true);
    await acquire(
      src,
      { https_proxy: `http://127.0.0.1:${via.port}`, no_proxy: 'localhost,127.0.0.0/8' },
      lockRepo,
    );
    expect(via.connections()).toBe(0);
    expect(http.connections()).toBe(1);
  });
});

describe('a proxy that accepts connections and never answers', () => {
  let silent: SilentServer | undefined;
  let run: StoppableRun | undefined;
  afterEach(async () => {
    await run?.cleanup();
    run = undefined;
    await silent?.close();
    silent = undefined;
  });

  async function startCheck(gitTimeout?: string) {
    silent = await startSilentServer();
    const uri = `https://127.0.0.1:${await freePort()}/locks.git`;
    run = await startStoppable(
      'check',
      {
        source: source(uri, {
          username: USER,
          password: PASSWORD,
          ...(gitTimeout ? { git_timeout: gitTimeout } : {}),
        }),
      },
      [],
      { https_proxy: `http://127.0.0.1:${silent.port}` },
    );
    await waitForProcess(run, /git.* (fetch|clone|ls-remote)/);
    return run;
  }

  it('SIGTERM ends the step within 1 s, with nothing left running', async () => {
    const started = await startCheck();
    await sleep(300);
    const stopped = await stop(started, 'SIGTERM');
    expect(stopped.code).toBe(143);
    expect(stopped.exitAfterSignal).toBeLessThan(1000);
    expect(stopped.eofAfterSignal).toBeLessThan(1000);
    expect(await started.leftovers()).toEqual([]);
  });

  it('git_timeout still bounds the step: the tunnel being opened does not hold it', async () => {
    const started = await startCheck('1s');
    const result = await started.done;
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/git_timeout/);
    expect(result.exitMs).toBeLessThan(10_000);
  });
});
