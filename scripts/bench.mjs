#!/usr/bin/env node
// `npm run bench`: how the resource's time and memory grow with the lock repository's history
// and how it behaves under contention, measured through the real check, in and out over `git
// daemon` on 127.0.0.1, next to the plain-git floor measured in the same run. Prints a table and
// writes bench-results/bench-<time>.json. The scripts measured are the packaged payload in
// build/resource/ (`npm run package`: what the image installs at /opt/resource), or another
// folder of scripts with --assets (assets/ runs the unbundled build in dist/).
//
//   node scripts/bench.mjs [--quick] [--sizes 100,10000,100000] [--reps 9]
//                          [--workers 8] [--locks 2] [--rounds 3] [--hold-ms 200]
//                          [--retry-delay 1s] [--no-contention] [--no-kills] [--no-ssh]
//                          [--keep] [--out FILE] [--assets build/resource]
//
// The contention run is measured twice over git daemon: as it is, and with puts SIGKILLed while
// they wait (a lost worker: before each round a worker starts a second put, which is killed once
// it waits in line; --no-kills leaves that out). Both report the longest time a lock stayed free
// while a put that was not killed waited for one.
//
// With OpenSSH's sshd installed (and without --no-ssh), the operations and the contention run are
// also measured over SSH, once as the resource runs (one connection per run) and once with a
// connection per git command (a TMPDIR too long for the run's socket forces that), alternating.
//
// --quick takes 3 rounds per size instead of 9. Sizes take turns round by round, so a burst of
// load from elsewhere on the machine lands on every size alike; the figures to compare are the
// ratios within one run.
import { spawn } from 'node:child_process';
import { createServer, connect } from 'node:net';
import { existsSync, writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir, cpus, loadavg, userInfo } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';

const ROOT = resolve(import.meta.dirname, '..');
const BRANCH = 'master';
const POOL = 'pool';
/** Locks in the measured pool; a few other pools make some commits irrelevant to `check`. */
const POOL_LOCKS = 8;
const OTHER_POOLS = ['other-a', 'other-b'];

const { values: opts } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    sizes: { type: 'string' },
    reps: { type: 'string' },
    workers: { type: 'string', default: '8' },
    locks: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '3' },
    'hold-ms': { type: 'string', default: '200' },
    // A short but realistic setting (the default is 10s): waiters poll once a second.
    'retry-delay': { type: 'string', default: '1s' },
    'no-contention': { type: 'boolean', default: false },
    'no-kills': { type: 'boolean', default: false },
    'no-ssh': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
    out: { type: 'string' },
    // The scripts to measure: the payload `npm run package` writes (what the image puts in
    // /opt/resource), or assets/ (the unbundled build in dist/), or an installed payload.
    assets: { type: 'string', default: 'build/resource' },
  },
});
const ASSETS = resolve(ROOT, opts.assets);
const sizes = (opts.sizes ?? '100,10000,100000').split(',').map(Number);
const reps = Number(opts.reps ?? (opts.quick ? 3 : 9));
const contention = {
  workers: Number(opts.workers),
  locks: Number(opts.locks),
  rounds: Number(opts.rounds),
  holdMs: Number(opts['hold-ms']),
  retryDelay: opts['retry-delay'],
};

const GIT_ENV = {
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  HOME: process.env.HOME ?? '/root',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_AUTHOR_NAME: 'Bench',
  GIT_AUTHOR_EMAIL: 'bench@localhost',
  GIT_COMMITTER_NAME: 'Bench',
  GIT_COMMITTER_EMAIL: 'bench@localhost',
  GIT_TERMINAL_PROMPT: '0',
};

/** Runs a program with pipes; resolves with its output, rejects on a non-zero exit. */
function run(cmd, args, { cwd, env = GIT_ENV, input } = {}) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
    const out = [];
    const err = [];
    child.stdout.on('data', (chunk) => out.push(chunk));
    child.stderr.on('data', (chunk) => err.push(chunk));
    child.stdin.on('error', () => undefined);
    if (input !== undefined) child.stdin.end(input);
    else child.stdin.end();
    child.on('error', reject);
    child.on('close', (code) => {
      const stdout = Buffer.concat(out).toString('utf8');
      const stderr = Buffer.concat(err).toString('utf8');
      if (code === 0) resolvePromise({ stdout, stderr });
      else reject(new Error(`${cmd} ${args.join(' ')} exited ${code}: ${stderr}${stdout}`));
    });
  });
}

const git = (cwd, ...args) => run('git', ['-c', 'gc.auto=0', ...args], { cwd });

// ---------------------------------------------------------------------------------------------
// Lock repositories of a given history length, written with git fast-import.

/**
 * A bare repository on `master` whose history has `commits` commits: the pools, then claims and
 * releases taking turns over the locks (one in ten about another pool). Every lock of `pool` is
 * unclaimed at the tip.
 */
