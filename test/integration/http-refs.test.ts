// A put waiting on an HTTP(S) lock repository looks at the refs over one kept connection instead
// of a new connection (and TLS handshake) per poll: counted at the server, `git http-backend`
// behind basic auth.
import { join } from 'node:path';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { httpRefsFor } from '../../src/git/http-refs.js';
import { parseAdvertisement, parseLsRefs } from '../../src/git/ls-refs.js';
import { relayRoute, startHttpRelay, type HttpRelay } from '../../src/transport/http-relay.js';
import {
  HTTP_PASSWORD as PASSWORD,
  HTTP_USER as USER,
  servedOverHttp,
  type HttpGitServer,
} from '../helpers/http-git.js';
import { gitShim } from '../helpers/git-shim.js';
import { git } from '../helpers/lock-repo.js';
import { LINE_ENTRY, LOOKED, withHostedRefs } from '../helpers/looked-refs.js';
import { runScript, startScript } from '../helpers/run-script.js';
import { source } from '../helpers/source.js';
import { lockStep, movesThatFreeNothing, scratchDir } from '../helpers/steps.js';

const relays: HttpRelay[] = [];
afterEach(() => {
  for (const relay of relays.splice(0)) relay.close();
});

const served = (
  seed: { claimed?: string[]; unclaimed?: string[] },
  tls = false,
  options: { v0Only?: boolean } = {},
) => servedOverHttp(seed, { tls, ...options });

const settings = (uri: string, extra: Partial<Parameters<typeof relayRoute>[0]> = {}) => ({
  uri,
  username: USER,
  password: PASSWORD,
  skipSslVerification: false,
  gitConfig: [],
  ...extra,
});

/** Looks at the refs over a relay to `uri`, as a run makes them. */
async function looks(uri: string, extra: Partial<Parameters<typeof relayRoute>[0]> = {}) {
  const relay = (await startHttpRelay(settings(uri, extra), {}))!;
  relays.push(relay);
  return httpRefsFor(relay, { gitTimeoutMs: 10_000 }, new AbortController().signal)!;
}

