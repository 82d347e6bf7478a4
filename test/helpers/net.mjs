// @ts-check
// Small loopback helpers shared by the test servers and the bench: a free port, waiting until one
// accepts.
import { connect, createServer } from 'node:net';

/** @returns {Promise<number>} */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/**
 * @param {number} port
 * @returns {Promise<boolean>}
 */
export function accepts(port) {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * @typedef {object} Listening
 * @property {() => string} log Everything the server wrote to stderr so far.
 * @property {() => Promise<void>} stop SIGTERM, then waits for the server to exit.
 */

/**
 * The servers started here and still running: killed should this process exit first (a bench
 * that crashed, say), so that none is left serving its port.
 *
 * @type {Set<import('node:child_process').ChildProcess>}
 */
const running = new Set();
process.on('exit', () => {
  for (const child of running) child.kill('SIGTERM');
});

/**
 * Waits until a server just spawned with its stderr piped accepts connections on `port`.
 * Undefined when it exits first (the port was taken, say) or is not listening within 5 s; it is
 * killed then, so the caller can try another port.
 *
 * @param {import('node:child_process').ChildProcess} child
 * @param {number} port
 * @returns {Promise<Listening | undefined>}
 */
export async function whenListening(child, port) {
  let log = '';
  /** @type {import('node:stream').Readable} */ (child.stderr)
    .setEncoding('utf8')
    .on('data', (/** @type {string} */ chunk) => (log += chunk));
  let exited = false;
  running.add(child);
  child.on('exit', () => {
    exited = true;
    running.delete(child);
  });
  for (let i = 0; i < 100 && !exited; i++) {
    if (await accepts(port)) {
      return {
        log: () => log,
        stop: async () => {
          if (exited) return;
          const gone = new Promise((resolve) => child.once('exit', resolve));
          child.kill('SIGTERM');
          await gone;
        },
      };
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  child.kill('SIGKILL');
  return undefined;
}
