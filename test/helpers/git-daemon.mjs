// @ts-check
// A real `git daemon` on 127.0.0.1 serving a folder of bare repositories, with receive-pack on;
// shared by the tests and the bench. git daemon never says which port it bound, so a free port is
// picked first (retrying on a clash) and the daemon is polled until it accepts connections.
import { execFileSync, spawn } from 'node:child_process';
import { join, relative } from 'node:path';
import { accepts, freePort, whenListening } from './net.mjs';

/**
 * @typedef {object} GitDaemon
 * @property {number} port
 * @property {(bareRepo: string) => string} url `git://127.0.0.1:PORT/<path relative to the base folder>`
 * @property {() => string} log Everything the daemon logged (one line per connection with --verbose).
 * @property {() => Promise<void>} stop
 */

function daemonBinary() {
  const execPath = execFileSync('git', ['--exec-path'], { encoding: 'utf8' }).trim();
  return join(execPath, 'git-daemon');
}

/**
 * @param {string} basePath
 * @param {{ env?: NodeJS.ProcessEnv }} [options] the daemon's environment (default: this one's)
 * @returns {Promise<GitDaemon>}
 */
export async function startGitDaemon(basePath, options = {}) {
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    // The daemon binary itself, not `git daemon`: the `git` wrapper runs it as a child and, when
    // signalled, dies without it, leaving an orphan that keeps serving the port.
    const child = spawn(
      daemonBinary(),
      [
        '--reuseaddr',
        '--verbose',
        '--export-all',
        '--enable=receive-pack',
        '--listen=127.0.0.1',
        `--port=${port}`,
        `--base-path=${basePath}`,
        basePath,
      ],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
        // A process group of its own, with the children it starts for its connections.
        detached: true,
        ...(options.env ? { env: options.env } : {}),
      },
    );
    const server = await whenListening(child, port);
    if (!server) continue;
    return {
      port,
      url: (bareRepo) => `git://127.0.0.1:${port}/${relative(basePath, bareRepo)}`,
      log: server.log,
      stop: async () => {
        // As a service manager stops it: the daemon and the connections it serves. A connection's
        // upload-pack left running would keep serving a put's kept session with no daemon behind.
        // SIGKILL: they inherit an ignored SIGTERM here.
        try {
          if (child.pid) process.kill(-child.pid, 'SIGKILL');
        } catch {
          // Already gone.
        }
        await server.stop();
        // A connection's child process can hold the listening socket a moment longer:
        // a test that stops the daemon must see the port refuse.
        for (let i = 0; i < 100 && (await accepts(port)); i++) {
          await new Promise((r) => setTimeout(r, 20));
        }
      },
    };
  }
  throw new Error('git daemon did not start');
}
