// git must never run a program or write a file the request names: git_config keys that would are
// refused by name, our own safety settings come after the user's, a server asking for signed
// pushes gets an unsigned one, and a URL rewrite reaches only file, git, ssh, http and https.
import { execFile } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createGitEnvironment, type GitEnvironment } from '../../src/git/environment.js';
import type { Source } from '../../src/protocol/request.js';
import { startGitDaemon, type GitDaemon } from '../helpers/git-daemon.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { runScript, tempDir } from '../helpers/run-script.js';
import { source } from '../helpers/source.js';

const exec = promisify(execFile);

let scratch: string;
/** Where a program that should never run would leave its mark. */
let marker: string;
/**
 * Programs git would run to sign (gpg, gpgsm, ssh-keygen) or as a remote helper (pwn::), first
 * on PATH: each leaves the marker and fails.
 */
let fakeBin: string;
let path: string;
let repo: LockRepo;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'pool-security-'));
  marker = join(scratch, 'a-program-ran');
  fakeBin = join(scratch, 'bin');
  await mkdir(fakeBin);
  for (const name of ['gpg', 'gpg2', 'gpgsm', 'ssh-keygen', 'git-remote-pwn']) {
    await writeFile(join(fakeBin, name), `#!/bin/sh\necho "${name} $*" >> '${marker}'\nexit 1\n`);
    await chmod(join(fakeBin, name), 0o755);
  }
  path = `${fakeBin}:${process.env.PATH ?? '/usr/bin:/bin'}`;
});

afterEach(async () => {
  await repo?.cleanup();
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

async function markerExists(): Promise<boolean> {
  return stat(marker).then(
    () => true,
    () => false,
  );
}

const env = () => ({ PATH: path });

describe('git_config keys that run a program or write a file', () => {
  it('are refused by name before any git work, in out and in pool init', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    const before = await repo.tip();
    const victim = join(scratch, 'victim');
    await writeFile(victim, 'precious\n');
    const config = [
      { name: 'gpg.ssh.defaultKeyCommand', value: `touch ${marker}` },
      { name: 'gpg.format', value: 'ssh' },
      { name: 'push.gpgSign', value: 'if-asked' },
      { name: 'commit.gpgSign', value: 'true' },
      { name: 'http.cookieFile', value: victim },
      { name: 'http.saveCookies', value: 'true' },
    ];
    const result = await runScript(
      'out',
      { source: source(repo.bare, { git_config: config }), params: { acquire: true } },
      { args: [await tempDir()], env: env() },
    );
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    const program =
      'is not allowed: it makes git run a program, read more configuration or use another transport';
    const file = 'is not allowed: it makes git read or write files outside its repository';
    const signing = 'may only be false: the resource signs nothing (a signing program would run)';
    expect(result.stderr.trimEnd().split('\n')).toEqual([
      `invalid payload (git_config: "gpg.ssh.defaultKeyCommand" ${program})`,
      `invalid payload (git_config: "gpg.format" ${program})`,
      `invalid payload (git_config: "push.gpgSign" ${signing})`,
      `invalid payload (git_config: "commit.gpgSign" ${signing})`,
      `invalid payload (git_config: "http.cookieFile" ${file})`,
      `invalid payload (git_config: "http.saveCookies" ${file})`,
    ]);
    expect(await repo.tip()).toBe(before);

    const { bare, init } = await poolInitOnEmptyRepository(
      config.flatMap(({ name, value }) => ['--git-config', `${name}=${value}`]),
    );
    expect(init.code).toBe(1);
    expect(init.stderr).toContain('"commit.gpgSign" may only be false');
    expect(init.stderr).toContain('"http.cookieFile" is not allowed');
    expect(await git(bare, 'for-each-ref')).toBe('');

    expect(await markerExists()).toBe(false);
    expect(await readFile(victim, 'utf8')).toBe('precious\n');
  });
});

describe('safety settings', () => {
  let environment: GitEnvironment | undefined;
  afterEach(async () => environment?.dispose());

  it("come after the user's entries, whose identity still wins over the default committer", async () => {
    // As if a key that turns signing or hooks back on got past the allow list.
    const gitConfig = [
      { name: 'commit.gpgSign', value: 'true' },
      { name: 'tag.gpgSign', value: 'true' },
      { name: 'push.gpgSign', value: 'if-asked' },
      { name: 'core.hooksPath', value: fakeBin },
      { name: 'core.fsmonitor', value: join(fakeBin, 'gpg') },
      { name: 'http.cookieFile', value: join(scratch, 'cookies') },
      { name: 'http.saveCookies', value: 'true' },
      { name: 'gc.auto', value: '1' },
      { name: 'user.name', value: 'Pipeline Bot' },
      { name: 'user.email', value: 'bot@example.com' },
    ];
    const src: Source = {
      uri: '/nonexistent/locks.git',
      branch: 'master',
      pool: 'pool',
      forwardAgent: false,
      gitConfig,
      retryDelayMs: 100,
      skipSslVerification: false,
      gitTimeoutMs: 10_000,
      checkEvents: [],
      leaseGraceMs: 300_000,
      reclaimExpired: false,
    };
    environment = await createGitEnvironment(src, { PATH: path });
    const get = async (key: string) =>
      (
        await exec('git', ['config', '--get', key], { env: environment!.env, cwd: scratch })
      ).stdout.trim();
    expect(await get('commit.gpgSign')).toBe('false');
    expect(await get('tag.gpgSign')).toBe('false');
    expect(await get('push.gpgSign')).toBe('false');
    expect(await get('core.hooksPath')).toBe('/dev/null');
    expect(await get('core.fsmonitor')).toBe('false');
    expect(await get('http.cookieFile')).toBe('');
    expect(await get('http.saveCookies')).toBe('false');
    expect(await get('gc.auto')).toBe('0');
    expect(await get('user.name')).toBe('Pipeline Bot');
    expect(await get('user.email')).toBe('bot@example.com');
    expect(environment.env.GIT_ALLOW_PROTOCOL).toBe('file:git:ssh:http:https');
  });

  it('a server that asks for signed pushes gets an unsigned one, and no program runs', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    await git(repo.bare, 'config', 'receive.certNonceSeed', 'pool-test-seed');
    const daemon: GitDaemon = await startGitDaemon(repo.root);
    cleanups.push(() => daemon.stop());
    // The daemon really asks: its advertisement carries push-cert.
    const advertised = await exec(
      'git',
      ['push', '--dry-run', daemon.url(repo.bare), `HEAD:refs/heads/probe`],
      { cwd: repo.work, env: { ...process.env, GIT_TRACE_PACKET: '1' } },
    );
    expect(advertised.stderr).toMatch(/push-cert=/);

    const result = await runScript(
      'out',
      {
        source: source(daemon.url(repo.bare), {
          git_config: [
            { name: 'user.signingKey', value: 'ABCDEF0123456789' },
            { name: 'user.name', value: 'Pipeline Bot' },
          ],
        }),
        params: { acquire: true },
      },
      { args: [await tempDir()], env: env() },
    );
    // git 2.39 with push.gpgSign=false pushes without a certificate: the acquire succeeds.
    expect(result.code, result.stderr).toBe(0);
    expect(await repo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });
    expect(await git(repo.bare, 'cat-file', 'commit', repo.branch)).not.toContain('gpgsig');
    expect(await markerExists()).toBe(false);
  });

  it('pool init with a signing key configured commits unsigned, and no program runs', async () => {
    const { bare, init } = await poolInitOnEmptyRepository([
      '--git-config',
      'user.signingKey=ABCDEF0123456789',
    ]);
    expect(init.code, init.stderr).toBe(0);
    expect(await git(bare, 'cat-file', 'commit', 'locks')).not.toContain('gpgsig');
    expect(await markerExists()).toBe(false);
  });
});

