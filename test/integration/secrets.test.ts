// Secrets never show: every operation and every failure mode runs with distinctive values in every
// secret field, and none of them appears on stdout, on stderr or anywhere in the lock repository.
import { execFile } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { createServer as createTcpServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGitDaemon, type GitDaemon } from '../helpers/git-daemon.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { startScript, tempDir, type ScriptResult } from '../helpers/run-script.js';
import { source as lockSource } from '../helpers/source.js';

const exec = promisify(execFile);

const PASSPHRASE = 'Passphrase-S3cr3t-91c4d7';
const PASSWORD = 'Password-S3cr3t-5e7d02';
const PROXY_PASSWORD = 'ProxyPassword-S3cr3t-2b8a66';
const URI_PASSWORD = 'UriPassword-S3cr3t-0f6e13';
/** Longer than a quoted value is shown (80 characters): a message shows its first part only. */
const LONG_PASSWORD = `LongPassword-S3cr3t-${'7c'.repeat(50)}`;
let privateKey: string;

/** Every string that must never be shown, including each line of the key and encoded forms. */
function secrets(): string[] {
  const keyLines = privateKey
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line.length >= 8 && !line.startsWith('-----'));
  return [
    privateKey,
    ...keyLines,
    PASSPHRASE,
    PASSWORD,
    PROXY_PASSWORD,
    URI_PASSWORD,
    LONG_PASSWORD.slice(20, 60),
    'S3cr3t',
    Buffer.from(`user:${PASSWORD}`).toString('base64'),
    Buffer.from(`user:${URI_PASSWORD}`).toString('base64'),
  ];
}

function expectNoSecret(label: string, text: string): void {
  for (const secret of secrets()) {
    expect(text.includes(secret), `${label} shows a secret: ${text}`).toBe(false);
  }
}

let repo: LockRepo;
let daemon: GitDaemon;
/** Answers every request with 401, so git sends (and may report) the credentials it has. */
let unauthorised: Server;
/** Accepts connections and never answers. */
let silent: ReturnType<typeof createTcpServer>;
let closedPort: number;
const results: { label: string; result: ScriptResult }[] = [];

async function portOf(server: { address(): AddressInfo | string | null }): Promise<number> {
  return (server.address() as AddressInfo).port;
}

beforeAll(async () => {
  const keyDir = await tempDir('pool-key-');
  await exec('ssh-keygen', [
    '-q',
    '-t',
    'ed25519',
    '-N',
    PASSPHRASE,
    '-C',
    'pool',
    '-f',
    join(keyDir, 'key'),
  ]);
  privateKey = await readFile(join(keyDir, 'key'), 'utf8');

  repo = await createLockRepo({ pool: { unclaimed: ['lock-a', 'lock-b'], claimed: ['lock-c'] } });
  daemon = await startGitDaemon(repo.root);
  unauthorised = createServer((request, response) => {
    request.resume();
    response.writeHead(401, { 'WWW-Authenticate': 'Basic realm="locks"' }).end('no\n');
  });
  await new Promise<void>((resolve) => unauthorised.listen(0, '127.0.0.1', resolve));
  silent = createTcpServer(() => undefined);
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  // A port nothing listens on: bind one, note it, close it.
  const probe = createTcpServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  closedPort = await portOf(probe);
  await new Promise<void>((resolve) => probe.close(() => resolve()));
});

afterAll(async () => {
  unauthorised?.close();
  silent?.close();
  await daemon?.stop();
  await repo?.cleanup();
});

/** A source with a distinctive value in every secret field. */
/** The shared source with every kind of secret filled in. */
function source(uri: string, extra: Record<string, unknown> = {}) {
  return lockSource(uri, {
    private_key: privateKey,
    private_key_passphrase: PASSPHRASE,
    username: 'user',
    password: PASSWORD,
    https_tunnel: {
      proxy_host: '127.0.0.1',
      proxy_port: closedPort,
      proxy_user: 'user',
      proxy_password: PROXY_PASSWORD,
    },
    ...extra,
  });
}

async function step(name: string, metadata = `metadata of ${name}\n`): Promise<string> {
  const src = await tempDir();
  await mkdir(join(src, 'step'));
  await writeFile(join(src, 'step', 'name'), `${name}\n`);
  await writeFile(join(src, 'step', 'metadata'), metadata);
  return src;
}

