// The SSH program git runs (GIT_SSH_COMMAND): the only code of that program that touches
// `process`. It exits when its work is done, when git goes away, or on a stop signal. It relays
// git's command to the run's shared connection when the run offers one, and else connects on its
// own; only then does it load ssh2, so a relay starts in Node's own time. Started as
// dist/bin/ssh.js by node, or as the single executable's `ssh` (src/single-executable.ts).
import { parseSshConfig, SSH_CONFIG_ENV, SSH_FAILED, SSH_MUX_ENV } from './transport/ssh-config.js';
import { relayToMux } from './transport/ssh-relay.js';

/** How often to look whether git (our parent) is still there. */
const PARENT_POLL_MS = 500;

/** Runs the program with git's arguments `args`, then exits. */
export async function sshMain(args: string[]): Promise<void> {
  const controller = new AbortController();
  const parent = process.ppid;
  const watch = setInterval(() => {
    // Reparented: git died without closing our pipes (SIGKILL of its group leaves us orphaned).
    if (process.ppid !== parent) controller.abort();
  }, PARENT_POLL_MS);
  watch.unref();
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGPIPE'] as const)
    process.on(signal, () => controller.abort());
  // git shows our stderr to the user: one line, never a stack trace.
  process.on('uncaughtException', (error) => {
    process.stderr.write(`ssh: ${error.message.split('\n')[0] ?? 'failed'}\n`, () =>
      process.exit(SSH_FAILED),
    );
  });

  let code: number;
  const socketPath = process.env[SSH_MUX_ENV];
  const settings = process.env[SSH_CONFIG_ENV];
  if (socketPath) {
    code = await relayToMux({
      socketPath,
      args,
      env: process.env,
      stdin: process.stdin,
      stdout: process.stdout,
      stderr: process.stderr,
      signal: controller.signal,
    });
  } else if (!settings) {
    process.stderr.write(
      `ssh: ${SSH_MUX_ENV} or ${SSH_CONFIG_ENV} must be set: this program is run by pool-resource's git\n`,
    );
    code = SSH_FAILED;
  } else {
    let config;
    try {
      config = parseSshConfig(settings);
    } catch {
      // Never quoted: it holds the key.
      process.stderr.write(`ssh: cannot read ${SSH_CONFIG_ENV}\n`);
    }
    const { runSsh } = await import('./transport/ssh-session.js');
    code = !config
      ? SSH_FAILED
      : await runSsh({
          args,
          env: process.env,
          config,
          stdin: process.stdin,
          stdout: process.stdout,
          stderr: process.stderr,
          signal: controller.signal,
        });
  }
  // Exit once what we wrote has reached git (the relays above return only once stdout has it);
  // stdin may still be open. Never end() stderr: it is git's own, and where git's runner made it
  // a socket (Node's child stdio is a socketpair) our end() is a shutdown for git too: git's next
  // line there ("error: failed to push some refs", after a push it rejected itself) killed it
  // with SIGPIPE, its verdict still unwritten.
  process.stderr.write('', () => process.exit(code));
}
