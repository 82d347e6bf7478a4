// An HTTP CONNECT proxy on 127.0.0.1, optionally requiring basic auth, that tunnels only to
// loopback. It records every CONNECT it saw so tests can tell the tunnel was really used.
import { createServer, type IncomingMessage } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';

export interface ConnectProxy {
  port: number;
  /** Each CONNECT request: its target and whether it was let through. */
  tunnels: { target: string; allowed: boolean }[];
  stop(): Promise<void>;
}

export async function startConnectProxy(auth?: {
  user: string;
  password: string;
}): Promise<ConnectProxy> {
  const tunnels: ConnectProxy['tunnels'] = [];
  const sockets = new Set<Socket>();
  const server = createServer((_req, res) => res.writeHead(405).end());
  server.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => undefined);
    const target = req.url ?? '';
    const expected = auth
      ? `Basic ${Buffer.from(`${auth.user}:${auth.password}`).toString('base64')}`
      : undefined;
    if (expected && req.headers['proxy-authorization'] !== expected) {
      tunnels.push({ target, allowed: false });
      client.end(
        'HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="proxy"\r\nContent-Length: 0\r\n\r\n',
      );
      return;
    }
    const match = /^(?:127\.0\.0\.1|localhost|\[::1\]):(\d+)$/.exec(target);
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
    stop: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
