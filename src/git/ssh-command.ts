// The command git runs as its SSH program (GIT_SSH_COMMAND, src/ssh-main.ts): node with
// dist/bin/ssh.js next to this module's dist/git/, or the single executable itself with its
// `ssh` argument, which it names here before any git runs (src/single-executable.ts).
import { fileURLToPath } from 'node:url';

let command: readonly string[] | undefined;

/** Makes `argv` the SSH program of every git environment made from now on. */
export function useSshCommand(argv: readonly string[]): void {
  command = argv;
}

export function sshCommand(): readonly string[] {
  // Resolved only when asked: the single executable has no module URL to resolve it against.
  return command ?? [process.execPath, fileURLToPath(new URL('../bin/ssh.js', import.meta.url))];
}
