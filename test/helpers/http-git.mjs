// @ts-check
// `git http-backend` (smart HTTP) behind a small Node server on 127.0.0.1 that requires basic
// auth, optionally over TLS with a self-signed certificate made by openssl for the test; shared
// by the tests and the bench.
import { execFile, spawn } from 'node:child_process';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);

/**
 * @typedef {object} HttpGitServer
 * @property {number} port
 * @property {(bareRepo: string) => string} url `http(s)://127.0.0.1:PORT/<path relative to the project root>`
 * @property {{ method: string, path: string, service?: string, user?: string, protocol?: string, sent?: number, agent?: string, command?: string }[]} requests
 *   Requests seen: method, path, the service an advertisement is asked for (`git-receive-pack`),
 *   the user that authenticated (undefined when refused), the Git-Protocol header (`version=2`)
 *   when there was one, the bytes of git's answer (its body), the User-Agent, and for a protocol
 *   v2 request the command it sends (`ls-refs`, `fetch`).
 * @property {() => number} connections TCP connections accepted so far.
 * @property {string} [certificate] With tls, the server's self-signed certificate (PEM): its own
 *   authority, for a client to trust.
 * @property {() => Promise<void>} stop
 */

/**
 * @typedef {object} HttpGitOptions
 * @property {string} projectRoot
 * @property {string} username
 * @property {string} password
 * @property {boolean} [tls]
 * @property {number} [keepAliveTimeoutMs] How long an idle connection stays open (Node's default: 5 s).
 * @property {{ from: string, to: string }} [redirect] Requests below path `from` are sent to
 *   the same place below `to` (301, a Location relative to the server, before any login).
 * @property {boolean} [v0Only] Leave the Git-Protocol header out: a server that speaks only
 *   protocol v0.
 */

/** @returns {Promise<{ key: Buffer, cert: Buffer }>} */
async function selfSignedCertificate() {
  const dir = await mkdtemp(join(tmpdir(), 'pool-tls-'));
  try {
    await exec('openssl', [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      join(dir, 'key.pem'),
      '-out',
      join(dir, 'cert.pem'),
    ]);
    return {
      key: await readFile(join(dir, 'key.pem')),
      cert: await readFile(join(dir, 'cert.pem')),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * @param {HttpGitOptions} options
 * @returns {Promise<HttpGitServer>}
 */
export async function startHttpGit(options) {
  /** @type {HttpGitServer['requests']} */
  const requests = [];
  const expected = `Basic ${Buffer.from(`${options.username}:${options.password}`).toString('base64')}`;
  /** @type {import('node:http').RequestListener} */
  const handler = (req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const { redirect } = options;
    if (redirect && url.pathname.startsWith(`${redirect.from}/`)) {
      requests.push({ method: req.method ?? '', path: url.pathname });
      const location = `${redirect.to}${url.pathname.slice(redirect.from.length)}${url.search}`;
      res.writeHead(301, { Location: location }).end();
      return;
    }
    if (req.headers.authorization !== expected) {
      requests.push({ method: req.method ?? '', path: url.pathname });
      res
        .writeHead(401, { 'WWW-Authenticate': 'Basic realm="locks"' })
        .end('authentication required\n');
      return;
    }
    const protocol = options.v0Only ? undefined : req.headers['git-protocol'];
    const service = url.searchParams.get('service');
    /** @type {HttpGitServer['requests'][number]} */
    const seen = {
      method: req.method ?? '',
      path: url.pathname,
      ...(service ? { service } : {}),
      user: options.username,
      ...(protocol ? { protocol: String(protocol) } : {}),
      sent: 0,
      ...(req.headers['user-agent'] ? { agent: String(req.headers['user-agent']) } : {}),
    };
    requests.push(seen);
    // A v2 request starts with its command's pkt-line (an uncompressed body: small ones are).
    req.once('data', (/** @type {Buffer} */ chunk) => {
      const command = /^[0-9a-f]{4}command=([a-z-]+)/.exec(chunk.toString('latin1'));
      if (command) seen.command = command[1];
    });
    // CGI/1.1 as git-http-backend(1) expects it; receive-pack is on because REMOTE_USER is set.
    const child = spawn('git', ['http-backend'], {
      stdio: ['pipe', 'pipe', 'ignore'],
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        GIT_PROJECT_ROOT: options.projectRoot,
        GIT_HTTP_EXPORT_ALL: '1',
        GIT_CONFIG_NOSYSTEM: '1',
        REQUEST_METHOD: req.method ?? 'GET',
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        REMOTE_USER: options.username,
        REMOTE_ADDR: '127.0.0.1',
        ...(req.headers['content-encoding']
          ? { HTTP_CONTENT_ENCODING: String(req.headers['content-encoding']) }
          : {}),
        ...(protocol ? { GIT_PROTOCOL: String(protocol) } : {}),
      },
    });
    req.pipe(child.stdin);
    let head = Buffer.alloc(0);
    let headerDone = false;
    child.stdout.on('data', (/** @type {Buffer} */ chunk) => {
      if (headerDone) {
        seen.sent = (seen.sent ?? 0) + chunk.length;
        return void res.write(chunk);
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      headerDone = true;
      let status = 200;
      /** @type {Record<string, string>} */
      const headers = {};
      for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
        const colon = line.indexOf(':');
        const name = line.slice(0, colon).trim();
        const value = line.slice(colon + 1).trim();
        if (name.toLowerCase() === 'status') status = Number(value.split(' ')[0]);
        else headers[name] = value;
      }
      res.writeHead(status, headers);
      seen.sent = (seen.sent ?? 0) + head.length - end - 4;
      res.write(head.subarray(end + 4));
    });
    child.stdout.on('end', () => res.end());
    child.on('error', () => res.destroy());
  };
  const tls = options.tls ? await selfSignedCertificate() : undefined;
  const server = tls ? createHttpsServer(tls, handler) : createHttpServer(handler);
  if (options.keepAliveTimeoutMs !== undefined)
    server.keepAliveTimeout = options.keepAliveTimeoutMs;
  let connections = 0;
  server.on('connection', () => connections++);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const port = /** @type {import('node:net').AddressInfo} */ (server.address()).port;
  const scheme = options.tls ? 'https' : 'http';
  return {
    port,
    url: (bareRepo) => `${scheme}://127.0.0.1:${port}/${relative(options.projectRoot, bareRepo)}`,
    requests,
    connections: () => connections,
    certificate: tls?.cert.toString('utf8'),
    stop: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
