// An HTTP proxy on 127.0.0.1, optionally requiring basic auth, that reaches only loopback: CONNECT
// tunnels, and plain HTTP requests that name the whole URL, forwarded on kept connections as
// proxies do. It records every tunnel and request it saw, and counts the connections made to it,
// so tests can tell the proxy was really used, and how.
import { Agent, createServer, request, type IncomingMessage } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';

export interface ConnectProxy {
  port: number;
  /** Each CONNECT request: its target and whether it was let through. */
  tunnels: { target: string; allowed: boolean }[];
  /** Each plain HTTP request: its method, the URL it named, and whether it was let through. */
  forwarded: { method: string; url: string; allowed: boolean }[];
  /** TCP connections made to the proxy so far. */
  connections(): number;
  stop(): Promise<void>;
}

const LOOPBACK = /^(?:127\.0\.0\.1|localhost|\[::1\]):(\d+)$/;

export async function startConnectProxy(auth?: {
  user: string;
  password: string;
}): Promise<ConnectProxy> {
  const tunnels: ConnectProxy['tunnels'] = [];
  const forwarded: ConnectProxy['forwarded'] = [];
  const sockets = new Set<Socket>();
  let connections = 0;
  const expected = auth
    ? `Basic ${Buffer.from(`${auth.user}:${auth.password}`).toString('base64')}`
    : undefined;
  const upstreamAgent = new Agent({ keepAlive: true });
  const server = createServer((req, res) => {
    const url = req.url ?? '';
    const target = /^http:\/\/([^/]+)(\/.*)?$/.exec(url);
    const allowed = !!target && LOOPBACK.test(target[1]!);
    forwarded.push({ method: req.method ?? '', url, allowed });
    if (expected && req.headers['proxy-authorization'] !== expected) {
      forwarded.at(-1)!.allowed = false;
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
        port: Number(LOOPBACK.exec(target[1]!)![1]),
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
  server.on('connection', (socket: Socket) => {
    connections += 1;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => {
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
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
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