describe('HttpRefs', () => {
  it('asks the ref advertisement again and again on one connection, and sees every change', async () => {
    const { repo: lockRepo, server: http, uri } = await served({ unclaimed: ['lock-a'] });
    const line = 'refs/pool-resource/waiting/master/pool/1-1000-abc';
    await git(lockRepo.bare, 'update-ref', line, 'master');
    const refs = await looks(uri);
    const before = http.connections();
    for (let i = 0; i < 10; i++) {
      expect(await refs.listRefs(LOOKED)).toEqual(
        expect.arrayContaining([
          { id: await lockRepo.tip(), ref: 'refs/heads/master' },
          { id: await lockRepo.tip(), ref: line },
        ]),
      );
    }
    await lockRepo.commit('unclaiming: nothing', async () => undefined);
    expect(await refs.listRefs(LOOKED)).toContainEqual({
      id: await lockRepo.tip(),
      ref: 'refs/heads/master',
    });
    expect(http.connections() - before).toBe(1);
    refs.close();
  });

  it('over HTTPS too, with skip_ssl_verification for a self-signed certificate', async () => {
    const { repo: lockRepo, uri } = await served({ unclaimed: ['lock-a'] }, true);
    const trusting = await looks(uri, { skipSslVerification: true });
    expect(await trusting.listRefs(LOOKED)).toContainEqual({
      id: await lockRepo.tip(),
      ref: 'refs/heads/master',
    });
    trusting.close();
    // Without it Node refuses the certificate, as git would: the session fails for good.
    const checking = await looks(uri);
    await expect(checking.listRefs(LOOKED)).rejects.toThrow();
    expect(checking.usable).toBe(false);
  });

  it('fails for good on a refused login', async () => {
    const { uri } = await served({ unclaimed: ['lock-a'] });
    const refs = await looks(uri, { password: 'wrong' });
    await expect(refs.listRefs(LOOKED)).rejects.toThrow(/HTTP 401/);
    expect(refs.usable).toBe(false);
  });

  it('is used only where git would connect with basic auth, straight or through an HTTP proxy', () => {
    const https = 'https://host/locks.git';
    expect(relayRoute(settings(https), {})).toEqual({ url: new URL(https) });
    for (const uri of ['git://host/locks.git', 'ssh://git@host/locks.git', '/srv/locks.git'])
      expect(relayRoute(settings(uri), {})).toBeUndefined();
    expect(relayRoute(settings(https), { HTTPS_PROXY: 'http://proxy:3128' })).toEqual({
      url: new URL(https),
      proxy: { host: 'proxy', port: 3128 },
    });
    expect(relayRoute(settings(https), { https_proxy: 'socks5://proxy:1080' })).toBeUndefined();
    for (const name of [
      'http.extraHeader',
      'url.https://mirror/.insteadOf',
      'http.proxyAuthMethod',
    ])
      expect(
        relayRoute(settings(https, { gitConfig: [{ name, value: 'x' }] }), {}),
      ).toBeUndefined();
    // git_config's http.proxy comes before the variables, the last one first; empty is none.
    const proxies = (...values: string[]) => ({
      gitConfig: values.map((value) => ({ name: 'http.Proxy', value })),
    });
    const env = { https_proxy: 'http://env-proxy:3128' };
    expect(relayRoute(settings(https, proxies('first:1', 'last:2')), env)?.proxy).toEqual({
      host: 'last',
      port: 2,
    });
    expect(relayRoute(settings(https, proxies('')), env)).toEqual({ url: new URL(https) });
    expect(relayRoute(settings(https, proxies('socks5://proxy')), {})).toBeUndefined();
    // The relay reads git_config's http.sslCAInfo itself, when it names a whole path.
    const caInfo = (value: string) => ({ gitConfig: [{ name: 'http.sslCAInfo', value }] });
    expect(relayRoute(settings(https, caInfo('/etc/company-ca.pem')), {})).toEqual({
      url: new URL(https),
    });
    expect(relayRoute(settings(https, caInfo('~/company-ca.pem')), {})).toBeUndefined();
    expect(relayRoute(settings(https, caInfo('company-ca.pem')), {})).toBeUndefined();
  });

  it('over protocol v2 asks only the branch and the line, however many refs the server has', async () => {
    const { repo: lockRepo, server: http, uri } = await served({ unclaimed: ['lock-a'] });
    // A hosted repository advertises a pair of refs per pull request.
    const tip = await withHostedRefs(lockRepo, 500);
    const line = LINE_ENTRY;
    const refs = await looks(uri);
    const seen = http.requests.length;
    for (let i = 0; i < 3; i++)
      expect(await refs.listRefs(LOOKED)).toEqual([
        { id: tip, ref: 'refs/heads/master' },
        { id: tip, ref: line },
      ]);
    const asked = http.requests.slice(seen);
    // The capabilities once (no fetch of git's asked them first), then an ls-refs per look.
    expect(asked.map(({ method, path, protocol }) => `${method} ${path} ${protocol}`)).toEqual([
      'GET /locks.git/info/refs version=2',
      ...Array(3).fill('POST /locks.git/git-upload-pack version=2'),
    ]);
    for (const { sent } of asked.slice(1)) expect(sent).toBeLessThan(300);
    // The whole advertisement, as a v0 look would read it: every pull request's ref.
    const advertisement = await fetch(`${uri}/info/refs?service=git-upload-pack`, {
      headers: { authorization: `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}` },
    });
    expect((await advertisement.arrayBuffer()).byteLength).toBeGreaterThan(25_000);
    refs.close();
  });

  it('a server that speaks only protocol v0: its whole advertisement, each look', async () => {
    const {
      repo: lockRepo,
      server: http,
      uri,
    } = await served({ unclaimed: ['lock-a'] }, false, {
      v0Only: true,
    });
    const refs = await looks(uri);
    const seen = http.requests.length;
    for (let i = 0; i < 3; i++)
      expect(await refs.listRefs(LOOKED)).toEqual([
        { id: await lockRepo.tip(), ref: 'refs/heads/master' },
      ]);
    expect(http.requests.slice(seen).map(({ method, path }) => `${method} ${path}`)).toEqual(
      Array(3).fill('GET /locks.git/info/refs'),
    );
    refs.close();
  });

  it('reads the answers of ls-refs', () => {
    const id = 'a'.repeat(40);
    const pkt = (text: string) => `${(text.length + 4).toString(16).padStart(4, '0')}${text}`;
    expect(
      parseLsRefs(
        Buffer.from(
          `${pkt(`${id} refs/heads/master\n`)}${pkt(`${'b'.repeat(64)} refs/tags/v1 peeled:${id}\n`)}0000`,
        ),
      ),
    ).toEqual([
      { id, ref: 'refs/heads/master' },
      { id: 'b'.repeat(64), ref: 'refs/tags/v1' },
    ]);
    expect(parseLsRefs(Buffer.from('0000'))).toEqual([]);
    for (const wrong of [
      `${pkt(`${id} refs/heads/master\n`)}`,
      `${pkt('ERR upload-pack: not our ref\n')}0000`,
      `${pkt(`${id} refs/heads/master\n`)}0000${pkt(`${id} refs/heads/other\n`)}0000`,
      '<html>login</html>',
    ])
      expect(parseLsRefs(Buffer.from(wrong))).toBeUndefined();
  });

  it('reads the advertisement git http-backend writes, an empty repository included', () => {
    const id = 'a'.repeat(40);
    const pkt = (text: string) => `${(text.length + 4).toString(16).padStart(4, '0')}${text}`;
    const body = (lines: string[]) =>
      Buffer.from(`${pkt('# service=git-upload-pack\n')}0000${lines.map(pkt).join('')}0000`);
    expect(
      parseAdvertisement(
        body([
          `${id} HEAD\0multi_ack symref=HEAD:refs/heads/master\n`,
          `${id} refs/heads/master\n`,
        ]),
      ),
    ).toEqual([
      { id, ref: 'HEAD' },
      { id, ref: 'refs/heads/master' },
    ]);
    expect(parseAdvertisement(body([`${'0'.repeat(40)} capabilities^{}\0agent=git\n`]))).toEqual(
      [],
    );
    expect(parseAdvertisement(Buffer.from('<html>login</html>'))).toBeUndefined();
  });
});

