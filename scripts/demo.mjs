// `npm run demo`: the resource's main job on a lock repository made on the spot. It runs the real
// assets/ scripts as a Concourse worker would (JSON request on stdin, result on stdout, progress on
// stderr): out acquire, in, a second build waiting for the same lock, out release, check; then it
// shows the pool's state and history. Everything lives in one temporary folder, removed at the end.
import { execFile, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ASSETS = resolve(dirname(fileURLToPath(import.meta.url)), '../assets');
const BRANCH = 'main';
const POOL = 'environments';

const color = process.stdout.isTTY && !process.env.NO_COLOR;
const paint = (code) => (text) => (color ? `\u001b[${code}m${text}\u001b[0m` : text);
const bold = paint('1');
const dim = paint('2');
const cyan = paint('36');
const green = paint('32');
const red = paint('31');

const exec = promisify(execFile);
let root;
/** The script running now: on Ctrl-C it stops too (same process group), and is waited for. */
let running;

/** git for arranging the demo repository: its own identity and config, nothing from the machine. */
async function git(cwd, ...args) {
  const { stdout } = await exec('git', ['-c', 'commit.gpgSign=false', ...args], {
    cwd,
    env: {
      PATH: process.env.PATH,
      HOME: root,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_AUTHOR_NAME: 'Platform Team',
      GIT_AUTHOR_EMAIL: 'platform@example.com',
      GIT_COMMITTER_NAME: 'Platform Team',
      GIT_COMMITTER_EMAIL: 'platform@example.com',
    },
  });
  return stdout;
}

/** A bare lock repository with one pool of two environments, as a team would set it up. */
async function createLockRepository() {
  const bare = join(root, 'locks.git');
  const work = join(root, 'setup');
  await git(root, 'init', '--quiet', '--bare', `--initial-branch=${BRANCH}`, bare);
  await git(root, 'clone', '--quiet', bare, work);
  await git(work, 'checkout', '--quiet', '-B', BRANCH);
  for (const state of ['claimed', 'unclaimed']) {
    await mkdir(join(work, POOL, state), { recursive: true });
    await writeFile(join(work, POOL, state, '.gitkeep'), '');
  }
  for (const name of ['staging-1', 'staging-2']) {
    const metadata = { url: `https://${name}.example.com`, region: 'eu-west-1' };
    await writeFile(join(work, POOL, 'unclaimed', name), `${JSON.stringify(metadata)}\n`);
  }
  await git(work, 'add', '-A');
  await git(work, 'commit', '--quiet', '-m', `create pool ${POOL}`);
  await git(work, 'push', '--quiet', 'origin', BRANCH);
  await rm(work, { recursive: true, force: true });
  return bare;
}

/** The variables a Concourse worker sets for a put or get of build 42 of job deploy/integration. */
function buildEnv(buildName) {
  return {
    ATC_EXTERNAL_URL: 'https://ci.example.com',
    BUILD_ID: String(1000 + Number(buildName)),
    BUILD_NAME: buildName,
    BUILD_JOB_NAME: 'integration',
    BUILD_PIPELINE_NAME: 'deploy',
    BUILD_TEAM_NAME: 'main',
  };
}

function indent(text, prefix) {
  return text
    .replace(/\n$/, '')
    .split('\n')
    .map((line) => `${prefix}${line}`)
    .join('\n');
}

/** Runs one script as Concourse does and shows the request, the progress and the result. */
async function step(title, script, request, { args = [], env = {}, expectFailure = false } = {}) {
  console.log(`\n${bold(cyan(`▶ ${title}`))}`);
  console.log(dim(`$ echo '<request>' | ${['assets/' + script, ...args].join(' ')}`));
  console.log(`${bold('request (stdin):')}\n${indent(JSON.stringify(request, null, 2), '  ')}`);
  console.log(bold('progress (stderr):'));
  const child = spawn(join(ASSETS, script), args, {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH, HOME: root, TMPDIR: root, ...env },
  });
  let stdout = '';
  let pending = '';
  let said = false;
  child.stdout.setEncoding('utf8').on('data', (chunk) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk) => {
    said = true;
    pending += chunk;
    const lines = pending.split('\n');
    pending = lines.pop();
    for (const line of lines) console.log(dim(`  │ ${line}`));
  });
  child.stdin.end(JSON.stringify(request));
  running = new Promise((resolve) => child.on('close', (exitCode) => resolve(exitCode)));
  const code = await running;
  running = undefined;
  if (pending) console.log(dim(`  │ ${pending}`));
  if (!said) console.log(dim('  │ (nothing)'));
  if (stdout.trim()) {
    console.log(
      `${bold('result (stdout):')}\n${indent(JSON.stringify(JSON.parse(stdout), null, 2), '  ')}`,
    );
  }
  const ok = expectFailure ? code !== 0 : code === 0;
  console.log((ok ? green : red)(`exit ${code}${expectFailure ? ' (expected: it gave up)' : ''}`));
  if (!ok) throw new Error(`assets/${script} exited ${code}`);
  return stdout.trim() ? JSON.parse(stdout) : undefined;
}

