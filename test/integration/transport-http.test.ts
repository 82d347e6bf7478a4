// HTTP(S) lock repositories through `git http-backend` behind a server requiring basic auth:
// username/password without ~/.netrc, credentials inside the URI, skip_ssl_verification, and
// clean one-line failures that never show a password.
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpGit, type HttpGitServer } from '../helpers/http-git.js';
import { createLockRepo, type LockRepo } from '../helpers/lock-repo.js';
import {
  commitText,
  expectNoSecrets,
  expectOneLineFailure,
  runLockCycle,
} from '../helpers/lock-cycle.js';
import { runScript, type RunOptions, type ScriptResult } from '../helpers/run-script.js';
import { source as lockSource } from '../helpers/source.js';

const USER = 'locksmith';
const PASSWORD = 's3cret "pass" $word with spaces';

let repo: LockRepo;
let http: HttpGitServer;
let https: HttpGitServer;
let home: string;
const outputs: ScriptResult[] = [];

beforeAll(async () => {
  repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
  http = await startHttpGit({ projectRoot: repo.root, username: USER, password: PASSWORD });
  https = await startHttpGit({
    projectRoot: repo.root,
    username: USER,
    password: PASSWORD,
    tls: true,
  });
  // The scripts' own HOME: nothing may be written there (the reference wrote ~/.netrc).
  home = await mkdtemp(join(tmpdir(), 'pool-home-'));
});

afterAll(async () => {
  await http?.stop();
  await https?.stop();
  await repo?.cleanup();
  await rm(home, { recursive: true, force: true });
});

const source = (extra: Record<string, unknown> = {}) =>
  lockSource(http.url(repo.bare), { username: USER, password: PASSWORD, ...extra });

const options = (): RunOptions => ({ env: { HOME: home } });

async function check(extra: Record<string, unknown>) {
  const result = await runScript('check', { source: source(extra) }, options());
  outputs.push(result);
  return result;
}

describe('http:// with username and password', () => {
  it('runs check, put acquire, get and put release', async () => {
    await runLockCycle(source(), repo, { ...options(), outputs });
    expect(http.requests.some((request) => request.user === USER)).toBe(true);
    expect(await readdir(home)).toEqual([]);
  });

  it('takes credentials from the URI', async () => {
    const uri = http.url(repo.bare).replace('://', `://${USER}:${encodeURIComponent(PASSWORD)}@`);
    const result = await check({ uri, username: undefined, password: undefined });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });

  it('a wrong password fails at once with one line', async () => {
    const started = Date.now();
    const result = await check({ password: 'not the password' });
    expectOneLineFailure(
      result,
      /^error: git fetch cannot use the lock repository: fatal: Authentication failed for 'http:\/\/127\.0\.0\.1:\d+\/locks\.git\/' \(check username and password\)$/,
    );
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('a put with a wrong password gives up at once and commits nothing', async () => {
    const before = await repo.tip();
    const result = await runScript(
      'out',
      { source: source({ password: 'not the password' }), params: { acquire: true } },
      { ...options(), args: [await mkdtemp(join(repo.root, 'src-'))] },
    );
    outputs.push(result);
    expect(result.code).toBe(1);
    expect(result.stderr.trimEnd().split('\n').at(-1)).toMatch(/Authentication failed/);
    expect(result.stderr).not.toMatch(/attempt/);
    expect(await repo.tip()).toBe(before);
  });

  it('a wrong password inside the URI is never shown', async () => {
    const uri = http.url(repo.bare).replace('://', `://${USER}:wrong-uri-password@`);
    const result = await check({ uri, username: undefined, password: undefined });
    expectOneLineFailure(result, /Authentication failed/);
    expect(result.stderr).not.toContain('wrong-uri-password');
  });

  it('no credentials: says the server wants some instead of prompting', async () => {
    const result = await check({ username: undefined, password: undefined });
    expectOneLineFailure(
      result,
      /terminal prompts disabled \(the server asks for credentials: set username and password\)$/,
    );
  });
});

describe('https:// with a self-signed certificate', () => {
  it('is refused unless skip_ssl_verification is set', async () => {
    const result = await check({ uri: https.url(repo.bare) });
    expectOneLineFailure(
      result,
      // libcurl's words for it: OpenSSL's, or GnuTLS's before and from curl 8 (Debian trixie).
      /(SSL certificate problem|server (certificate )?verification failed).*\(set skip_ssl_verification: true to accept it\)$/,
    );
  });

  it('works with skip_ssl_verification: true, for that request only', async () => {
    await runLockCycle(source({ uri: https.url(repo.bare), skip_ssl_verification: true }), repo, {
      ...options(),
      outputs,
    });
    const after = await check({ uri: https.url(repo.bare) });
    expect(after.code).toBe(1);
  });
});

describe('secrets', () => {
  it('no output of any run above shows the password', async () => {
    expect(outputs.length).toBeGreaterThan(8);
    expectNoSecrets(
      [...outputs, await commitText(repo)],
      [
        PASSWORD,
        encodeURIComponent(PASSWORD),
        Buffer.from(`${USER}:${PASSWORD}`).toString('base64'),
      ],
    );
    expect(outputs.map((result) => result.stderr).join('')).not.toContain('wrong-uri-password');
  });
});
