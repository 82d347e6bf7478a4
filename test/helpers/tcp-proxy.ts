// A TCP proxy on 127.0.0.1 in front of a real server, for faults: it can slow every chunk down,
// swallow traffic without answering, or drop every connection at once.
import { createServer, connect, type Socket } from 'node:net';

export interface TcpProxy {
  port: number;
  /** Delay added to every chunk in both directions. */
  setDelay(ms: number): void;
  /** Accept connections but never forward a byte (a server that stopped answering). */
  setSilent(silent: boolean): void;
  /** Destroys every open connection. */
  dropConnections(): void;
  /** How many connections were accepted so far. */
  connections(): number;
  stop(): Promise<void>;
}

export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  let delayMs = 0;
  let silent = false;
  let accepted = 0;
  const open = new Set<Socket>();

  const pipe = (from: Socket, to: Socket) => {
    // Chunks stay in order: each one waits for the previous one's delay.
    let chain = Promise.resolve();
    from.on('data', (chunk) => {
      if (silent) return;
      const delay = delayMs;
      chain = chain.then(
        () =>
          new Promise<void>((resolve) => {
            setTimeout(() => {
              if (!to.destroyed) to.write(chunk);
              resolve();
            }, delay);
          }),
      );
    });
    from.on('end', () => void chain.then(() => to.end()));
    from.on('error', () => to.destroy());
    from.on('close', () => open.delete(from));
  };

  const server = createServer((client) => {
    accepted++;
    open.add(client);
    const upstream = connect(targetPort, '127.0.0.1');
    open.add(upstream);
    pipe(client, upstream);
    pipe(upstream, client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;

  const dropConnections = () => {
    for (const socket of open) socket.destroy();
    open.clear();
  };
  return {
    port,
    setDelay: (ms) => (delayMs = ms),
    setSilent: (value) => (silent = value),
    dropConnections,
    connections: () => accepted,
    stop: () =>
      new Promise((resolve) => {
        dropConnections();
        server.close(() => resolve());
      }),
  };
}
