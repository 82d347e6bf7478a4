// @ts-check
// The servers the bench measures through, on 127.0.0.1: the tests' git daemon
// (test/helpers/git-daemon.mjs), whose --verbose log counts connections and pushes, and OpenSSH's
// sshd with a client key of its own, whose log counts logins.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startGitDaemon } from '../../test/helpers/git-daemon.mjs';
import { startHttpGit } from '../../test/helpers/http-git.mjs';
import { freePort, whenListening } from '../../test/helpers/net.mjs';
import { sshdConfig } from '../../test/helpers/sshd-config.mjs';
import { GIT_ENV, run } from './process.mjs';

/** git daemon serving the bare repositories in `base`, addressed by their name there. */
export async function startDaemon(base) {
  const daemon = await startGitDaemon(base, { env: GIT_ENV });
  // Our own probes count as connections too: start counting from here.
  await sleep(100);
  const offset = connections(daemon.log());
  return {
    url: (name) => daemon.url(join(base, name)),
    connections: () => connections(daemon.log()) - offset,
    pushes: () => (daemon.log().match(/Request receive-pack /g) ?? []).length,
    looks: () => looksOf(daemon.log()),
    stop: daemon.stop,
  };
}

/** The basic-auth login the HTTP server asks for. */
export const HTTP_LOGIN = { username: 'bench', password: 'bench-password' };

/**
 * `git http-backend` behind basic auth serving the bare repositories in `base`; its connections
 * are TCP connections (a poll on a kept one costs none), its pushes POSTs to git-receive-pack.
 */
export async function startHttp(base) {
  const http = await startHttpGit({ projectRoot: base, ...HTTP_LOGIN });
  return {
    url: (name) => http.url(join(base, name)),
    connections: () => http.connections(),
    pushes: () => pushesOf(http),
    requests: () => requestsOf(http),
    stop: http.stop,
  };
}

/** @param {import('../../test/helpers/http-git.mjs').HttpGitServer} http */
export function pushesOf(http) {
  return http.requests.filter(
    ({ method, path }) => method === 'POST' && path.endsWith('/git-receive-pack'),
  ).length;
}

/**
 * What an HTTP server did for git: every request (each one an http-backend, and past the refused
 * first request of basic auth an upload-pack or receive-pack), and the protocol v2 `ls-refs`
 * among them (a listing of refs: a look, or git's own before a fetch).
 *
 * @param {import('../../test/helpers/http-git.mjs').HttpGitServer} http
 */
export function requestsOf(http) {
  return {
    all: http.requests.length,
    listings: http.requests.filter(({ command }) => command === 'ls-refs').length,
  };
}

export const SSHD = '/usr/sbin/sshd';

/**
 * OpenSSH's sshd on 127.0.0.1 serving `base` by absolute path, with a client key of its own. Its
 * "connections" are logins; it does not log which commands are pushes.
 */
export async function startSshd(root, base) {
  const dir = join(root, 'sshd');
  await mkdir(dir);
  // sshd's privilege separation folder; containers may not have it.
  await mkdir('/run/sshd', { recursive: true, mode: 0o755 });
  for (const key of ['host', 'client'])
    await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', key, '-f', join(dir, key)]);
  await writeFile(join(dir, 'authorized_keys'), await readFile(join(dir, 'client.pub')));
  let server;
  for (let attempt = 0; attempt < 5 && !server; attempt++) {
    const port = await freePort();
    const config = join(dir, `sshd_config-${port}`);
    writeFileSync(
      config,
      sshdConfig({
        port,
        hostKey: join(dir, 'host'),
        authorizedKeysFile: join(dir, 'authorized_keys'),
        dir,
      }),
    );
    const child = spawn(SSHD, ['-D', '-e', '-f', config], { stdio: ['ignore', 'ignore', 'pipe'] });
    const listening = await whenListening(child, port);
    if (listening) server = { port, ...listening };
  }
  if (!server) throw new Error('sshd did not start');
  const logins = () => (server.log().match(/Accepted publickey for /g) ?? []).length;
  return {
    url: (name) => `ssh://${userInfo().username}@127.0.0.1:${server.port}${join(base, name)}`,
    privateKey: await readFile(join(dir, 'client'), 'utf8'),
    connections: logins,
    pushes: () => NaN,
    stop: server.stop,
  };
}

/**
 * The upload-pack connections that asked for protocol v2: a run speaks v0 to `git://` (git's
 * fetches), so these are the looks a put makes without git (one `ls-refs` each).
 */
function looksOf(log) {
  const v2 = new Set();
  let looks = 0;
  for (const [, pid, what] of log.matchAll(/^\[(\d+)\] (.*)$/gm)) {
    if (what === 'Extended attribute "protocol": version=2') v2.add(pid);
    else if (what.startsWith('Request upload-pack ') && v2.has(pid)) looks++;
  }
  return looks;
}

function connections(log) {
  return (log.match(/Connection from /g) ?? []).length;
}
