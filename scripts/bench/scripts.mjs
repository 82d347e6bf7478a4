// @ts-check
// The resource's scripts, run as Concourse runs them: JSON on stdin, one JSON document out.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { ASSETS, NODE_DIR } from './options.mjs';
import { GIT_ENV, run } from './process.mjs';
import { BRANCH, POOL } from './repository.mjs';

/** GNU time, for the peak memory of a script's processes; the figures are left out without it. */
export const TIME = '/usr/bin/time';

/**
 * Runs one script; rejects unless it exits 0. `assets`: the folder of scripts (the measured
 * payload by default); `peakFile`: run under GNU time, which writes the peak memory there;
 * `pathFirst`: a folder put first on the script's PATH; `started`: called with the child process
 * at once.
 *
 * @param {string} name
 * @param {unknown} request
 * @param {{ args?: string[], tmp?: string, assets?: string, peakFile?: string, pathFirst?: string,
 *   env?: Record<string, string>, started?: (child: import('node:child_process').ChildProcess) => void }} options
 */
export async function script(
  name,
  request,
  { args = [], tmp, assets = ASSETS, peakFile, pathFirst, env = {}, started: onStart },
) {
  const started = performance.now();
  // With peakFile, GNU time runs the script and writes there the largest resident set of the
  // script and every process it waited for (its git children, theirs): `%M`, in KiB.
  const [command, argv] = peakFile
    ? [TIME, ['-f', '%M', '-o', peakFile, join(assets, name), ...args]]
    : [join(assets, name), args];
  const child = spawn(command, argv, {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: {
      PATH: [pathFirst, NODE_DIR, GIT_ENV.PATH].filter(Boolean).join(':'),
      HOME: GIT_ENV.HOME,
      TMPDIR: tmp,
      ...env,
    },
  });
  onStart?.(child);
  const out = [];
  const err = [];
  child.stdout.on('data', (chunk) => out.push(chunk));
  child.stderr.on('data', (chunk) => err.push(chunk));
  child.stdin.on('error', () => undefined);
  child.stdin.end(JSON.stringify(request));
  const code = await new Promise((done) => child.on('close', (c) => done(c)));
  const ms = performance.now() - started;
  const stdout = Buffer.concat(out).toString('utf8');
  const stderr = Buffer.concat(err).toString('utf8');
  if (code !== 0) throw new Error(`${name} exited ${code}: ${stderr}`);
  return { ms, result: JSON.parse(stdout), stderr, started, ended: started + ms };
}

/**
 * Readies the scripts as the image does (Dockerfile): a `.compile-cache` folder beside them, filled
 * by running each once with no request, so that a node that keeps compiled code (>= 22.1) does not
 * compile them again at every start. Returns the version of the node they run with.
 */
export async function prepareScripts() {
  const env = { PATH: [NODE_DIR, GIT_ENV.PATH].filter(Boolean).join(':'), HOME: GIT_ENV.HOME };
  if (existsSync(join(ASSETS, 'bin'))) {
    await mkdir(join(ASSETS, '.compile-cache'), { recursive: true });
    for (const name of ['check', 'in', 'out', 'pool']) {
      await run(join(ASSETS, name), [], { env }).catch(() => undefined);
    }
  }
  return (await run('node', ['--version'], { env })).stdout.trim();
}

/** `extra`: more source fields, e.g. the SSH private_key. */
export function source(uri, retryDelay = '1s', extra = {}) {
  return { uri, branch: BRANCH, pool: POOL, retry_delay: retryDelay, ...extra };
}

export async function stepFolder(root, name) {
  const src = await mkdtemp(join(root, 'src-'));
  await mkdir(join(src, 'lock'));
  await writeFile(join(src, 'lock', 'name'), `${name}\n`);
  return src;
}

export const lockName = (response) => response.metadata.find((m) => m.name === 'lock_name').value;
