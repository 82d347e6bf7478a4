// Credentials written into an HTTPS URI, over `git http-backend` behind basic auth: a token as the
// user name never shows in any output, and no credential reaches a file the resource writes or the
// command line of git or of anything git runs (any local user can read /proc/PID/cmdline).
import { execFileSync } from 'node:child_process';
import {
  chmod,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpGit, type HttpGitServer } from '../helpers/http-git.js';
import { createLockRepo, type LockRepo } from '../helpers/lock-repo.js';
import { runScript, tempDir, type ScriptResult } from '../helpers/run-script.js';
import { source } from '../helpers/source.js';
import { escape } from '../helpers/steps.js';

/** As GitHub and GitLab hand them out: the token is the user name, the password is empty. */
const TOKEN = 'ghp_T0kenAsUserName7f3a9c2e4b1d8e6f0a5c';
const ACCESS_TOKEN = 'AccessT0ken-5b9e2d7c1a3f';
const USER = 'deploy';
const PASSWORD = 'UriPassw0rd-8d4c2a6e0b';

let repo: LockRepo;
/** Accepts only `TOKEN:` (a token as the user name, no password). */
let tokenServer: HttpGitServer;
/** Accepts only `x-access-token:ACCESS_TOKEN`. */
let accessServer: HttpGitServer;
/** Accepts only `deploy:PASSWORD`. */
let passwordServer: HttpGitServer;
let scratch: string;

beforeAll(async () => {
  repo = await createLockRepo({ pool: { unclaimed: ['lock-a', 'lock-b'] } });
  tokenServer = await startHttpGit({ projectRoot: repo.root, username: TOKEN, password: '' });
  accessServer = await startHttpGit({
    projectRoot: repo.root,
    username: 'x-access-token',
    password: ACCESS_TOKEN,
  });
  passwordServer = await startHttpGit({
    projectRoot: repo.root,
    username: USER,
    password: PASSWORD,
  });
  scratch = await mkdtemp(join(tmpdir(), 'pool-security-'));
});

afterAll(async () => {
  await tokenServer?.stop();
  await accessServer?.stop();
  await passwordServer?.stop();
  await repo?.cleanup();
  await rm(scratch, { recursive: true, force: true });
});

/** `http://USERINFO@127.0.0.1:PORT/locks.git` */
function withUserinfo(server: HttpGitServer, userinfo: string): string {
  return server.url(repo.bare).replace('http://', `http://${userinfo}@`);
}

function expectNoCredential(label: string, text: string): void {
  for (const secret of [TOKEN, ACCESS_TOKEN, PASSWORD]) {
    expect(text.includes(secret), `${label} shows a credential: ${text}`).toBe(false);
  }
}

function expectQuiet(label: string, result: ScriptResult): void {
  expectNoCredential(`${label} stdout`, result.stdout);
  expectNoCredential(`${label} stderr`, result.stderr);
}

/**
 * A `git` first on PATH that records, for every git the resource starts, the mode of its HOME and
 * (through GIT_TRACE) the command line of that git and of every program it runs in turn: remote
 * helpers, credential helpers, the shells that start them.
 */
async function recordingGit(): Promise<{ bin: string; log: string; trace: string }> {
  const dir = await mkdtemp(join(scratch, 'git-'));
  const bin = join(dir, 'bin');
  await mkdir(bin);
  const log = join(dir, 'homes.log');
  const trace = join(dir, 'trace.log');
  const realGit = execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim();
  await writeFile(
    join(bin, 'git'),
    [
      '#!/bin/sh',
      `stat -c '%a %n' "$HOME" >> '${log}'`,
      `GIT_TRACE='${trace}' exec '${realGit}' "$@"`,
      '',
    ].join('\n'),
  );
  await chmod(join(bin, 'git'), 0o755);
  return { bin, log, trace };
}

/** Every regular file under `dir`, with its content. */
async function filesUnder(dir: string): Promise<{ path: string; text: string }[]> {
  const files: { path: string; text: string }[] = [];
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files.push({ path, text: await readFile(path, 'latin1') });
  }
  return files;
}

describe("check's cache folder", () => {
  it('is made private when an earlier version left it open, and never used through a symlink', async () => {
    const uri = withUserinfo(passwordServer, `${USER}:${PASSWORD}`);
    const open = await mkdtemp(join(scratch, 'tmp-'));
    await mkdir(join(open, 'pool-resource-check'), { mode: 0o755 });
    await chmod(join(open, 'pool-resource-check'), 0o755);
    const checked = await runScript('check', { source: source(uri) }, { tmpdir: open });
    expect(checked.code, checked.stderr).toBe(0);
    expect((await stat(join(open, 'pool-resource-check'))).mode & 0o777).toBe(0o700);

    // Anyone who can write to a shared TMPDIR could plant the folder as a link to theirs.
    const planted = await mkdtemp(join(scratch, 'tmp-'));
    const theirs = await mkdtemp(join(scratch, 'theirs-'));
    await symlink(theirs, join(planted, 'pool-resource-check'));
    const again = await runScript('check', { source: source(uri) }, { tmpdir: planted });
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual(JSON.parse(checked.stdout));
    expect(await readdir(theirs)).toEqual([]);
  });
});

