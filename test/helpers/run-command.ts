// Runs check, in, out or pool in this process, over the same CommandContext `main` builds: the
// request as a string, the log into a buffer, the system clock, then the exit tasks, as at the
// end of a real run. For what needs no process of its own (refusals, parsing, check, in, simple
// operations); stopping, pipes, packaging and SSH (git's SSH program is the built one) go through
// run-script.ts instead. Against an installed payload (POOL_RESOURCE_ASSETS, the image's tests
// stage) the same calls run that payload's scripts, so they test what is installed.
import { randomUUID } from 'node:crypto';
import { runCheck } from '../../src/commands/check.js';
import { IN_USAGE, runIn } from '../../src/commands/in.js';
import { OUT_USAGE, runOut } from '../../src/commands/out.js';
import { runPool } from '../../src/commands/pool.js';
import { Logger } from '../../src/base/logger.js';
import { ConfigurationError } from '../../src/base/errors.js';
import { reportFailure, systemClock } from '../../src/main.js';
import type { CommandContext } from '../../src/run/context.js';
import { runScript } from './run-script.js';

export type CommandName = 'check' | 'in' | 'out' | 'pool';

export interface CommandResult {
  code: 0 | 1;
  stdout: string;
  stderr: string;
}

export interface CommandOptions {
  /** The request: a string is sent as is, anything else as JSON. */
  stdin?: unknown;
  args?: readonly string[];
  env?: Record<string, string>;
}

/** What `src/bin/*.ts` hands to `main` for each command. */
interface Entry {
  run: (ctx: CommandContext) => Promise<unknown>;
  /** Said as the failure when there is no folder argument. */
  usage?: string;
  /** stdout's text (default: one JSON document). */
  render?: (result: unknown) => string;
}

const commands: Record<CommandName, Entry> = {
  check: { run: runCheck },
  in: { run: runIn, usage: IN_USAGE },
  out: { run: runOut, usage: OUT_USAGE },
  pool: { run: runPool, render: (result: unknown) => String(result) },
};

export async function runCommand(
  name: CommandName,
  options: CommandOptions = {},
): Promise<CommandResult> {
  const command = commands[name];
  const { stdin = '', args = [], env = {} } = options;
  if (process.env.POOL_RESOURCE_ASSETS) {
    const { code, stdout, stderr } = await runScript(name, stdin, { args: [...args], env });
    if (code !== 0 && code !== 1) throw new Error(`${name} exited ${code}: ${stderr}`);
    return { code, stdout, stderr };
  }
  let stderr = '';
  const log = new Logger((text) => (stderr += text));
  const exitTasks: (() => Promise<void>)[] = [];
  const ctx: CommandContext = {
    stdin: typeof stdin === 'string' ? stdin : JSON.stringify(stdin),
    args,
    // As run-script.ts gives a spawned script: PATH, HOME, the run's TMPDIR, and what the test adds.
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? '/root',
      ...(process.env.TMPDIR ? { TMPDIR: process.env.TMPDIR } : {}),
      ...env,
    },
    log,
    signal: new AbortController().signal,
    clock: systemClock,
    newToken: () => randomUUID(),
    // Nothing stops an in-process run: stopping is tested on real processes.
    onAbort: () => undefined,
    onExit: (task) => exitTasks.push(task),
    onForcedExit: () => undefined,
  };
  let stdout = '';
  let code: 0 | 1 = 0;
  try {
    if (!args[0] && command.usage !== undefined) throw new ConfigurationError([command.usage]);
    const result = await command.run(ctx);
    stdout = (command.render ?? ((value) => `${JSON.stringify(value)}\n`))(result);
  } catch (error) {
    reportFailure(log, error);
    code = 1;
  }
  for (const task of exitTasks) await task().catch(() => undefined);
  return { code, stdout, stderr };
}
