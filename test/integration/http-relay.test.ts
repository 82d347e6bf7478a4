// Over HTTP(S) a run keeps one connection to the server for all its git commands and looks, as
// over SSH it keeps one login: counted at the server, `git http-backend` behind basic auth.
import { execFile as execFileCallback } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { classifyPush } from '../../src/git/push-outcome.js';
import { startHttpRelay, type HttpRelay } from '../../src/transport/http-relay.js';
import {
  HTTP_PASSWORD as PASSWORD,
  HTTP_USER as USER,
  servedOverHttp,
  type HttpGitOptions,
  type HttpGitServer,
} from '../helpers/http-git.js';
import { GIT_TEST_ENV, git } from '../helpers/lock-repo.js';
import { runScript, startScript, type ScriptResult } from '../helpers/run-script.js';
import { source } from '../helpers/source.js';
import { freePort } from '../helpers/net.js';
import { escape, scratchDir } from '../helpers/steps.js';

const execFile = promisify(execFileCallback);

let relay: HttpRelay | undefined;
afterEach(() => {
  relay?.close();
  relay = undefined;
});

const served = servedOverHttp;

const credentials = { username: USER, password: PASSWORD };

/** A script's result, with the TCP connections and requests the server saw while it ran. */
async function counted(http: HttpGitServer, run: () => Promise<ScriptResult>) {
  const connections = http.connections();
  const requests = http.requests.length;
  const result = await run();
  expect(result.code, result.stderr).toBe(0);
  return {
    result,
    connections: http.connections() - connections,
    requests: http.requests.length - requests,
  };
}

async function releaseStep(name: string) {
  const step = await scratchDir();
  await mkdir(join(step, 'lock'));
  await writeFile(join(step, 'lock', 'name'), `${name}\n`);
  return step;
}

