// @ts-check
// A TCP proxy on 127.0.0.1 in front of a real server, for faults and for distance: it can slow
// every chunk down, make each new connection wait as a TCP handshake over a long link does,
// swallow traffic without answering, or drop every connection at once. Shared by the tests and
// the bench.
import { createServer, connect } from 'node:net';
import { performance } from 'node:perf_hooks';

/**
 * @typedef {object} TcpProxy
 * @property {number} port
 * @property {(ms: number) => void} setDelay Delay added to every chunk in both directions, one
 *   after the other (a slow link: a burst of chunks comes out that many delays later).
 * @property {(ms: number) => void} setLatency Each chunk comes out that long after it went in,
 *   in order (a long link: a burst comes out together, one latency later).
 * @property {(ms: number) => void} setConnectDelay Wait before a new connection carries a byte
 *   (a TCP handshake: one round trip).
 * @property {(silent: boolean) => void} setSilent Accept connections but never forward a byte
 *   (a server that stopped answering).
 * @property {() => void} dropConnections Destroys every open connection.
 * @property {() => number} connections How many connections were accepted so far.
 * @property {() => Promise<void>} stop
 */

/**
 * @param {number} targetPort
 * @returns {Promise<TcpProxy>}
 */
export async function startTcpProxy(targetPort) {
  let delayMs = 0;
  let latencyMs = 0;
  let connectDelayMs = 0;
  let silent = false;
  let accepted = 0;
  /** @type {Set<import('node:net').Socket>} */
  const open = new Set();

  /**
   * @param {import('node:net').Socket} from
   * @param {import('node:net').Socket} to
   * @param {Promise<void>} ready
   */
  const pipe = (from, to, ready) => {
    // Chunks stay in order: each one waits for the previous one's delay.
    let chain = ready;
    from.on('data', (chunk) => {
      if (silent) return;
      const delay = delayMs;
      const due = performance.now() + latencyMs;
      chain = chain.then(
        () =>
          new Promise((resolve) => {
            setTimeout(
              () => {
                if (!to.destroyed) to.write(chunk);
                resolve();
              },
              delay + Math.max(0, due - performance.now()),
            );
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
    /** @type {Promise<void>} */
    const ready = new Promise((resolve) => setTimeout(resolve, connectDelayMs));
    pipe(client, upstream, ready);
    pipe(upstream, client, ready);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;

  const dropConnections = () => {
    for (const socket of open) socket.destroy();
    open.clear();
  };
  return {
    port,
    setDelay: (ms) => (delayMs = ms),
    setLatency: (ms) => (latencyMs = ms),
    setConnectDelay: (ms) => (connectDelayMs = ms),
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
