// The single executable's commands (`npm run binary`): check, in, out and pool in one file with
// Node inside, chosen by the name it is called as (links named check, in, out, pool) or by its
// first argument. It is git's SSH program too (first argument `ssh`), so a machine needs only git
// besides it. scripts/binary.mjs bundles it with an entry that calls start().
import { basename } from 'node:path';
import { useSshCommand } from './git/ssh-command.js';
import { main } from './main.js';

const COMMANDS = ['check', 'in', 'out', 'pool'] as const;
type CommandName = (typeof COMMANDS)[number];

function isCommand(name: string | undefined): name is CommandName {
  return (COMMANDS as readonly (string | undefined)[]).includes(name);
}

async function run(name: CommandName): Promise<void> {
  switch (name) {
    case 'check':
      return main((await import('./commands/check.js')).runCheck);
    case 'in':
      return main((await import('./commands/in.js')).runIn);
    case 'out':
      return main((await import('./commands/out.js')).runOut);
    case 'pool':
      return main((await import('./commands/pool.js')).runPool, {
        readStdin: false,
        render: (text) => String(text),
      });
  }
}

/** Runs the command `argv` (process.argv) names. */
export async function start(argv: string[]): Promise<void> {
  // A single executable's argv is [executable, the name it was called as, ...arguments].
  const calledAs = basename(argv[1] ?? '');
  const first = argv[2];
  if (first === 'ssh') {
    const { sshMain } = await import('./ssh-main.js');
    return sshMain(argv.slice(3));
  }
  // git starts this file again, by its own path, as its SSH program.
  useSshCommand([process.execPath, 'ssh']);
  if (isCommand(calledAs)) return run(calledAs);
  if (isCommand(first)) {
    // The commands read their arguments from argv[2] on, as when called by name.
    argv.splice(2, 1);
    return run(first);
  }
  process.stderr.write(
    `usage: ${calledAs || 'pool-resource'} check|in|out|pool [ARGUMENTS], or a link named check, in, out or pool to it\n`,
  );
  process.exitCode = 1;
}