/** The requests git itself made, not the run's own. */
const byGit = (requests: HttpGitServer['requests']) =>
  requests.filter(({ agent }) => agent?.startsWith('git/') && agent !== 'git/pool-resource');

describe('a run’s first fetch over HTTP', () => {
  it('an acquire, its get and its release ask for it themselves on the kept connection', async () => {
    const shim = await gitShim();
    onTestFinished(() => shim.cleanup());
    const { repo: lockRepo, server: http, uri } = await served({ unclaimed: ['lock-a'] });
    const sourced = source(uri, { username: USER, password: PASSWORD });
    const env = { PATH: shim.path };
    const acquired = await runScript(
      'out',
      { source: sourced, params: { acquire: true } },
      {
        args: [await scratchDir()],
        env,
      },
    );
    expect(acquired.code, acquired.stderr).toBe(0);
    expect((await shim.commands()).map(([name]) => name)).toEqual(['push']);
    // Its get too, which reads the claim from what it fetched: no git process at all.
    await shim.reset();
    const fetched = await runScript(
      'in',
      { source: sourced, version: (JSON.parse(acquired.stdout) as { version: unknown }).version },
      { args: [join(await scratchDir(), 'lock')], env },
    );
    expect(fetched.code, fetched.stderr).toBe(0);
    expect(await shim.commands()).toEqual([]);
    await shim.reset();
    const released = await runScript(
      'out',
      { source: sourced, params: { release: 'lock' } },
      {
        args: [await lockStep('lock-a')],
        env,
      },
    );
    expect(released.code, released.stderr).toBe(0);
    expect((await shim.commands()).map(([name]) => name)).toEqual(['push']);
    expect(await lockRepo.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a'] });
    // Each run listed the branch and fetched its first commits itself, one request each; git
    // asked the server for nothing but the pushes.
    const own = http.requests.filter(({ agent }) => agent === 'git/pool-resource');
    expect(own.filter(({ command }) => command === 'ls-refs')).toHaveLength(3);
    expect(own.filter(({ command }) => command === 'fetch')).toHaveLength(3);
    expect(byGit(http.requests).filter(({ path }) => path.endsWith('/git-upload-pack'))).toEqual(
      [],
    );
    await git(lockRepo.bare, 'fsck', '--strict', '--no-dangling');
  });
});

describe('a put waiting over HTTP', () => {
  it('looks on one kept connection: a handful of connections, not one per poll', async () => {
    const { repo: lockRepo, server: http, uri } = await served({ claimed: ['lock-a'] });
    const request = {
      source: source(uri, { retry_delay: '100ms', username: USER, password: PASSWORD }),
      params: { acquire: true },
    };
    const before = http.connections();
    const put = startScript('out', request, { args: [await scratchDir()] });
    await put.waitForStderr(/waiting in line/);
    // Two seconds at the front of the line: twenty polls.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const waiting = http.connections() - before;
    await lockRepo.commit('unclaiming: lock-a', (work) =>
      git(work, 'mv', 'pool/claimed/lock-a', 'pool/unclaimed/lock-a').then(() => undefined),
    );
    const done = await put.done;
    expect(done.code, done.stderr).toBe(0);
    expect(await lockRepo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });
    // The first fetch, the join, the holder lookup and the kept connection.
    expect(waiting).toBeLessThanOrEqual(6);
  });

  /** A put for lock-a, claimed, waiting in line with retry_delay 1s, once it said who holds it. */
  async function waitingPut() {
    const { repo: lockRepo, server: http, uri } = await served({ claimed: ['lock-a'] });
    const request = {
      source: source(uri, { retry_delay: '1s', username: USER, password: PASSWORD }),
      params: { acquire: true },
    };
    const put = startScript('out', request, { args: [await scratchDir()] });
    await put.waitForStderr(/waiting for lock: .*"lock-a" held by/);
    await put.waitForStderr(/waiting in line/);
    return { lockRepo, http, put };
  }

  it('looks up who holds the lock in what its own first fetch brought: nothing more asked of the server', async () => {
    const { lockRepo, http, put } = await waitingPut();
    put.child.kill('SIGTERM');
    expect((await put.done).code).toBe(143);
    expect(await lockRepo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });
    // The put's first fetch, its own (git fetched nothing; it pushed the put's place in line),
    // listed the branch and the line, and brought the commits that tell who holds lock-a.
    const fetchedByGit = byGit(http.requests).filter(({ path }) =>
      path.endsWith('/git-upload-pack'),
    );
    expect(fetchedByGit).toEqual([]);
    const own = http.requests.filter(({ agent }) => agent === 'git/pool-resource');
    expect(own.filter(({ command }) => command === 'fetch')).toHaveLength(1);
  });

  /**
   * A put for lock-a waiting in line (retry_delay 200ms; git from `path` if given) through two
   * moves that free nothing, then the release: its claim landed whole. The pool's tip when it
   * started, and the requests the server got from when it waited in line.
   */
  async function claimAfterMoves(options: { v0Only?: boolean; path?: string } = {}) {
    const {
      repo: lockRepo,
      server: http,
      uri,
    } = await served({ claimed: ['lock-a'] }, false, {
      v0Only: options.v0Only ?? false,
    });
    const put = startScript(
      'out',
      {
        source: source(uri, { retry_delay: '200ms', username: USER, password: PASSWORD }),
        params: { acquire: true },
      },
      { args: [await scratchDir()], ...(options.path ? { env: { PATH: options.path } } : {}) },
    );
    await put.waitForStderr(/waiting in line/);
    const from = http.requests.length;
    await movesThatFreeNothing(lockRepo, put);
    await lockRepo.commit('unclaiming: lock-a', (work) =>
      git(work, 'mv', 'pool/claimed/lock-a', 'pool/unclaimed/lock-a').then(() => undefined),
    );
    const done = await put.done;
    expect(done.code, done.stderr).toBe(0);
    expect(await lockRepo.state('pool')).toEqual({
      claimed: ['lock-a', 'lock-b', 'lock-c'],
      unclaimed: [],
    });
    await git(lockRepo.bare, 'fsck', '--strict', '--no-dangling');
    return { after: http.requests.slice(from) };
  }

  it('on a server that speaks only protocol v0, git fetches the moves, and the claim lands', async () => {
    const { after } = await claimAfterMoves({ v0Only: true });
    // The run asked for no pack itself (protocol v0 has no fetch command): git fetched.
    const own = after.filter(({ agent }) => agent === 'git/pool-resource');
    expect(own.every(({ method }) => method === 'GET')).toBe(true);
    expect(
      byGit(after).filter(({ path }) => path.endsWith('/git-upload-pack')).length,
    ).toBeGreaterThan(0);
  });

  it('fetches each tip a look saw move itself, on the kept connection, and commits its claim there: git only pushes', async () => {
    const shim = await gitShim();
    onTestFinished(() => shim.cleanup());
    const { after } = await claimAfterMoves({ path: shim.path });
    // The front of the line looked (protocol v2's ls-refs on the kept connection) and fetched
    // each tip it saw move there too, one request each: git asked the server for nothing but the
    // claim's push.
    const own = after.filter(({ agent }) => agent === 'git/pool-resource');
    expect(own.filter(({ command }) => command === 'fetch').length).toBeGreaterThanOrEqual(3);
    expect(own.every(({ command }) => command === 'ls-refs' || command === 'fetch')).toBe(true);
    const gits = byGit(after);
    expect(gits.filter(({ path }) => path.endsWith('/git-upload-pack'))).toEqual([]);
    expect(gits.filter(({ path }) => path.endsWith('/git-receive-pack'))).toHaveLength(1);
    // The pool at the first tip and at each new one, and the claim's commit, were the run's own
    // work: git listed no pool and wrote no commit. (Its fetches were the holders' copy's, from
    // the put's own copy.)
    const commands = await shim.commands();
    expect(commands.filter(([name]) => ['ls-tree', 'fast-import', 'show'].includes(name!))).toEqual(
      [],
    );
    const fetches = commands.filter(([name]) => name === 'fetch');
    for (const args of fetches) expect(args.at(-2)).toMatch(/\/repository$/);
  });
});