describe('one connection per run over HTTP(S)', () => {
  it.each([false, true])(
    'TLS %s: an acquire, its get, a check and the release each open one connection to the server',
    async (tls) => {
      const {
        repo: lockRepo,
        server: http,
        uri,
      } = await served({ unclaimed: ['lock-a'] }, { tls });
      const src = source(uri, { ...credentials, skip_ssl_verification: tls });
      const acquired = await counted(http, async () =>
        runScript(
          'out',
          { source: src, params: { acquire: true } },
          { args: [await scratchDir()] },
        ),
      );
      // A fetch and a push: two requests each, four connections without the relay.
      expect(acquired.requests).toBeGreaterThanOrEqual(4);
      expect(acquired.connections).toBe(1);
      const version = JSON.parse(acquired.result.stdout).version;
      const fetched = await counted(http, async () =>
        runScript('in', { source: src, version }, { args: [await scratchDir()] }),
      );
      expect(fetched.connections).toBe(1);
      const checked = await counted(http, () => runScript('check', { source: src }));
      expect(checked.connections).toBe(1);
      const released = await counted(http, async () =>
        runScript(
          'out',
          { source: src, params: { release: 'lock' } },
          { args: [await releaseStep('lock-a')] },
        ),
      );
      expect(released.connections).toBe(1);
      expect(await lockRepo.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a'] });
    },
  );

  /**
   * A put that waits 1.5 s for lock-a, which is then released; how many connections the server
   * saw meanwhile, and the requests.
   */
  async function waitForLock(retryDelay: string, options: Partial<HttpGitOptions> = {}) {
    const { repo: lockRepo, server: http, uri } = await served({ claimed: ['lock-a'] }, options);
    const before = http.connections();
    const requests = http.requests.length;
    const put = startScript(
      'out',
      {
        source: source(uri, { ...credentials, retry_delay: retryDelay }),
        params: { acquire: true },
      },
      { args: [await scratchDir()] },
    );
    await put.waitForStderr(/waiting in line/);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await lockRepo.commit('unclaiming: lock-a', (work) =>
      git(work, 'mv', 'pool/claimed/lock-a', 'pool/unclaimed/lock-a').then(() => undefined),
    );
    const done = await put.done;
    expect(done.code, done.stderr).toBe(0);
    expect(await lockRepo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });
    return { connections: http.connections() - before, requests: http.requests.slice(requests) };
  }

  it('a put that waits joins, looks, names the holder and claims on one connection', async () => {
    const { connections, requests } = await waitForLock('100ms');
    expect(connections).toBe(1);
    // Its fetches (the first one, the holder lookup's, the claim's) asked upload-pack's
    // capabilities once: they do not change.
    const fetches = requests.filter(
      ({ method, path }) => method === 'POST' && path.endsWith('/git-upload-pack'),
    );
    expect(fetches.length).toBeGreaterThanOrEqual(6);
    const asked = requests.filter(
      ({ method, protocol }) => method === 'GET' && protocol === 'version=2',
    );
    expect(asked).toHaveLength(1);
  });

  it("a put in line pushes its claim without asking for receive-pack's refs: its join brought the server's capabilities", async () => {
    const { requests } = await waitForLock('100ms');
    const pushes = requests.filter(
      ({ method, path }) => method === 'POST' && path.endsWith('/git-receive-pack'),
    );
    const asked = requests.filter(
      ({ method, service }) => method === 'GET' && service === 'git-receive-pack',
    );
    // The join, then the claim that takes the entry out with it.
    expect(pushes).toHaveLength(2);
    expect(asked).toHaveLength(1);
  });

  it('a server that closes idle connections soon: the put opens new ones and still claims', async () => {
    const { connections } = await waitForLock('300ms', { keepAliveTimeoutMs: 50 });
    expect(connections).toBeGreaterThan(2);
  });

  it('a redirect is left to git, which follows it on its own', async () => {
    const {
      repo: lockRepo,
      server: http,
      uri,
    } = await served(
      { unclaimed: ['lock-a'] },
      { redirect: { from: '/moved.git', to: '/locks.git' } },
    );
    expect(uri).toMatch(/\/locks\.git$/);
    const moved = uri.replace(/locks\.git$/, 'moved.git');
    const acquired = await counted(http, async () =>
      runScript(
        'out',
        { source: source(moved, credentials), params: { acquire: true } },
        { args: [await scratchDir()] },
      ),
    );
    expect(acquired.result.stderr).toMatch(/acquired/);
    expect(await lockRepo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });
    expect(http.requests.some(({ path }) => path.startsWith('/moved.git/'))).toBe(true);
  });

  it('a certificate nobody trusts is reported in git words, with the uri the request names', async () => {
    const { uri } = await served({ unclaimed: ['lock-a'] }, { tls: true });
    const result = await runScript('check', { source: source(uri, credentials) });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`unable to access '${uri}/'`);
    expect(result.stderr).toMatch(/\(set skip_ssl_verification: true to accept it\)$/m);
  });

  it("an authority git trusts through git_config's http.sslCAInfo: the relay trusts it too", async () => {
    const {
      repo: lockRepo,
      server: http,
      uri,
    } = await served({ unclaimed: ['lock-a'] }, { tls: true });
    const dir = await scratchDir();
    const authority = join(dir, 'company-ca.pem');
    await writeFile(authority, http.certificate!);
    const src = source(uri, {
      ...credentials,
      git_config: [{ name: 'http.sslCAInfo', value: authority }],
    });
    // The relay's one connection: had it not trusted the certificate, git would have gone on
    // alone, a connection per request.
    const acquired = await counted(http, async () =>
      runScript('out', { source: src, params: { acquire: true } }, { args: [await scratchDir()] }),
    );
    expect(acquired.requests).toBeGreaterThanOrEqual(4);
    expect(acquired.connections).toBe(1);
    expect(await lockRepo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });
    // Another authority in that file: neither the relay nor git takes the certificate.
    const other = await served({ unclaimed: ['lock-b'] }, { tls: true });
    await writeFile(authority, other.server.certificate!);
    const refused = await runScript('check', { source: src });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`unable to access '${uri}/'`);
  });

  it('a server that is not there: git says so in its own words, naming the uri', async () => {
    const uri = `http://127.0.0.1:${await freePort()}/locks.git`;
    const result = await runScript('check', { source: source(uri, credentials) });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      new RegExp(`unable to access '${escape(uri).source}/': Failed to connect`),
    );
  });

  it('a server that does not speak HTTP: git says so in its own words, naming the uri', async () => {
    const garbage = createServer((socket) =>
      socket.once('data', () => socket.end('HELLO\r\n\r\n')),
    );
    await new Promise<void>((resolve) => garbage.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = garbage.address() as AddressInfo;
      const uri = `http://127.0.0.1:${port}/locks.git`;
      const result = await runScript('check', { source: source(uri, credentials) });
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`unable to access '${uri}/'`);
      expect(result.stderr).not.toMatch(/returned error: 502/);
    } finally {
      garbage.close();
    }
  });

  it('a refused login names the uri the request names', async () => {
    const { uri } = await served({ unclaimed: ['lock-a'] });
    const result = await runScript('check', {
      source: source(uri, { username: USER, password: 'wrong' }),
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`Authentication failed for '${uri}/'`);
  });
});

