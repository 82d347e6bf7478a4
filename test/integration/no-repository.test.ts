// A uri with no git repository behind it can never work: every script says so at once, naming
// uri, instead of retrying with backoff as for a server that hiccups.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGitDaemon, type GitDaemon } from '../helpers/git-daemon.js';
import { startHttpGit, type HttpGitServer } from '../helpers/http-git.js';
import { createLockRepo, type LockRepo } from '../helpers/lock-repo.js';
import { runScript, tempDir } from '../helpers/run-script.js';

let repo: LockRepo;
let daemon: GitDaemon;
let http: HttpGitServer;
let notARepository: string;

beforeAll(async () => {
  repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
  daemon = await startGitDaemon(repo.root);
  http = await startHttpGit({ projectRoot: repo.root, username: 'ci', password: 'hunter22' });
  notARepository = join(repo.root, 'plain-folder');
  await mkdir(notARepository);
});

afterAll(async () => {
  await daemon?.stop();
  await http?.stop();
  await repo?.cleanup();
});

const cases: [string, () => Record<string, unknown>, RegExp][] = [
  [
    'a local folder that is not a repository',
    () => ({ uri: notARepository }),
    /^error: git \S+ cannot use the lock repository: fatal: (repository )?'.*plain-folder' (does not appear to be a git repository|does not exist) \(check uri: there is no git repository at that address\)$/m,
  ],
  [
    'a git daemon path that is not there',
    () => ({ uri: daemon.url(join(repo.root, 'nope.git')) }),
    /^error: git \S+ cannot use the lock repository: fatal: remote error: access denied or repository not exported: \/nope\.git \(check uri: git daemon serves no repository at that path\)$/m,
  ],
  [
    'an HTTP path that is not there',
    () => ({
      uri: http.url(join(repo.root, 'nope.git')),
      username: 'ci',
      password: 'hunter22',
    }),
    /^error: git \S+ cannot use the lock repository: fatal: repository '.*nope\.git\/' not found \(check uri: there is no git repository at that address\)$/m,
  ],
];

describe.concurrent('a uri with no repository behind it', () => {
  it.for(cases)('%s: out, in and check fail at once, naming uri', async ([, uri, says]) => {
    const source = { branch: repo.branch, pool: 'pool', retry_delay: '1s', ...uri() };
    const started = Date.now();
    const results = await Promise.all([
      runScript('out', { source, params: { acquire: true } }, { args: [await tempDir()] }),
      runScript('in', { source, version: { ref: 'a'.repeat(40) } }, { args: [await tempDir()] }),
      runScript('check', { source }),
    ]);
    // Five attempts with backoff took 7.5 s; one attempt takes well under that.
    expect(Date.now() - started).toBeLessThan(4_000);
    for (const result of results) {
      expect(result.code, result.stderr).toBe(1);
      expect(result.stdout).toBe('');
      expect(result.stderr).toMatch(says);
      expect(result.stderr).not.toMatch(/attempt|trying again/);
      expect(result.stderr).not.toContain('hunter22');
    }
  });
});