describe('credentials in the URI', () => {
  it('a token as the user name works and never shows, not even when the branch is missing', async () => {
    const uri = withUserinfo(tokenServer, TOKEN);
    const checked = await runScript('check', { source: source(uri) });
    expectQuiet('check', checked);
    expect(checked.code, checked.stderr).toBe(0);
    expect(JSON.parse(checked.stdout)).toHaveLength(1);

    const acquired = await runScript(
      'out',
      { source: source(uri), params: { acquire: true } },
      {
        args: [await tempDir()],
      },
    );
    expectQuiet('acquire', acquired);
    expect(acquired.code, acquired.stderr).toBe(0);
    expect(tokenServer.requests.some((request) => request.user === TOKEN)).toBe(true);

    const missing = await runScript(
      'out',
      {
        source: source(uri, { branch: 'no-such-branch' }),
        params: { acquire: true },
      },
      { args: [await tempDir()] },
    );
    expectQuiet('missing branch', missing);
    expect(missing.code).toBe(1);
    // The repository is named as git reaches it, without its user name.
    expect(missing.stderr).toContain(
      `branch "no-such-branch" does not exist in ${tokenServer.url(repo.bare)}`,
    );

    const status = await runScript('pool', '', {
      args: ['status', '--uri', uri, '--branch', repo.branch, '--pool', 'pool'],
    });
    expectQuiet('pool status', status);
    expect(status.code, status.stderr).toBe(0);
    const badStatus = await runScript('pool', '', {
      args: ['status', '--uri', uri, '--branch', 'no-such-branch', '--pool', 'pool'],
    });
    expectQuiet('pool status, missing branch', badStatus);
    expect(badStatus.code).toBe(1);
    expect(badStatus.stderr).toContain(tokenServer.url(repo.bare));
  });

  it('x-access-token:TOKEN works and never shows', async () => {
    const uri = withUserinfo(accessServer, `x-access-token:${ACCESS_TOKEN}`);
    const checked = await runScript('check', { source: source(uri) });
    expectQuiet('check', checked);
    expect(checked.code, checked.stderr).toBe(0);
    const missing = await runScript('check', { source: source(uri, { branch: 'nope' }) });
    expectQuiet('check of a missing branch', missing);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(
      `branch "nope" does not exist in ${accessServer.url(repo.bare)}`,
    );
  });

  it('a token refused by the server never shows either', async () => {
    const uri = withUserinfo(passwordServer, TOKEN);
    const refused = await runScript('check', { source: source(uri) });
    expectQuiet('refused check', refused);
    expect(refused.code).toBe(1);
  });

  it("check's cached copy, every file written and every git command line stay free of them", async () => {
    const uri = withUserinfo(passwordServer, `${USER}:${PASSWORD}`);
    const git = await recordingGit();
    const runTmp = await mkdtemp(join(scratch, 'tmp-'));
    const env = { PATH: `${git.bin}:${process.env.PATH ?? '/usr/bin:/bin'}` };
    const first = await runScript('check', { source: source(uri) }, { env, tmpdir: runTmp });
    expectQuiet('check', first);
    expect(first.code, first.stderr).toBe(0);
    // Again, from the cached copy (a fetch into it).
    const again = await runScript('check', { source: source(uri) }, { env, tmpdir: runTmp });
    expect(again.code, again.stderr).toBe(0);
    const acquired = await runScript(
      'out',
      { source: source(uri), params: { acquire: true } },
      { env, tmpdir: runTmp, args: [await tempDir()] },
    );
    expectQuiet('acquire', acquired);
    expect(acquired.code, acquired.stderr).toBe(0);
    expect(passwordServer.requests.some((request) => request.user === USER)).toBe(true);
    // Once more with git reaching the server on its own (an http.* entry turns the run's relay
    // off), so that git asks the credential helper.
    const direct = await runScript(
      'check',
      { source: source(uri, { git_config: [{ name: 'http.lowSpeedLimit', value: '0' }] }) },
      { env, tmpdir: runTmp },
    );
    expectQuiet('check, git on its own', direct);
    expect(direct.code, direct.stderr).toBe(0);

    // The cache: kept between checks, private, and no file in it holds the password.
    expect(await readdir(runTmp)).toEqual(['pool-resource-check']);
    const cacheRoot = join(runTmp, 'pool-resource-check');
    expect((await stat(cacheRoot)).mode & 0o777).toBe(0o700);
    const cached = await filesUnder(cacheRoot);
    expect(cached.some(({ path }) => path.endsWith('/config'))).toBe(true);
    for (const { path, text } of cached) {
      expect(text.includes(PASSWORD), `${path} holds the password`).toBe(false);
      expect(text.includes(`${USER}:`), `${path} holds the user name`).toBe(false);
    }

    // Every git ran with a private HOME (0700), and no command line held the password.
    const homes = (await readFile(git.log, 'utf8')).trim().split('\n');
    expect(homes.length).toBeGreaterThan(5);
    for (const line of homes) expect(line).toMatch(/^700 /);
    const trace = await readFile(git.trace, 'utf8');
    // The trace really shows the remote helper's command lines, with the URI each was given: the
    // run's relay on 127.0.0.1 (its token is in git's environment, never in a command line), and
    // the server's when git connects on its own.
    expect(trace).toMatch(/git-remote-http \S+ http:\/\/127\.0\.0\.1:\d+\/relay$/m);
    expect(trace).not.toContain('X-Pool-Resource-Relay');
    expect(trace).toMatch(
      new RegExp(`git-remote-http \\S+ ${escape(passwordServer.url(repo.bare)).source}$`, 'm'),
    );
    // …and the credential helper's: it names the variable the password is in, never the value.
    expect(trace).toMatch(/run_command: .*"\$POOL_RESOURCE_GIT_PASSWORD".* get/);
    expectNoCredential('command lines', trace);
  });
});