async function run(
  label: string,
  script: 'check' | 'in' | 'out',
  request: unknown,
  args: string[] = [],
): Promise<ScriptResult> {
  const running = startScript(script, request, { args });
  // Every run here ends on its own well within this; a hung one is killed and fails below.
  const killer = setTimeout(() => running.child.kill('SIGKILL'), 40_000);
  const result = await running.done;
  clearTimeout(killer);
  results.push({ label, result });
  expectNoSecret(`${label} stdout`, result.stdout);
  expectNoSecret(`${label} stderr`, result.stderr);
  return result;
}

describe('secrets never appear', () => {
  it('in any operation that succeeds', async () => {
    const local = source(repo.bare);
    const remote = source(daemon.url(repo.bare));
    const ok = (result: ScriptResult) => {
      expect(result.code, result.stderr).toBe(0);
      return JSON.parse(result.stdout) as { version: { ref: string } };
    };
    ok(await run('check', 'check', { source: local }));
    const added = ok(
      await run('add', 'out', { source: local, params: { add: 'step' } }, [await step('lock-d')]),
    );
    ok(
      await run('in after add', 'in', { source: local, version: added.version }, [await tempDir()]),
    );
    ok(
      await run('add_claimed', 'out', { source: remote, params: { add_claimed: 'step' } }, [
        await step('lock-e'),
      ]),
    );
    ok(
      await run('release', 'out', { source: local, params: { release: 'step' } }, [
        await step('lock-c'),
      ]),
    );
    ok(
      await run('claim', 'out', { source: local, params: { claim: 'lock-c' } }, [await tempDir()]),
    );
    ok(
      await run('check_unclaimed', 'out', { source: local, params: { check_unclaimed: 'step' } }, [
        await step('lock-c'),
      ]),
    );
    ok(
      await run('update', 'out', { source: local, params: { update: 'step' } }, [
        await step('lock-d', 'new\n'),
      ]),
    );
    ok(
      await run('check (unclaimed)', 'out', { source: local, params: { check: 'step' } }, [
        await step('lock-d'),
      ]),
    );
    ok(
      await run('remove', 'out', { source: local, params: { remove: 'step' } }, [
        await step('lock-e'),
      ]),
    );
    // Last: acquire takes a random free lock, and update/check above wait while theirs is claimed.
    const acquired = ok(
      await run('acquire', 'out', { source: remote, params: { acquire: true } }, [await tempDir()]),
    );
    ok(
      await run(
        'in after acquire',
        'in',
        { source: remote, version: acquired.version, params: { depth: 1 } },
        [await tempDir()],
      ),
    );
    ok(await run('check with version', 'check', { source: remote, version: acquired.version }));
  });

  it('in any operation that fails', async () => {
    const local = source(repo.bare);
    const tip = await repo.tip();
    const failures = await Promise.all([
      run('bad pool (check)', 'check', { source: { ...local, pool: '../x' } }),
      run('bad pool (in)', 'in', { source: { ...local, pool: '../x' }, version: { ref: tip } }, [
        await tempDir(),
      ]),
      run(
        'bad pool (out)',
        'out',
        { source: { ...local, pool: '../x' }, params: { acquire: true } },
        [await tempDir()],
      ),
      run(
        'bad duration',
        'out',
        { source: { ...local, retry_delay: PASSWORD }, params: { acquire: true } },
        [await tempDir()],
      ),
      run(
        'URI password as written, as the pool',
        'out',
        {
          source: {
            ...local,
            uri: 'http://user:Uri%2fPassword-S3cr3t-4d1a@127.0.0.1:1/locks.git',
            pool: '-Uri%2fPassword-S3cr3t-4d1a',
          },
          params: { acquire: true },
        },
        [await tempDir()],
      ),
      run(
        'long password as the pool',
        'out',
        {
          source: { ...local, password: LONG_PASSWORD, pool: `-${LONG_PASSWORD}` },
          params: { acquire: true },
        },
        [await tempDir()],
      ),
      run('two operations', 'out', { source: local, params: { acquire: true, claim: 'lock-a' } }, [
        await tempDir(),
      ]),
      run('not JSON', 'out', `{"source": {"password": "${PASSWORD}"`, [await tempDir()]),
      run(
        'missing pool',
        'out',
        { source: { ...local, pool: 'nope' }, params: { acquire: true } },
        [await tempDir()],
      ),
      run(
        'missing branch (out)',
        'out',
        { source: { ...local, branch: 'nope' }, params: { acquire: true } },
        [await tempDir()],
      ),
      run('missing branch (check)', 'check', { source: { ...local, branch: 'nope' } }),
      run('unknown version', 'in', { source: local, version: { ref: 'deadbeef' } }, [
        await tempDir(),
      ]),
      run('release nonexistent', 'out', { source: local, params: { release: 'step' } }, [
        await step('nope'),
      ]),
      run('add existing', 'out', { source: local, params: { add: 'step' } }, [
        await step('lock-b'),
      ]),
      run('check nonexistent', 'out', { source: local, params: { check: 'step' } }, [
        await step('nope'),
      ]),
      run(
        'wait_timeout',
        'out',
        { source: local, params: { claim: 'lock-c', wait_timeout: '500ms' } },
        [await tempDir()],
      ),
      run(
        'git_config refused',
        'out',
        {
          source: { ...local, git_config: [{ name: 'core.sshCommand', value: PASSWORD }] },
          params: { acquire: true },
        },
        [await tempDir()],
      ),
    ]);
    for (const result of failures) expect(result.code, result.stderr).toBe(1);
  });

  it('when the remote cannot be reached, whatever the transport', async () => {
    const unauthorisedPort = (unauthorised.address() as AddressInfo).port;
    const silentPort = (silent.address() as AddressInfo).port;
    const uris = [
      `https://user:${URI_PASSWORD}@127.0.0.1:${closedPort}/locks.git`,
      `http://user:${URI_PASSWORD}@127.0.0.1:${unauthorisedPort}/locks.git`,
      `http://user:${encodeURIComponent(URI_PASSWORD)}@127.0.0.1:${silentPort}/locks.git`,
      // Percent-encoded its own way (lower-case hex): masked as written, not only as decoded.
      `http://user:Uri%2fPassword-S3cr3t-4d1a@127.0.0.1:${unauthorisedPort}/locks.git`,
      `ssh://git:Uri%2fPassword-S3cr3t-4d1a@127.0.0.1:${closedPort}/locks.git`,
      `ssh://git@127.0.0.1:${closedPort}/locks.git`,
      `git@127.0.0.1:locks.git`,
      `git://127.0.0.1:${closedPort}/locks.git`,
    ];
    const tip = await repo.tip();
    const runs = await Promise.all(
      uris.flatMap((uri) => {
        const s = source(uri, { git_timeout: '2s' });
        return [
          run(`check ${uri}`, 'check', { source: s }),
          tempDir().then((dest) =>
            run(`in ${uri}`, 'in', { source: s, version: { ref: tip } }, [dest]),
          ),
          tempDir().then((src) =>
            run(`out ${uri}`, 'out', { source: s, params: { acquire: true } }, [src]),
          ),
        ];
      }),
    );
    for (const result of runs) expect(result.code, result.stderr).toBe(1);
  });

  it('when the put is stopped while it waits', async () => {
    const stopped = startScript(
      'out',
      { source: source(repo.bare), params: { claim: 'lock-c' } },
      { args: [await tempDir()] },
    );
    await stopped.waitForStderr(/waiting for lock/);
    stopped.child.kill('SIGTERM');
    const result = await stopped.done;
    results.push({ label: 'stopped', result });
    expect(result.code).toBe(143);
    expectNoSecret('stopped stdout', result.stdout);
    expectNoSecret('stopped stderr', result.stderr);
  });

  it('in any commit, message or file of the lock repository', async () => {
    const objects = await git(repo.bare, 'cat-file', '--batch-all-objects', '--batch');
    expect(objects.length).toBeGreaterThan(0);
    expectNoSecret('lock repository objects', objects);
    const log = await git(repo.bare, 'log', '--format=%an %ae %cn %ce%n%B', 'master');
    expectNoSecret('commit messages', log);
    // The runs above really happened, each with output to check.
    expect(results.length).toBeGreaterThan(40);
  });
});