async function buildRepository(path, commits, locks = POOL_LOCKS) {
  await git(tmpdir(), 'init', '--quiet', '--bare', `--initial-branch=${BRANCH}`, path);
  const parts = [];
  let time = 1_600_000_000;
  let mark = 0;
  const commit = (message, changes) => {
    mark++;
    const body = Buffer.from(`${message}\n`);
    parts.push(
      `commit refs/heads/${BRANCH}\nmark :${mark}\ncommitter Bench <bench@localhost> ${time++} +0000\n`,
      `data ${body.length}\n`,
      body,
      mark > 1 ? `from :${mark - 1}\n` : '',
      ...changes.map((line) => `${line}\n`),
      '\n',
    );
  };
  const inline = (path, content) => {
    const data = Buffer.from(content);
    return `M 100644 inline ${path}\ndata ${data.length}\n${content}`;
  };
  const lockNames = Array.from({ length: locks }, (_, i) => `lock-${i}`);
  const initial = [inline('README.md', 'locks\n')];
  for (const pool of [POOL, ...OTHER_POOLS]) {
    initial.push(inline(`${pool}/claimed/.gitkeep`, ''), inline(`${pool}/unclaimed/.gitkeep`, ''));
    for (const name of lockNames)
      initial.push(inline(`${pool}/unclaimed/${name}`, `{"pool":"${pool}","name":"${name}"}\n`));
  }
  commit('initial pools', initial);
  // Pairs of claim + release, so every lock is unclaimed again at the tip.
  let i = 0;
  while (mark < commits) {
    const pool = i % 10 === 9 ? OTHER_POOLS[i % OTHER_POOLS.length] : POOL;
    const name = lockNames[i % lockNames.length];
    const claimed = `${pool}/claimed/${name}`;
    const unclaimed = `${pool}/unclaimed/${name}`;
    commit(`claiming: ${name}`, [`R ${unclaimed} ${claimed}`]);
    commit(`unclaiming: ${name}`, [`R ${claimed} ${unclaimed}`]);
    i++;
  }
  const stream = [];
  for (const part of parts) stream.push(typeof part === 'string' ? Buffer.from(part) : part);
  await run('git', ['fast-import', '--quiet'], { cwd: path, input: Buffer.concat(stream) });
  await git(path, 'repack', '-a', '-d', '-q');
  const count = Number((await git(path, 'rev-list', '--count', BRANCH)).stdout.trim());
  return count;
}

// ---------------------------------------------------------------------------------------------
// git daemon on 127.0.0.1, its --verbose log counting connections.

async function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolvePort(port));
    });
  });
}

function accepts(port) {
  return new Promise((resolveAccepts) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolveAccepts(true);
    });
    socket.once('error', () => resolveAccepts(false));
  });
}

/**
 * Starts a server that logs to stderr and waits until it accepts on its port; tries another free
 * port when it exits first (the port was taken).
 */
async function startServer(what, spawnOn) {
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const child = spawnOn(port);
    let log = '';
    child.stderr.setEncoding('utf8').on('data', (chunk) => (log += chunk));
    let exited = false;
    child.on('exit', () => (exited = true));
    for (let i = 0; i < 100 && !exited; i++) {
      if (await accepts(port)) {
        return {
          port,
          log: () => log,
          stop: () =>
            new Promise((done) => {
              if (exited) return done();
              child.once('exit', () => done());
              child.kill('SIGTERM');
            }),
        };
      }
      await sleep(50);
    }
    child.kill('SIGKILL');
  }
  throw new Error(`${what} did not start`);
}

