// A put waiting on an HTTP(S) lock repository looks at the refs over one kept connection instead
// of a new connection (and TLS handshake) per poll: counted at the server, `git http-backend`
// behind basic auth.
import { afterEach, describe, expect, it } from 'vitest';
import { httpRefsFor, parseAdvertisement } from '../../src/git/http-refs.js';
import { relayRoute, startHttpRelay, type HttpRelay } from '../../src/transport/http-relay.js';
import { startHttpGit, type HttpGitServer } from '../helpers/http-git.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { startScript } from '../helpers/run-script.js';
import { source } from '../helpers/source.js';
import { scratchDir } from '../helpers/steps.js';

const USER = 'locksmith';
const PASSWORD = 'pass word';

let repo: LockRepo | undefined;
let server: HttpGitServer | undefined;
const relays: HttpRelay[] = [];
afterEach(async () => {
  for (const relay of relays.splice(0)) relay.close();
  await server?.stop();
  server = undefined;
  await repo?.cleanup();
  repo = undefined;
});

async function served(seed: { claimed?: string[]; unclaimed?: string[] }, tls = false) {
  repo = await createLockRepo({ pool: seed });
  server = await startHttpGit({ projectRoot: repo.root, username: USER, password: PASSWORD, tls });
  return { repo, server, uri: server.url(repo.bare) };
}

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
      expect(await refs.listRefs()).toEqual(
        expect.arrayContaining([
          { id: await lockRepo.tip(), ref: 'refs/heads/master' },
          { id: await lockRepo.tip(), ref: line },
        ]),
      );
    }
    await lockRepo.commit('unclaiming: nothing', async () => undefined);
    expect(await refs.listRefs()).toContainEqual({
      id: await lockRepo.tip(),
      ref: 'refs/heads/master',
    });
    expect(http.connections() - before).toBe(1);
    refs.close();
  });

  it('over HTTPS too, with skip_ssl_verification for a self-signed certificate', async () => {
    const { repo: lockRepo, uri } = await served({ unclaimed: ['lock-a'] }, true);
    const trusting = await looks(uri, { skipSslVerification: true });
    expect(await trusting.listRefs()).toContainEqual({
      id: await lockRepo.tip(),
      ref: 'refs/heads/master',
    });
    trusting.close();
    // Without it Node refuses the certificate, as git would: the session fails for good.
    const checking = await looks(uri);
    await expect(checking.listRefs()).rejects.toThrow();
    expect(checking.usable).toBe(false);
  });

  it('fails for good on a refused login', async () => {
    const { uri } = await served({ unclaimed: ['lock-a'] });
    const refs = await looks(uri, { password: 'wrong' });
    await expect(refs.listRefs()).rejects.toThrow(/HTTP 401/);
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
});
