// Runs assets/{check,in,out} exactly as a Concourse worker does: JSON on stdin, stdout and
// stderr as pipes read to end-of-file, signals sent to the started process only.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

// POOL_RESOURCE_ASSETS points the end-to-end tests at an installed payload (the image's tests stage
// sets it to /opt/resource); by default they run the repository's assets/ scripts.
export const ASSETS =
  process.env.POOL_RESOURCE_ASSETS ?? resolve(import.meta.dirname, '../../assets');

/** The SSH program git runs for those scripts: the payload's own, or the build's in dist/. */
export const SSH_PROGRAM = process.env.POOL_RESOURCE_ASSETS
  ? join(process.env.POOL_RESOURCE_ASSETS, 'bin', 'ssh.js')
  : resolve(import.meta.dirname, '../../dist/bin/ssh.js');

export interface ScriptResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Milliseconds from spawn until exit, and until both pipes reached EOF. */
  exitMs: number;
  eofMs: number;
}

export interface RunningScript {
  child: ChildProcess;
  /** Resolves once the process exited and both pipes are at EOF. */
  done: Promise<ScriptResult>;
  stderrSoFar(): string;
  /** Resolves when stderr has printed a line matching `pattern`. */
  waitForStderr(pattern: RegExp, timeoutMs?: number): Promise<void>;
}

export interface RunOptions {
  args?: string[];
  env?: Record<string, string>;
  /** Where the scripts' and git's temporary folders go (tests use it to find leftover processes). */
  tmpdir?: string;
  assets?: string;
  /** A program and arguments that start the script in turn (e.g. chroot into a root filesystem). */
  prefix?: string[];
}

export function startScript(
  script: string,
  request: unknown,
  options: RunOptions = {},
): RunningScript {
  const started = Date.now();
  const [file, ...prefixArgs] = [...(options.prefix ?? []), join(options.assets ?? ASSETS, script)];
  const child = spawn(file!, [...prefixArgs, ...(options.args ?? [])], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? '/root',
      // The test run's own (test/own-tmpdir.ts), unless the test gives one.
      ...(process.env.TMPDIR ? { TMPDIR: process.env.TMPDIR } : {}),
      ...(options.tmpdir ? { TMPDIR: options.tmpdir } : {}),
      ...options.env,
    },
  });
  let stdout = '';
  let stderr = '';
  const watchers: { pattern: RegExp; resolve: () => void }[] = [];
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
    for (const watcher of [...watchers]) {
      if (watcher.pattern.test(stderr)) {
        watchers.splice(watchers.indexOf(watcher), 1);
        watcher.resolve();
      }
    }
  });
  const eof = (stream: NodeJS.ReadableStream) =>
    new Promise<void>((res) => stream.on('end', () => res()));
  let exitMs = 0;
  const exited = new Promise<[number | null, NodeJS.Signals | null]>((res) =>
    child.on('exit', (code, signal) => {
      exitMs = Date.now() - started;
      res([code, signal]);
    }),
  );
  const done = Promise.all([exited, eof(child.stdout!), eof(child.stderr!)]).then(
    ([[code, signal]]) => ({
      code,
      signal,
      stdout,
      stderr,
      exitMs,
      eofMs: Date.now() - started,
    }),
  );
  child.stdin!.on('error', () => undefined);
  child.stdin!.end(typeof request === 'string' ? request : JSON.stringify(request));
  return {
    child,
    done,
    stderrSoFar: () => stderr,
    waitForStderr(pattern, timeoutMs = 30_000) {
      if (pattern.test(stderr)) return Promise.resolve();
      return new Promise((res, rej) => {
        const timer = setTimeout(
          () => rej(new Error(`stderr never matched ${pattern}: ${stderr}`)),
          timeoutMs,
        );
        watchers.push({
          pattern,
          resolve: () => {
            clearTimeout(timer);
            res();
          },
        });
      });
    },
  };
}

export function runScript(
  script: string,
  request: unknown,
  options: RunOptions = {},
): Promise<ScriptResult> {
  return startScript(script, request, options).done;
}

export async function tempDir(prefix = 'pool-step-'): Promise<string> {
  return mkdtemp(join(tmpdir(), prefix));
}
