// What the stopping tests share: a run with its own TMPDIR (so its processes can be found), a
// signal sent to the started process only with the time it took to exit and to close both pipes,
// and a TCP server that accepts connections and never answers.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { processesWithTmpdir, type LeftoverProcess } from './leftover-processes.js';
import { startScript, type RunningScript, type ScriptResult } from './run-script.js';

export interface StoppableRun extends RunningScript {
  tmpdir: string;
  /** Processes of this run still alive, apart from the started one. */
  leftovers(): Promise<LeftoverProcess[]>;
  cleanup(): Promise<void>;
}

export async function startStoppable(
  script: string,
  request: unknown,
  args: string[],
  env?: Record<string, string>,
): Promise<StoppableRun> {
  const dir = await mkdtemp(join(tmpdir(), 'pool-stop-'));
  const run = startScript(script, request, { args, tmpdir: dir, env });
  return {
    ...run,
    tmpdir: dir,
    leftovers: async () =>
      (await processesWithTmpdir(dir)).filter((process) => process.pid !== run.child.pid),
    // A run SIGKILLed leaves its git children to end on their own: one may still be writing
    // there while the folder goes (ENOTEMPTY).
    cleanup: () => rm(dir, { recursive: true, force: true, maxRetries: 5 }),
  };
}

export interface Stopped extends ScriptResult {
  /** Milliseconds from the signal until the process exited, and until both pipes reached EOF. */
  exitAfterSignal: number;
  eofAfterSignal: number;
}

/** Sends `signal` to the started process only (as Concourse does) and waits for exit and EOF. */
export async function stop(run: RunningScript, signal: NodeJS.Signals): Promise<Stopped> {
  const sent = Date.now();
  run.child.kill(signal);
  const result = await run.done;
  const eofAfterSignal = Date.now() - sent;
  return {
    ...result,
    eofAfterSignal,
    exitAfterSignal: eofAfterSignal - (result.eofMs - result.exitMs),
  };
}

export interface SilentServer {
  port: number;
  /** How many connections it has accepted. */
  connections(): number;
  close(): Promise<void>;
}

/** Accepts every connection and never sends a byte: a remote that hangs. */
export async function startSilentServer(port = 0): Promise<SilentServer> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server: Server = createServer((socket) => {
    accepted++;
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', () => resolve()));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return {
    port: address.port,
    connections: () => accepted,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A build folder holding `step/name` (and `step/metadata`). */
export async function stepFolder(name: string, metadata?: string): Promise<string> {
  const src = await mkdtemp(join(tmpdir(), 'pool-step-'));
  await mkdir(join(src, 'step'));
  await writeFile(join(src, 'step', 'name'), `${name}\n`);
  if (metadata !== undefined) await writeFile(join(src, 'step', 'metadata'), metadata);
  return src;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until a process of `run` runs a command matching `command`. */
export async function waitForProcess(run: StoppableRun, command: RegExp): Promise<void> {
  for (const started = Date.now(); ; await sleep(20)) {
    if ((await run.leftovers()).some((process) => command.test(process.command))) return;
    if (Date.now() - started > 20_000) throw new Error(`no process ran ${command}`);
  }
}