describe('the relay', () => {
  it('forwards only what carries the run token, which git has from its environment', async () => {
    const { server: http, uri } = await served({ unclaimed: ['lock-a'] });
    relay = (await startHttpRelay(
      { uri, ...credentials, skipSslVerification: false, gitConfig: [] },
      {},
    ))!;
    const settings = Object.fromEntries(relay.config);
    const base = Object.keys(settings)
      .map((key) => /^url\.(.*)\.insteadOf$/.exec(key)?.[1])
      .find((found) => found !== undefined)!;
    expect(settings[`url.${base}.insteadOf`]).toBe(uri);
    const [name, token] = settings[`http.${base}.extraHeader`]!.split(': ');
    expect(token).toMatch(/^[0-9a-f]{32}$/);
    const advertisement = `${base}/info/refs?service=git-upload-pack`;
    const seen = http.requests.length;
    for (const headers of [{}, { [name!]: 'f'.repeat(32) }])
      expect((await fetch(advertisement, { headers })).status).toBe(404);
    const outside = `${new URL(base).origin}/locks.git/info/refs?service=git-upload-pack`;
    expect((await fetch(outside, { headers: { [name!]: token! } })).status).toBe(404);
    expect(http.requests.length).toBe(seen);
    const answer = await fetch(advertisement, { headers: { [name!]: token! } });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toBe('application/x-git-upload-pack-advertisement');
    expect(http.requests.at(-1)).toMatchObject({ path: '/locks.git/info/refs', user: USER });
  });

  it("answers a push with the refs the run knows once a push has brought the server's capabilities; a stale ref is a lost race", async () => {
    const { repo: lockRepo, server: http, uri } = await served({ unclaimed: ['lock-a'] });
    relay = (await startHttpRelay(
      { uri, ...credentials, skipSslVerification: false, gitConfig: [] },
      {},
    ))!;
    const config = relay.config.flatMap(([name, value]) => ['-c', `${name}=${value}`]);
    const branch = `refs/heads/${lockRepo.branch}`;
    const { work } = lockRepo;
    /** A new commit on `parent` in the working clone, pushed through the relay. */
    const pushOn = async (parent: string, message: string) => {
      await git(work, 'reset', '-q', '--hard', parent);
      await git(work, 'commit', '-q', '--allow-empty', '-m', message);
      const commit = (await git(work, 'rev-parse', 'HEAD')).trim();
      const porcelain = await execFile(
        'git',
        [...config, 'push', '--porcelain', '--', uri, `${commit}:${branch}`],
        { cwd: work, env: GIT_TEST_ENV },
      ).then(
        ({ stdout }) => stdout,
        (error: { stdout: string }) => error.stdout,
      );
      return { commit, outcome: classifyPush(porcelain, branch) };
    };
    const asked = () =>
      http.requests.filter(
        ({ method, service }) => method === 'GET' && service === 'git-receive-pack',
      ).length;
    const first = await lockRepo.tip();
    // Nothing kept yet: the server is asked.
    relay.expectPush([{ ref: branch, id: first }]);
    const one = await pushOn(first, 'one');
    expect(one.outcome).toBe('pushed');
    expect(asked()).toBe(1);
    // Its capabilities kept: the relay answers with the tip the run knows.
    relay.expectPush([{ ref: branch, id: one.commit }]);
    const two = await pushOn(one.commit, 'two');
    expect(two.outcome).toBe('pushed');
    expect(asked()).toBe(1);
    expect(await lockRepo.tip()).toBe(two.commit);
    // Another push lands first: the tip the run knows is stale, and the server rejects the update.
    const other = await lockRepo.commit('another', async () => undefined);
    relay.expectPush([{ ref: branch, id: two.commit }]);
    const late = await pushOn(two.commit, 'late');
    expect(late.outcome).toBe('rejected');
    expect(asked()).toBe(1);
    expect(await lockRepo.tip()).toBe(other);
    // Once only: the next push asks the server.
    const again = await pushOn(other, 'again');
    expect(again.outcome).toBe('pushed');
    expect(asked()).toBe(2);
  });
});