async function startDaemon(base) {
  const server = await startServer('git daemon', (port) =>
    spawn(
      'git',
      [
        'daemon',
        '--reuseaddr',
        '--verbose',
        '--export-all',
        '--enable=receive-pack',
        '--listen=127.0.0.1',
        `--port=${port}`,
        `--base-path=${base}`,
        base,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'], env: GIT_ENV },
    ),
  );
  // Our own probes count as connections too: start counting from here.
  await sleep(100);
  const offset = connections(server.log());
  return {
    url: (name) => `git://127.0.0.1:${server.port}/${name}`,
    connections: () => connections(server.log()) - offset,
    pushes: () => (server.log().match(/Request receive-pack /g) ?? []).length,
    stop: server.stop,
  };
}

const SSHD = '/usr/sbin/sshd';

/**
 * OpenSSH's sshd on 127.0.0.1 serving `base` by absolute path, with a client key of its own. Its
 * "connections" are logins; it does not log which commands are pushes.
 */
async function startSshd(root, base) {
  const dir = join(root, 'sshd');
  await mkdir(dir);
  // sshd's privilege separation folder; containers may not have it.
  await mkdir('/run/sshd', { recursive: true, mode: 0o755 });
  for (const key of ['host', 'client'])
    await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', key, '-f', join(dir, key)]);
  await writeFile(join(dir, 'authorized_keys'), await readFile(join(dir, 'client.pub')));
  const server = await startServer('sshd', (port) => {
    const config = join(dir, `sshd_config-${port}`);
    writeFileSync(
      config,
      [
        `Port ${port}`,
        'ListenAddress 127.0.0.1',
        `HostKey ${join(dir, 'host')}`,
        'PidFile none',
        `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
        'StrictModes no',
        'PasswordAuthentication no',
        'KbdInteractiveAuthentication no',
        'PermitRootLogin prohibit-password',
        'UsePAM no',
        'AcceptEnv GIT_PROTOCOL',
        'LogLevel VERBOSE',
        '',
      ].join('\n'),
    );
    return spawn(SSHD, ['-D', '-e', '-f', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  });
  const logins = () => (server.log().match(/Accepted publickey for /g) ?? []).length;
  return {
    url: (name) => `ssh://${userInfo().username}@127.0.0.1:${server.port}${join(base, name)}`,
    privateKey: await readFile(join(dir, 'client'), 'utf8'),
    connections: logins,
    pushes: () => NaN,
    stop: server.stop,
  };
}

function connections(log) {
  return (log.match(/Connection from /g) ?? []).length;
}

// ---------------------------------------------------------------------------------------------
// The resource's scripts, run as Concourse runs them.

/** GNU time, for the peak memory of a script's processes; the figures are left out without it. */
const TIME = '/usr/bin/time';

async function script(
  name,
  request,
  { args = [], tmp, peakFile, pathFirst, env = {}, started: onStart },
) {
  const started = performance.now();
  // With peakFile, GNU time runs the script and writes there the largest resident set of the
  // script and every process it waited for (its git children, theirs): `%M`, in KiB.
  const [command, argv] = peakFile
    ? [TIME, ['-f', '%M', '-o', peakFile, join(ASSETS, name), ...args]]
    : [join(ASSETS, name), args];
  const child = spawn(command, argv, {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: {
      PATH: pathFirst ? `${pathFirst}:${GIT_ENV.PATH}` : GIT_ENV.PATH,
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

/** `extra`: more source fields, e.g. the SSH private_key. */
function source(uri, retryDelay = '1s', extra = {}) {
  return { uri, branch: BRANCH, pool: POOL, retry_delay: retryDelay, ...extra };
}

async function stepFolder(root, name) {
  const src = await mkdtemp(join(root, 'src-'));
  await mkdir(join(src, 'lock'));
  await writeFile(join(src, 'lock', 'name'), `${name}\n`);
  return src;
}

const lockName = (response) => response.metadata.find((m) => m.name === 'lock_name').value;

// ---------------------------------------------------------------------------------------------
// The plain-git floor: what one claim costs with git alone, with git's defaults (wire protocol
// v2) and with the wire protocol v0 that the resource speaks over git:// (see wireProtocolVersion
// in src/git/environment.ts): the second is the fair floor for the resource's figures.

async function plainGitClaim(url, work, protocol = []) {
  const started = performance.now();
  await git(tmpdir(), ...protocol, 'clone', '--quiet', '--depth=1', '--branch', BRANCH, url, work);
  const names = (await git(work, 'ls-tree', '--name-only', 'HEAD', `${POOL}/unclaimed/`)).stdout
    .split('\n')
    .filter((path) => path && !path.endsWith('/.gitkeep'));
  const name = names[0].slice(`${POOL}/unclaimed/`.length);
  await git(work, 'mv', `${POOL}/unclaimed/${name}`, `${POOL}/claimed/${name}`);
  await git(work, 'commit', '--quiet', '-m', `claiming: ${name}`);
  await git(work, ...protocol, 'push', '--quiet', 'origin', `HEAD:refs/heads/${BRANCH}`);
  const ms = performance.now() - started;
  // Put it back (not measured).
  await git(work, 'mv', `${POOL}/claimed/${name}`, `${POOL}/unclaimed/${name}`);
  await git(work, 'commit', '--quiet', '-m', `unclaiming: ${name}`);
  await git(work, 'push', '--quiet', 'origin', `HEAD:refs/heads/${BRANCH}`);
  await rm(work, { recursive: true, force: true });
  return ms;
}

// ---------------------------------------------------------------------------------------------

function median(values) {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/**
 * Builds one size's repository and primes its warm check cache. `name`, `sourceExtra` (the SSH
 * key) and `scratchRoot` (where its TMPDIRs go) serve the SSH measurement.
 */
async function setupSize(
  root,
  daemon,
  commits,
  { name = `locks-${commits}.git`, sourceExtra = {}, scratchRoot = root } = {},
) {
  const building = performance.now();
  const actual = await buildRepository(join(root, 'repos', name), commits);
  const buildMs = performance.now() - building;
  const size = {
    commits: actual,
    buildMs,
    url: daemon.url(name),
    sourceExtra,
    scratchRoot,
    // Concourse reuses the check container between checks: the warm cache lives in its TMPDIR.
    warmTmp: await mkdtemp(join(scratchRoot, 'warm-')),
    samples: {
      acquire: [],
      in: [],
      release: [],
      checkCold: [],
      checkWarm: [],
      floor: [],
      floorV0: [],
    },
    perOp: { acquire: 0, in: 0, release: 0, checkCold: 0, checkWarm: 0 },
  };
  const primed = await script('check', { source: sourceOf(size) }, { tmp: size.warmTmp });
  size.lastVersion = primed.result.at(-1);
  return size;
}

/**
 * The five measured operations, in order, as [script, request, options] for a size and the
 * round's scratch folders `r` (tmp, src, dest, cold). Each may read what the ones before it
 * returned, kept in `r` under its key.
 */
const OPERATIONS = {
  acquire: async (size, r) => [
    'out',
    { source: sourceOf(size), params: { acquire: true } },
    { args: [r.src], tmp: r.tmp },
  ],
  in: async (size, r) => [
    'in',
    { source: sourceOf(size), version: r.acquire.result.version },
    { args: [r.dest], tmp: r.tmp },
  ],
  release: async (size, r) => {
    r.step = await stepFolder(r.root, lockName(r.acquire.result));
    return [
      'out',
      { source: sourceOf(size), params: { release: 'lock' } },
      { args: [r.step], tmp: r.tmp },
    ];
  },
  checkCold: async (size, r) => ['check', { source: sourceOf(size) }, { tmp: r.cold }],
  // Concourse reuses the check container between checks: the warm cache lives in its TMPDIR.
  checkWarm: async (size) => [
    'check',
    { source: sourceOf(size), version: size.lastVersion },
    { tmp: size.warmTmp },
  ],
};

/** The source for what is measured: a size's repository, over git daemon or SSH. */
const sourceOf = (size) => source(size.url, '1s', size.sourceExtra);

/** Scratch folders for one size's run of the operations, all below one folder. */
async function scratch(root) {
  const dir = await mkdtemp(join(root, 'run-'));
  const r = { root: dir };
  for (const name of ['tmp', 'src', 'dest', 'cold']) {
    r[name] = join(dir, name);
    await mkdir(r[name]);
  }
  return r;
}

/**
 * One round of every measurement. Each step runs on every size before the next step, in a
 * shuffled order, so that load from elsewhere on the machine lands on the sizes alike.
 */
async function measureRound(root, daemon, sizes, rep, { floors = true } = {}) {
  const each = async (work) => {
    const order = [...sizes].sort(() => Math.random() - 0.5);
    for (const size of order) await work(size);
  };
  if (floors) await measureFloors(root, sizes, rep, each);
  const round = new Map(
    await Promise.all(sizes.map(async (size) => [size, await scratch(size.scratchRoot ?? root)])),
  );
  for (const [key, operation] of Object.entries(OPERATIONS)) {
    await each(async (size) => {
      const r = round.get(size);
      const start = daemon.connections();
      r[key] = await script(...(await operation(size, r)));
      size.perOp[key] += daemon.connections() - start;
      size.samples[key].push(r[key].ms);
    });
  }
  for (const [size, r] of round) {
    // Answers, not just timings: the warm check ends with this round's release, the cold one is it.
    const { checkWarm: warm, checkCold: cold, release: released } = r;
    if (warm.result.at(-1)?.ref !== released.result.version.ref)
      throw new Error(`warm check missed the release: ${JSON.stringify(warm.result)}`);
    if (cold.result.length !== 1 || cold.result[0].ref !== released.result.version.ref)
      throw new Error(
        `cold check did not return the latest commit: ${JSON.stringify(cold.result)}`,
      );
    size.lastVersion = warm.result.at(-1);
    await rm(r.root, { recursive: true, force: true });
  }
}

async function measureFloors(root, sizes, rep, each) {
  await each(async (size) =>
    size.samples.floor.push(
      await plainGitClaim(size.url, join(root, `floor-${size.commits}-${rep}`)),
    ),
  );
  await each(async (size) =>
    size.samples.floorV0.push(
      await plainGitClaim(size.url, join(root, `floor-v0-${size.commits}-${rep}`), [
        '-c',
        'protocol.version=0',
      ]),
    ),
  );
}

function summarise(size) {
  return {
    commits: size.commits,
    buildMs: size.buildMs,
    medians: Object.fromEntries(Object.entries(size.samples).map(([k, v]) => [k, median(v)])),
    samples: size.samples,
    connections: Object.fromEntries(
      Object.entries(size.perOp).map(([key, count]) => [key, count / reps]),
    ),
    peakMiB: size.peakMiB,
    gitPeakMiB: size.gitPeakMiB,
  };
}

// ---------------------------------------------------------------------------------------------
// Peak memory: each operation once per pass under GNU time, outside the timed rounds (so the
// timings never include time's own start). Two figures, in MiB: the largest single process of
// the operation (the node script itself or a git command it ran), and the largest git command
// alone, which the script's own size would otherwise hide. For the second, a `git` first on the
// script's PATH runs the real one under GNU time too. The resource runs git by its name and
// passes it only a few variables of its own (PATH among them), so the report file's path is
// written into that `git` rather than passed in the environment.

const MEMORY_PASSES = 3;

async function measureMemory(root, sizes) {
  const realGit = (await run('sh', ['-c', 'command -v git'])).stdout.trim();
  const empty = () => Object.fromEntries(Object.keys(OPERATIONS).map((key) => [key, []]));
  const peaks = new Map(sizes.map((size) => [size, { any: empty(), git: empty() }]));
  const kib = (text) =>
    text
      .split('\n')
      .filter((line) => /^\d+$/.test(line))
      .map(Number);
  const largest = async (file) => Math.max(...kib(await readFile(file, 'utf8'))) / 1024;
  for (let pass = 0; pass < MEMORY_PASSES; pass++) {
    for (const size of sizes) {
      const r = await scratch(root);
      for (const [key, operation] of Object.entries(OPERATIONS)) {
        const peakFile = join(r.root, `${key}.peak`);
        const gitPeaks = join(r.root, `${key}.git-peaks`);
        const shim = join(r.root, `${key}-bin`);
        await mkdir(shim);
        await writeFile(
          join(shim, 'git'),
          `#!/bin/sh\nexec ${TIME} -a -f %M -o '${gitPeaks}' '${realGit}' "$@"\n`,
          { mode: 0o755 },
        );
        const [name, request, options] = await operation(size, r);
        r[key] = await script(name, request, { ...options, peakFile, pathFirst: shim });
        peaks.get(size).any[key].push(await largest(peakFile));
        peaks.get(size).git[key].push(await largest(gitPeaks));
      }
      size.lastVersion = r.checkWarm.result.at(-1);
      await rm(r.root, { recursive: true, force: true });
    }
  }
  const medians = (byKey) =>
    Object.fromEntries(Object.entries(byKey).map(([key, values]) => [key, median(values)]));
  for (const [size, { any, git }] of peaks) {
    size.peakMiB = medians(any);
    size.gitPeakMiB = medians(git);
  }
}

// ---------------------------------------------------------------------------------------------
// Contention: N workers × R rounds of acquire → hold → in → release over M locks.

/**
 * `daemon`: the server (git daemon, or sshd counting logins); `extra`: more source fields;
 * `tmpRoot`: where the workers' TMPDIRs go.
 */
async function measureContention(
  root,
  daemon,
  { name = 'contention.git', extra = {}, tmpRoot = root, kills = false } = {},
) {
  const { workers, locks, rounds, holdMs, retryDelay } = contention;
  const repo = join(root, 'repos', name);
  await buildRepository(repo, 100, locks);
  const url = daemon.url(name);
  const sourced = () => source(url, retryDelay, extra);
  const holds = [];
  const acquires = [];
  /** Acquires of puts that were not killed: [started, ended]. */
  const live = [];
  const killed = { count: 0, leaked: 0 };
  /**
   * A put SIGKILLed while it waits (a lost worker): started, killed a random moment after it
   * says it waits, and its claim released by hand should the kill have come after it landed.
   */
  const doomed = async (id, round, tmp) => {
    const buildUrl = `http://bench/doomed/${id}-${round}`;
    const src = await mkdtemp(join(tmp, 'doomed-'));
    let child;
    const run = script(
      'out',
      { source: sourced(), params: { acquire: true } },
      { args: [src], tmp, env: { BUILD_URL: buildUrl }, started: (c) => (child = c) },
    ).then(
      (result) => ({ result }),
      () => ({ result: undefined }),
    );
    let said = '';
    child.stderr.on('data', (chunk) => (said += chunk));
    for (;;) {
      const outcome = await Promise.race([run, sleep(20).then(() => undefined)]);
      if (outcome) {
        // It was served before it waited: an ordinary hold, released at once.
        if (outcome.result) {
          const { ended } = outcome.result;
          const released = await releaseLock(lockName(outcome.result.result), tmp);
          holds.push({
            worker: -1,
            lock: released.lock,
            from: ended,
            to: released.started,
            released: released.ended,
          });
        }
        return;
      }
      if (/waiting in line|waiting for lock/.test(said)) break;
    }
    await sleep(Math.random() * 500);
    child.kill('SIGKILL');
    await run;
    killed.count++;
    // Its git children are in groups of their own and may still finish a push.
    await sleep(500);
    const claim = (
      await git(repo, 'log', '-1', '--format=%s', '--fixed-strings', `--grep=${buildUrl}`, BRANCH)
    ).stdout.trim();
    if (claim.startsWith('claiming: ')) {
      killed.leaked++;
      const from = performance.now();
      const released = await releaseLock(claim.slice('claiming: '.length), tmp);
      holds.push({ worker: -1, lock: released.lock, from, to: from, released: released.ended });
    }
  };
  const releaseLock = async (lock, tmp) => {
    const step = await stepFolder(tmp, lock);
    const released = await script(
      'out',
      { source: sourced(), params: { release: 'lock' } },
      { args: [step], tmp },
    );
    return { lock, started: released.started, ended: released.ended };
  };
  const latencies = [];
  const inMs = [];
  const lostRaces = { acquire: 0, release: 0 };
  // `out` says so on stderr each time its push lost a race.
  const races = (stderr) => (stderr.match(/the pool changed while taking/g) ?? []).length;
  const releaseMs = [];
  const startConnections = daemon.connections();
  const startPushes = daemon.pushes();
  const started = performance.now();
  const worker = async (id) => {
    const tmp = await mkdtemp(join(tmpRoot, `worker-${id}-`));
    for (let round = 0; round < rounds; round++) {
      // Killed before this worker's own put joins: the line gets a dead entry ahead of it.
      if (kills && Math.random() < 0.5) await doomed(id, round, tmp);
      const src = await mkdtemp(join(tmp, 'src-'));
      const acquired = await script(
        'out',
        { source: sourced(), params: { acquire: true } },
        { args: [src], tmp },
      );
      live.push([acquired.started, acquired.ended]);
      latencies.push(acquired.ms);
      lostRaces.acquire += races(acquired.stderr);
      const lock = lockName(acquired.result);
      acquires.push({
        worker: id,
        lock,
        from: acquired.started,
        to: acquired.ended,
        lostRaces: races(acquired.stderr),
      });
      const holdFrom = acquired.ended;
      await sleep(holdMs);
      const dest = await mkdtemp(join(tmp, 'dest-'));
      const fetched = await script(
        'in',
        { source: sourced(), version: acquired.result.version },
        { args: [dest], tmp },
      );
      const step = await stepFolder(tmp, lock);
      const releasing = performance.now();
      const released = await script(
        'out',
        { source: sourced(), params: { release: 'lock' } },
        { args: [step], tmp },
      );
      holds.push({ worker: id, lock, from: holdFrom, to: releasing, released: released.ended });
      inMs.push(fetched.ms);
      lostRaces.release += races(released.stderr);
      releaseMs.push(released.ms);
    }
    await rm(tmp, { recursive: true, force: true });
  };
  await Promise.all(Array.from({ length: workers }, (_, id) => worker(id)));
  const elapsedMs = performance.now() - started;
  const used = daemon.connections() - startConnections;
  const pushes = daemon.pushes() - startPushes;

  // Mutual exclusion, from our own clock: a lock's hold intervals never overlap.
  let violations = 0;
  const byLock = new Map();
  for (const hold of holds) byLock.set(hold.lock, [...(byLock.get(hold.lock) ?? []), hold]);
  for (const list of byLock.values()) {
    list.sort((a, b) => a.from - b.from);
    for (let i = 1; i < list.length; i++) if (list[i].from < list[i - 1].to) violations++;
  }
  // And from the branch's history: per lock, claims and releases take turns.
  const subjects = (
    await git(join(root, 'repos', name), 'log', '--reverse', '--format=%s', BRANCH)
  ).stdout
    .split('\n')
    .filter((s) => /^(un)?claiming: /.test(s));
  const held = new Set();
  let historyViolations = 0;
  for (const subject of subjects.slice(-(2 * holds.length))) {
    const [verb, lock] = subject.split(': ');
    if (verb === 'claiming') {
      if (held.has(lock)) historyViolations++;
      held.add(lock);
    } else {
      if (!held.has(lock)) historyViolations++;
      held.delete(lock);
    }
  }
  // Every put that waited in line took itself out of it (its claiming push does).
  const lineLeft = (
    await git(
      join(root, 'repos', name),
      'for-each-ref',
      '--format=%(refname)',
      'refs/pool-resource/',
    )
  ).stdout
    .split('\n')
    .filter(Boolean).length;
  // Hand-over: from a release's put finishing to the next claim of that lock finishing. The
  // longest of those during which a put that was not killed was waiting: a lock free for that
  // long while a put wanted one (the line's stall, if dead entries hold it up).
  const handovers = [];
  let maxFreeWhileWaitingMs = 0;
  for (const list of byLock.values())
    for (let i = 1; i < list.length; i++) {
      const free = list[i - 1].released;
      const gap = list[i].from - free;
      handovers.push(gap);
      if (live.some(([from, to]) => from < free && to > free))
        maxFreeWhileWaitingMs = Math.max(maxFreeWhileWaitingMs, gap);
    }
  const acquireCount = latencies.length;
  return {
    workers,
    locks,
    rounds,
    holdMs,
    retryDelay,
    acquires: acquireCount,
    elapsedMs,
    throughput: acquireCount / (elapsedMs / 1000),
    p50Ms: percentile(latencies, 50),
    p95Ms: percentile(latencies, 95),
    maxMs: Math.max(...latencies),
    connectionsPerAcquire: used / acquireCount,
    pushesPerAcquire: pushes / acquireCount,
    lostRacesPerAcquire: lostRaces.acquire / acquireCount,
    lostRacesPerRelease: lostRaces.release / acquireCount,
    inMedianMs: median(inMs),
    handoverMedianMs: median(handovers),
    maxFreeWhileWaitingMs,
    killed: kills ? killed : undefined,
    releaseMedianMs: median(releaseMs),
    violations: violations + historyViolations,
    lineLeft,
    // Who held which lock when (ms since the run started), for looking into fairness.
    holds: holds
      .sort((a, b) => a.from - b.from)
      .map((h) => ({
        worker: h.worker,
        lock: h.lock,
        from: Math.round(h.from - started),
        to: Math.round(h.to - started),
      })),
    // Each acquire: who, which lock, when it started and ended, how many races it lost.
    timeline: acquires
      .sort((a, b) => a.from - b.from)
      .map((a) => ({
        ...a,
        from: Math.round(a.from - started),
        to: Math.round(a.to - started),
      })),
  };
}

// ---------------------------------------------------------------------------------------------
// Over SSH: the same operations, and the contention run, once as the resource runs (one SSH
// connection per run) and once with a connection per git command, which a TMPDIR too long for
// the run's socket forces. The two take turns round by round, so they compare within one run.

const SSH_COMMITS = 100;

async function measureSsh(root) {
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
    }
    return result;
  } finally {
    await sshd.stop();
  }
}

const SSH_MODES = {
  shared: 'one connection per run',
  perCommand: 'one connection per git command',
};

// ---------------------------------------------------------------------------------------------

const s = (ms) => (ms / 1000).toFixed(3);
const ratio = (a, b) => (a / b).toFixed(2);
const pad = (text, width) => String(text).padEnd(width);

function printTable(results, contentionResult, ssh) {
  const lines = [];
  const cols = results.map((r) => `${r.commits} commits`);
  const width = 16;
  lines.push(
    pad('median (s)', 26) + cols.map((c) => pad(c, width)).join('') + 'largest / smallest',
  );
  const rows = [
    ['acquire', 'acquire'],
    ['in', 'in'],
    ['check, cold', 'checkCold'],
    ['check, warm', 'checkWarm'],
    ['release', 'release'],
    ['plain git (floor)', 'floor'],
    ['plain git, protocol v0', 'floorV0'],
  ];
  const first = results[0];
  const last = results.at(-1);
  for (const [label, key] of rows) {
    lines.push(
      pad(label, 26) +
        results.map((r) => pad(s(r.medians[key]), width)).join('') +
        ratio(last.medians[key], first.medians[key]),
    );
  }
  lines.push(
    pad('acquire / floor', 26) +
      results.map((r) => pad(ratio(r.medians.acquire, r.medians.floor), width)).join(''),
  );
  lines.push(
    pad('acquire / v0 floor', 26) +
      results.map((r) => pad(ratio(r.medians.acquire, r.medians.floorV0), width)).join(''),
  );
  lines.push('');
  lines.push(pad('git connections per op', 26) + cols.map((c) => pad(c, width)).join(''));
  for (const [label, key] of rows.slice(0, 5)) {
    lines.push(
      pad(label, 26) + results.map((r) => pad(r.connections[key].toFixed(1), width)).join(''),
    );
  }
  if (first.peakMiB) {
    for (const [title, field] of [
      ['peak memory (MiB)', 'peakMiB'],
      ['peak memory, git (MiB)', 'gitPeakMiB'],
    ]) {
      lines.push('');
      lines.push(pad(title, 26) + cols.map((c) => pad(c, width)).join('') + 'largest / smallest');
      for (const [label, key] of rows.slice(0, 5)) {
        lines.push(
          pad(label, 26) +
            results.map((r) => pad(r[field][key].toFixed(1), width)).join('') +
            ratio(last[field][key], first[field][key]),
        );
      }
    }
    lines.push('  (the largest single process of an operation: any, then its git commands alone)');
  } else {
    lines.push('');
    lines.push(`peak memory: not measured (${TIME} is missing: apt-get install time)`);
  }
  if (contentionResult) {
    const c = contentionResult;
    lines.push('');
    lines.push(
      `contention: ${c.workers} workers × ${c.locks} locks × ${c.rounds} rounds, hold ${c.holdMs} ms, retry_delay ${c.retryDelay}`,
    );
    lines.push(`  acquires            ${c.acquires} in ${s(c.elapsedMs)} s`);
    lines.push(`  throughput          ${c.throughput.toFixed(2)} acquires/s`);
    lines.push(
      `  acquire latency     p50 ${s(c.p50Ms)} s, p95 ${s(c.p95Ms)} s, max ${s(c.maxMs)} s`,
    );
    lines.push(
      `  git connections     ${c.connectionsPerAcquire.toFixed(1)} per acquire (${c.pushesPerAcquire.toFixed(1)} of them pushes)`,
    );
    lines.push(
      `  lost races          ${c.lostRacesPerAcquire.toFixed(1)} per acquire, ${c.lostRacesPerRelease.toFixed(1)} per release`,
    );
    lines.push(
      `  in, release         median ${s(c.inMedianMs)} s, ${s(c.releaseMedianMs)} s; hand-over median ${s(c.handoverMedianMs)} s`,
    );
    lines.push(`  lock free           longest ${s(c.maxFreeWhileWaitingMs)} s while a put waited`);
    lines.push(`  mutual exclusion    ${c.violations} violations`);
    lines.push(`  waiting line        ${c.lineLeft} entries left behind`);
    const k = c.kills;
    if (k) {
      lines.push(
        `contention with puts SIGKILLed while waiting: ${k.killed.count} killed (${k.killed.leaked} after their claim landed, released by hand)`,
      );
      lines.push(
        `  lock free           longest ${s(k.maxFreeWhileWaitingMs)} s while a put that was not killed waited`,
      );
      lines.push(
        `  git connections     ${k.connectionsPerAcquire.toFixed(1)} per acquire (${k.pushesPerAcquire.toFixed(1)} of them pushes; the killed puts' own included)`,
      );
      lines.push(
        `  acquire latency     p50 ${s(k.p50Ms)} s, p95 ${s(k.p95Ms)} s, max ${s(k.maxMs)} s; ${k.throughput.toFixed(2)} acquires/s`,
      );
      lines.push(`  mutual exclusion    ${k.violations} violations`);
      lines.push(`  waiting line        ${k.lineLeft} entries left behind`);
    }
  }
  if (ssh) lines.push('', ...sshLines(ssh));
  lines.push('');
  lines.push('targets (ratios within this run)');
  for (const [label, ok] of targets(results, contentionResult, ssh))
    lines.push(`  ${ok ? 'met    ' : 'NOT MET'}  ${label}`);
  return lines.join('\n');
}

function sshLines(ssh) {
  const { shared, perCommand } = ssh.operations;
  const width = 16;
  const lines = [
    `over SSH (OpenSSH sshd on 127.0.0.1, ${ssh.commits} commits): one connection per run, as the`,
    'resource runs, against one per git command (forced by a TMPDIR too long for its socket)',
    pad('median (s)', 26) +
      pad('per run', width) +
      pad('per command', width) +
      'per run / per command',
  ];
  const keys = [
    ['acquire', 'acquire'],
    ['in', 'in'],
    ['check, cold', 'checkCold'],
    ['check, warm', 'checkWarm'],
    ['release', 'release'],
  ];
  for (const [label, key] of keys)
    lines.push(
      pad(label, 26) +
        pad(s(shared.medians[key]), width) +
        pad(s(perCommand.medians[key]), width) +
        ratio(shared.medians[key], perCommand.medians[key]),
    );
  lines.push(pad('SSH logins per op', 26) + pad('per run', width) + 'per command');
  for (const [label, key] of keys)
    lines.push(
      pad(label, 26) +
        pad(shared.connections[key].toFixed(1), width) +
        perCommand.connections[key].toFixed(1),
    );
  for (const [key, c] of Object.entries(ssh.contention ?? {})) {
    lines.push(
      `contention over SSH, ${SSH_MODES[key]}: ${c.throughput.toFixed(2)} acquires/s, p50 ${s(c.p50Ms)} s, p95 ${s(c.p95Ms)} s,`,
      `  ${c.connectionsPerAcquire.toFixed(1)} SSH logins per acquire, ${c.violations} violations`,
    );
  }
  return lines;
}

function targets(results, c, ssh) {
  const first = results[0];
  const last = results.at(-1);
  const list = [];
  for (const [label, key] of [
    ['acquire', 'acquire'],
    ['in', 'in'],
    ['check, cold', 'checkCold'],
    ['check, warm', 'checkWarm'],
  ]) {
    const r = last.medians[key] / first.medians[key];
    list.push([
      `${label} at ${last.commits} commits within 1.3× of ${first.commits}: ${r.toFixed(2)}×`,
      r <= 1.3,
    ]);
  }
  for (const r of results) {
    for (const [floor, label] of [
      ['floor', 'plain git'],
      ['floorV0', 'plain git over protocol v0'],
    ]) {
      const ratio = r.medians.acquire / r.medians[floor];
      list.push([
        `acquire within 2× of ${label} at ${r.commits} commits: ${ratio.toFixed(2)}×`,
        ratio <= 2,
      ]);
    }
  }
  if (c) {
    list.push([
      `throughput at least 1.6 acquires/s: ${c.throughput.toFixed(2)}`,
      c.throughput >= 1.6,
    ]);
    list.push([`p95 acquire latency at most 6 s: ${s(c.p95Ms)} s`, c.p95Ms <= 6000]);
    list.push([
      `at most 15 git connections per acquire: ${c.connectionsPerAcquire.toFixed(1)}`,
      c.connectionsPerAcquire <= 15,
    ]);
    list.push([`no mutual-exclusion violation: ${c.violations}`, c.violations === 0]);
    list.push([`no waiting-line entry left behind: ${c.lineLeft}`, c.lineLeft === 0]);
    if (c.kills)
      list.push([
        `no mutual-exclusion violation with puts killed: ${c.kills.violations}`,
        c.kills.violations === 0,
      ]);
  }
  for (const [key, sc] of Object.entries(ssh?.contention ?? {}))
    list.push([
      `no mutual-exclusion violation over SSH, ${SSH_MODES[key]}: ${sc.violations}`,
      sc.violations === 0,
    ]);
  return list;
}

async function main() {
  if (!existsSync(join(ASSETS, 'out'))) {
    process.stderr.write(
      `no scripts in ${ASSETS}: run \`npm run package\` first (or pass --assets assets)\n`,
    );
    process.exit(1);
  }
  const loadBefore = loadavg();
  const root = await mkdtemp(join(tmpdir(), 'pool-bench-'));
  await mkdir(join(root, 'repos'));
  const daemon = await startDaemon(join(root, 'repos'));
  const results = [];
  let contentionResult;
  let ssh;
  try {
    const prepared = [];
    for (const commits of sizes) {
      process.stderr.write(`building a lock repository of ${commits} commits…\n`);
      prepared.push(await setupSize(root, daemon, commits));
    }
    for (let rep = 0; rep < reps; rep++) {
      process.stderr.write(`round ${rep + 1} of ${reps}…\n`);
      await measureRound(root, daemon, prepared, rep);
    }
    if (existsSync(TIME)) {
      process.stderr.write(`peak memory, ${MEMORY_PASSES} passes…\n`);
      await measureMemory(root, prepared);
    }
    results.push(...prepared.map(summarise));
    if (!opts['no-contention']) {
      process.stderr.write(
        `contention: ${contention.workers} workers × ${contention.locks} locks × ${contention.rounds} rounds…\n`,
      );
      contentionResult = await measureContention(root, daemon);
      if (!opts['no-kills']) {
        process.stderr.write('contention with puts SIGKILLed while they wait…\n');
        contentionResult.kills = await measureContention(root, daemon, {
          name: 'contention-kills.git',
          kills: true,
        });
      }
    }
    if (!opts['no-ssh'] && existsSync(SSHD)) ssh = await measureSsh(root);
  } finally {
    await daemon.stop();
    if (opts.keep) process.stderr.write(`kept ${root}\n`);
    else await rm(root, { recursive: true, force: true });
  }
  const load = { before: loadBefore, after: loadavg() };
  const table = `${printTable(results, contentionResult, ssh)}\n\nload average (1, 5, 15 min) before ${load.before
    .map((v) => v.toFixed(2))
    .join(
      ', ',
    )}; after ${load.after.map((v) => v.toFixed(2)).join(', ')} on ${cpus().length} cores\nscripts measured: ${ASSETS}`;
  process.stdout.write(`${table}\n`);
  const report = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, node: process.version, load },
    git: (await run('git', ['--version'])).stdout.trim(),
    options: { sizes, reps, contention, quick: opts.quick, assets: ASSETS },
    sizes: results,
    contention: contentionResult,
    ssh,
    table,
  };
  const file =
    opts.out ?? join(ROOT, 'bench-results', `bench-${report.date.replace(/[:.]/g, '-')}.json`);
  await mkdir(resolve(file, '..'), { recursive: true });
  await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
  process.stdout.write(`results written to ${file}\n`);
}

await main();
