// Runs inside the built image (scripts/image.mjs mounts it there) with the image's own node: the
// runtime holds what the Dockerfile's header promises and nothing it rules out, and the payload
// at /opt/resource takes and gives back a lock through check, in, out and pool. Prints one line
// per finding; exit 1 when any check failed.
import { execFileSync, spawn } from 'node:child_process';
import { accessSync, constants, existsSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { readdirSync } from 'node:fs';
import module from 'node:module';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';

const RESOURCE = process.argv[2] ?? '/opt/resource';
const SCRIPTS = ['check', 'in', 'out', 'pool'];
/** The tools the reference's image had and this one leaves out, and Node's package managers. */
const ABSENT = [
  'ssh',
  'ssh-agent',
  'jq',
  'proxytunnel',
  'npm',
  'npx',
  'corepack',
  'yarn',
  'yarnpkg',
];

let failures = 0;
function report(ok, text) {
  if (!ok) failures += 1;
  process.stdout.write(`${ok ? 'ok' : 'FAILED'}: ${text}\n`);
}

function onPath(name) {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    try {
      accessSync(join(dir, name), constants.X_OK);
      return join(dir, name);
    } catch {
      // Not in this folder.
    }
  }
  return undefined;
}

function run(file, args, input, env = {}) {
  return new Promise((resolve) => {
    const child = spawn(file, args, {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH, HOME: '/tmp', ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input === undefined ? '' : JSON.stringify(input));
  });
}

// --- what the runtime holds ---------------------------------------------------------------
report(true, `node ${process.version} at ${process.execPath}`);
const gitVersion = execFileSync('git', ['--version'], { encoding: 'utf8' }).trim();
report(/^git version /.test(gitVersion), gitVersion);
const gitExec = execFileSync('git', ['--exec-path'], { encoding: 'utf8' }).trim();
report(existsSync(join(gitExec, 'git-remote-https')), 'git speaks https (git-remote-https)');
report(existsSync(join(gitExec, 'git-daemon')), 'git speaks git:// (git daemon ships with git)');
const bundle = '/etc/ssl/certs/ca-certificates.crt';
report(existsSync(bundle) && statSync(bundle).size > 10_000, `CA certificates in ${bundle}`);
for (const name of ABSENT) {
  const found = onPath(name);
  report(!found, found ? `${name} is in the image: ${found}` : `no ${name}`);
}
report(
  !existsSync('/usr/local/bin/docker-entrypoint.sh'),
  "no docker-entrypoint.sh (the node image's shell entrypoint)",
);
report(!existsSync('/run/secrets/ca'), 'no build secret left in the image');
for (const name of SCRIPTS) {
  const path = join(RESOURCE, name);
  const first = existsSync(path) ? readFileSync(path, 'utf8').split('\n', 1)[0] : '';
  report(
    first === '#!/usr/bin/env node' && (statSync(path).mode & 0o111) !== 0,
    `${path} is an executable node program (${first || 'missing'})`,
  );
}

// Node >= 22.1 reads the code the build compiled (Dockerfile) instead of compiling it at each start.
if (typeof module.enableCompileCache === 'function') {
  const cache = join(RESOURCE, '.compile-cache');
  const entries = existsSync(cache) ? readdirSync(cache, { recursive: true }).length : 0;
  report(entries > 0, `the scripts' compiled code is in ${cache} (${entries} entries)`);
}

// The process Concourse starts is node itself, not a shell in front of it.
{
  const child = spawn(join(RESOURCE, 'check'), [], { stdio: ['pipe', 'ignore', 'ignore'] });
  await new Promise((resolve) => child.on('spawn', resolve));
  await new Promise((resolve) => setTimeout(resolve, 200));
  let exe = '';
  try {
    exe = readlinkSync(`/proc/${child.pid}/exe`);
  } catch {
    // Gone already: reported below.
  }
  child.stdin.end('{}');
  await new Promise((resolve) => child.on('close', resolve));
  report(/\/node(js)?$/.test(exe), `the process ${RESOURCE}/check starts is ${exe || '?'}`);
}

// --- a lock taken and given back through the payload, as Concourse runs it ------------------
const work = mkdtempSync('/tmp/image-check-');
try {
  const git = (cwd, ...args) =>
    execFileSync('git', args, {
      cwd,
      env: {
        PATH: process.env.PATH,
        HOME: work,
        GIT_CONFIG_NOSYSTEM: '1',
        GIT_AUTHOR_NAME: 'image check',
        GIT_AUTHOR_EMAIL: 'check@localhost',
        GIT_COMMITTER_NAME: 'image check',
        GIT_COMMITTER_EMAIL: 'check@localhost',
      },
      encoding: 'utf8',
    });
  const bare = join(work, 'locks.git');
  const clone = join(work, 'clone');
  git(work, 'init', '-q', '--bare', '-b', 'main', bare);
  git(work, 'init', '-q', '-b', 'main', clone);
  mkdirSync(join(clone, 'envs', 'unclaimed'), { recursive: true });
  mkdirSync(join(clone, 'envs', 'claimed'), { recursive: true });
  writeFileSync(join(clone, 'envs', 'claimed', '.gitkeep'), '');
  writeFileSync(join(clone, 'envs', 'unclaimed', '.gitkeep'), '');
  writeFileSync(join(clone, 'envs', 'unclaimed', 'env-1'), 'a: 1\n');
  git(clone, 'add', '-A');
  git(clone, 'commit', '-q', '-m', 'the pool');
  git(clone, 'push', '-q', bare, 'main');

  const source = { uri: `file://${bare}`, branch: 'main', pool: 'envs' };
  const put = join(work, 'put');
  mkdirSync(put);
  const acquired = await run(join(RESOURCE, 'out'), [put], {
    source,
    params: { acquire: true },
  });
  const version = acquired.code === 0 ? JSON.parse(acquired.stdout).version : undefined;
  report(
    Boolean(version?.ref),
    `out acquire: ${acquired.code === 0 ? version.ref : acquired.stderr.trim()}`,
  );
  const status = await run(join(RESOURCE, 'pool'), [
    'status',
    '--uri',
    source.uri,
    '--branch',
    'main',
    '--pool',
    'envs',
  ]);
  report(
    status.code === 0 && /env-1\s+claimed/.test(status.stdout),
    `pool status shows env-1 claimed${status.code === 0 ? '' : `: ${status.stderr.trim()}`}`,
  );
  const got = join(work, 'get');
  const fetched = await run(join(RESOURCE, 'in'), [got], { source, version });
  report(
    fetched.code === 0 && readFileSync(join(got, 'name'), 'utf8').trim() === 'env-1',
    `in writes the lock's name${fetched.code === 0 ? '' : `: ${fetched.stderr.trim()}`}`,
  );
  const released = await run(join(RESOURCE, 'out'), [work], {
    source,
    params: { release: 'get' },
  });
  report(
    released.code === 0,
    `out release${released.code === 0 ? '' : `: ${released.stderr.trim()}`}`,
  );
  const checked = await run(join(RESOURCE, 'check'), [], { source, version });
  const versions = checked.code === 0 ? JSON.parse(checked.stdout) : [];
  report(
    versions.length === 2 && versions[0].ref === version.ref,
    `check lists the claim and the release${checked.code === 0 ? '' : `: ${checked.stderr.trim()}`}`,
  );
} finally {
  rmSync(work, { recursive: true, force: true });
}

process.stdout.write(
  failures === 0 ? 'image check: all passed\n' : `image check: ${failures} failed\n`,
);
process.exitCode = failures === 0 ? 0 : 1;