describe('url.<base>.insteadOf', () => {
  it('rewrites a URI to the real server, end to end', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    const daemon = await startGitDaemon(repo.root);
    cleanups.push(() => daemon.stop());
    const mirrored = source('https://locks.invalid/locks.git', {
      git_config: [
        { name: `url.git://127.0.0.1:${daemon.port}/.insteadOf`, value: 'https://locks.invalid/' },
      ],
    });
    const checked = await runScript('check', { source: mirrored });
    expect(checked.code, checked.stderr).toBe(0);
    expect(JSON.parse(checked.stdout)).toEqual([{ ref: await repo.tip() }]);
    const acquired = await runScript(
      'out',
      { source: mirrored, params: { acquire: true } },
      { args: [await tempDir()] },
    );
    expect(acquired.code, acquired.stderr).toBe(0);
    const { version } = JSON.parse(acquired.stdout) as { version: { ref: string } };
    expect(await repo.tip()).toBe(version.ref);
    const fetched = await runScript(
      'in',
      { source: mirrored, version },
      { args: [await tempDir()] },
    );
    expect(fetched.code, fetched.stderr).toBe(0);
    expect(daemon.log()).toMatch(/receive-pack/);
  });

  it.each([
    ['ext::', `ext::sh -c touch% ${'MARKER'}% `, 'ext'],
    ['a remote helper on PATH (pwn::)', 'pwn::', 'pwn'],
  ])('never reaches %s: git refuses the transport and runs nothing', async (_label, base, name) => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    const before = await repo.tip();
    const rewritten = source('https://evil.invalid/locks.git', {
      git_config: [
        { name: `url.${base.replace('MARKER', marker)}.insteadOf`, value: 'https://evil.invalid/' },
      ],
    });
    const checked = await runScript('check', { source: rewritten }, { env: env() });
    const acquired = await runScript(
      'out',
      { source: rewritten, params: { acquire: true } },
      { args: [await tempDir()], env: env() },
    );
    for (const result of [checked, acquired]) {
      expect(result.code).toBe(1);
      expect(result.stdout).toBe('');
      expect(result.stderr).toContain(`transport '${name}' not allowed`);
      // No retry can help: it fails at once.
      expect(result.stderr).not.toContain('trying again');
    }
    expect(await markerExists()).toBe(false);
    expect(await repo.tip()).toBe(before);
  });
});

/** `pool init` of pool "envs" on branch "locks" of a new, empty bare repository, with `extra` flags. */
async function poolInitOnEmptyRepository(extra: string[]) {
  const empty = await tempDir('pool-empty-');
  cleanups.push(() => rm(empty, { recursive: true, force: true }));
  const bare = join(empty, 'locks.git');
  await git(empty, 'init', '--quiet', '--bare', '--initial-branch=main', bare);
  const init = await runScript('pool', '', {
    env: env(),
    args: [
      'init',
      ...['--uri', bare, '--branch', 'locks', '--pool', 'envs', '--lock', 'a'],
      ...extra,
    ],
  });
  return { bare, init };
}
