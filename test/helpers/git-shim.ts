// A `git` first on PATH that notes the arguments of each command it runs (one line each, apart by
// tabs) and, with `trace`, turns on git's trace for it (and so for the processes git starts in
// turn; with `packets`, its packet trace too: the protocol lines), then runs the real git. With `beforeFirst`, a shell script runs just before the first
// command of that name (to move the remote under a run, say).
import { execFileSync } from 'node:child_process';
import { chmod, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tempDir } from './run-script.js';

export interface GitShim {
  /** A PATH with the shim first. */
  readonly path: string;
  /** The commands run since the last `reset`, each as its arguments. */
  commands(): Promise<string[][]>;
  /** git's trace since the last `reset` (empty without `trace`). */
  trace(): Promise<string>;
  reset(): Promise<void>;
  cleanup(): Promise<void>;
}

/** The real git, for scripts the shim runs. */
export const realGit = execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim();

export async function gitShim(
  options: {
    trace?: boolean;
    packets?: boolean;
    beforeFirst?: { command: string; script: string };
  } = {},
): Promise<GitShim> {
  const bin = await tempDir('pool-git-shim-');
  const commands = join(bin, 'commands');
  const trace = join(bin, 'trace');
  const traced =
    (options.trace ? `GIT_TRACE='${trace}' ` : '') +
    (options.packets ? `GIT_TRACE_PACKET='${trace}' ` : '');
  const { beforeFirst } = options;
  const before = beforeFirst
    ? `if [ "$1" = '${beforeFirst.command}' ] && mkdir '${join(bin, 'ran')}' 2>/dev/null; then\n${beforeFirst.script}\nfi\n`
    : '';
  await writeFile(
    join(bin, 'git'),
    `#!/bin/sh\n(IFS='\t'; echo "$*") >> '${commands}'\n${before}${traced}exec '${realGit}' "$@"\n`,
  );
  await chmod(join(bin, 'git'), 0o755);
  const read = (file: string) => readFile(file, 'utf8').catch(() => '');
  return {
    path: `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}`,
    commands: async () =>
      (await read(commands))
        .split('\n')
        .filter(Boolean)
        .map((line) => line.split('\t')),
    trace: () => read(trace),
    reset: async () => {
      await rm(commands, { force: true });
      await rm(trace, { force: true });
    },
    cleanup: () => rm(bin, { recursive: true, force: true }),
  };
}
