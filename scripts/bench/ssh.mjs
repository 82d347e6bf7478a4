// @ts-check
// Over SSH: the same operations, and the contention run, once as the resource runs (one SSH
// connection per run) and once with a connection per git command, which a TMPDIR too long for
// the run's socket forces. The two take turns round by round, so they compare within one run.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { measureContention } from './contention.mjs';
import { measureRound, setupSize, summarise } from './operations.mjs';
import { opts, REFERENCE, reps } from './options.mjs';
import { referenceScripts } from './reference.mjs';
import { startSshd } from './servers.mjs';

export const SSH_COMMITS = 100;

export async function measureSsh(root) {
  const sshd = await startSshd(root, join(root, 'repos'));
  try {
    // The run's socket goes in TMPDIR/pool-resource-XXXXXX/: past 107 bytes it cannot be made.
    const longTmp = join(root, 'x'.repeat(110));
    await mkdir(longTmp);
    const extra = { private_key: sshd.privateKey };
    const modes = {
      shared: await setupSize(root, sshd, SSH_COMMITS, {
        name: 'ssh-shared.git',
        sourceExtra: extra,
      }),
      perCommand: await setupSize(root, sshd, SSH_COMMITS, {
        name: 'ssh-per-command.git',
        sourceExtra: extra,
        scratchRoot: longTmp,
      }),
    };
    for (let rep = 0; rep < reps; rep++) {
      process.stderr.write(`over SSH, round ${rep + 1} of ${reps}…\n`);
      await measureRound(root, sshd, Object.values(modes), rep, { floors: false });
    }
    const result = {
      commits: SSH_COMMITS,
      operations: Object.fromEntries(Object.entries(modes).map(([k, m]) => [k, summarise(m)])),
    };
    if (!opts['no-contention']) {
      result.contention = {};
      for (const [key, tmpRoot] of [
        ['perCommand', longTmp],
        ['shared', root],
      ]) {
        process.stderr.write(`contention over SSH, ${SSH_MODES[key]}…\n`);
        result.contention[key] = await measureContention(root, sshd, {
          name: `contention-ssh-${key}.git`,
          extra,
          tmpRoot,
        });
      }
      if (REFERENCE) {
        process.stderr.write("contention over SSH with the reference's scripts…\n");
        const scripts = referenceScripts();
        result.reference = await measureContention(root, sshd, {
          name: 'contention-ssh-reference.git',
          extra,
          // OpenSSH reads ~/.ssh/ from the user's passwd entry, not $HOME: the options the
          // reference writes to ~/.ssh/config (its image's HOME is that entry's) go on the
          // command line, and the host key it accepts nowhere, not in this machine's known_hosts.
          scripts: {
            ...scripts,
            env: {
              ...scripts.env,
              GIT_SSH_COMMAND:
                'ssh -F /dev/null -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=quiet',
            },
          },
        });
      }
    }
    return result;
  } finally {
    await sshd.stop();
  }
}

export const SSH_MODES = {
  shared: 'one connection per run',
  perCommand: 'one connection per git command',
};
