// @ts-check
// An HTTP proxy on 127.0.0.1, optionally requiring basic auth, that reaches only loopback: CONNECT
// tunnels, and plain HTTP requests that name the whole URL, forwarded on kept connections as
// proxies do. It records every tunnel and request it saw, and counts the connections made to it,
// so tests can tell the proxy was really used, and how. Shared by the tests and the bench.
import { Agent, createServer, request } from 'node:http';
import { connect } from 'node:net';

/**
 * @typedef {object} ConnectProxy
 * @property {number} port
 * @property {{ target: string, allowed: boolean }[]} tunnels Each CONNECT request: its target and
 *   whether it was let through.
 * @property {{ method: string, url: string, allowed: boolean }[]} forwarded Each plain HTTP
 *   request: its method, the URL it named, and whether it was let through.
 * @property {() => number} connections TCP connections made to the proxy so far.
 * @property {() => Promise<void>} stop
 */

const LOOPBACK = /^(?:127\.0\.0\.1|localhost|\[::1\]):(\d+)$/;

/**
 * @param {{ user: string, password: string }} [auth]
 * @returns {Promise<ConnectProxy>}
 */
export async function startConnectProxy(auth) {
  /** @type {ConnectProxy['tunnels']} */
  const tunnels = [];
  /** @type {ConnectProxy['forwarded']} */
  const forwarded = [];
  /** @type {Set<import('node:stream').Duplex>} */
  const sockets = new Set();
  let connections = 0;
  const expected = auth
    ? `Basic ${Buffer.from(`${auth.user}:${auth.password}`).toString('base64')}`
    : undefined;
  const upstreamAgent = new Agent({ keepAlive: true });
  const server = createServer((req, res) => {
    const url = req.url ?? '';
    const target = /^http:\/\/([^/]+)(\/.*)?$/.exec(url);
    const host = target?.[1] ?? '';
    const allowed = LOOPBACK.test(host);
    const entry = { method: req.method ?? '', url, allowed };
    forwarded.push(entry);
    if (expected && req.headers['proxy-authorization'] !== expected) {
      entry.allowed = false;
      res.writeHead(407, { 'Proxy-Authenticate': 'Basic realm="proxy"' }).end();
      return;
    }
    if (!target || !allowed) {
      res.writeHead(target ? 403 : 405).end();
      return;
    }
    const headers = { ...req.headers };
    delete headers['proxy-authorization'];
    delete headers['proxy-connection'];
    const out = request(
      {
        host: '127.0.0.1',
        port: Number(LOOPBACK.exec(host)?.[1]),
        method: req.method,
        path: target[2] ?? '/',
        headers,
        agent: upstreamAgent,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    out.on('error', () => (res.headersSent ? res.destroy() : res.writeHead(502).end()));
    req.pipe(out);
  });
  server.on('connection', (socket) => {
    connections += 1;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.on('connect', (req, client, head) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => undefined);
    const target = req.url ?? '';
    if (expected && req.headers['proxy-authorization'] !== expected) {
      tunnels.push({ target, allowed: false });
      client.end(
        'HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="proxy"\r\nContent-Length: 0\r\n\r\n',
      );
      return;
    }
    const match = LOOPBACK.exec(target);
    if (!match) {
      tunnels.push({ target, allowed: false });
      client.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    tunnels.push({ target, allowed: true });
    const upstream = connect(Number(match[1]), '127.0.0.1', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    sockets.add(upstream);
    upstream.on('close', () => {
      sockets.delete(upstream);
      client.destroy();
    });
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  return {
    port: /** @type {import('node:net').AddressInfo} */ (server.address()).port,
    tunnels,
    forwarded,
    connections: () => connections,
    stop: () =>
      new Promise((resolve) => {
        upstreamAgent.destroy();
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