async function showPool(bare) {
  console.log(`\n${bold(cyan(`▶ the pool "${POOL}" on branch ${BRANCH} now`))}`);
  const files = await git(bare, 'ls-tree', '-r', '--name-only', BRANCH, '--', `${POOL}/`);
  for (const state of ['claimed', 'unclaimed']) {
    const names = files
      .split('\n')
      .filter((path) => path.startsWith(`${POOL}/${state}/`))
      .map((path) => path.slice(`${POOL}/${state}/`.length))
      .filter((name) => !name.startsWith('.'));
    console.log(`  ${state.padEnd(9)} ${names.length ? names.join(', ') : dim('(none)')}`);
  }
  console.log(bold('history (newest first):'));
  const log = await git(bare, 'log', '--format=%h %s', BRANCH);
  console.log(indent(log, '  '));
  const claim = (await git(bare, 'log', '--format=%H %s', BRANCH))
    .split('\n')
    .find((line) => line.includes(' claiming: '));
  if (claim) {
    console.log(bold('the claiming commit says who held the lock:'));
    console.log(
      indent((await git(bare, 'log', '-1', '--format=%B', claim.split(' ')[0])).trim(), '  '),
    );
  }
}

async function demo() {
  root = await mkdtemp(join(tmpdir(), 'pool-demo-'));
  console.log(bold('pool-resource demo'));
  console.log(
    `A lock repository in ${root}: pool "${POOL}" with staging-1 and staging-2 unclaimed.`,
  );
  const bare = await createLockRepository();
  const source = { uri: bare, branch: BRANCH, pool: POOL, retry_delay: '1s' };

  // A build's working folder: Concourse gives `out` this folder, and `in` writes into it.
  const build = join(root, 'build-42');
  await mkdir(build);
  const acquired = await step(
    'put: acquire a lock (out)',
    'out',
    { source, params: { acquire: true } },
    { args: [build], env: buildEnv('42') },
  );
  const lock = acquired.metadata.find((entry) => entry.name === 'lock_name').value;

  await step(
    'get: the implicit get after the put fetches the lock (in)',
    'in',
    { source, version: acquired.version },
    { args: [join(build, POOL)], env: buildEnv('42') },
  );
  for (const file of ['name', 'metadata']) {
    const text = await readFile(join(build, POOL, file), 'utf8');
    console.log(`  ${POOL}/${file}: ${text.trim()}`);
  }

  const other = join(root, 'build-43');
  await mkdir(other);
  await step(
    `meanwhile: build 43 wants ${lock} too, and waits at most 3s (out claim)`,
    'out',
    { source, params: { claim: lock, wait_timeout: '3s' } },
    { args: [other], env: buildEnv('43'), expectFailure: true },
  );

  await step(
    'put: release it when the job is done (out)',
    'out',
    { source, params: { release: POOL } },
    { args: [build], env: buildEnv('42') },
  );

  await step('check: the versions since the acquire (check)', 'check', {
    source,
    version: acquired.version,
  });

  await showPool(bare);
}

async function cleanUp() {
  if (root) await rm(root, { recursive: true, force: true });
}

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    // The script got the signal too; let it finish its own clean-up before the folder goes.
    void Promise.resolve(running)
      .then(cleanUp)
      .finally(() => process.exit(130));
  });
}

try {
  await demo();
  console.log(`\n${green('done')}: removed ${root}`);
} catch (error) {
  console.error(red(`demo failed: ${error instanceof Error ? error.message : String(error)}`));
  process.exitCode = 1;
} finally {
  await cleanUp();
}
