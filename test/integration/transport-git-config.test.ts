// git_config reaches every git command intact (no shell in between), and keys that would make
// git run a program are refused before any git work, naming the key.
import { execFile } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { createLockRepo, type LockRepo } from '../helpers/lock-repo.js';
import { runScript } from '../helpers/run-script.js';
import { source } from '../helpers/source.js';

const exec = promisify(execFile);
let repo: LockRepo;
afterEach(async () => repo?.cleanup());

describe('git_config', () => {
  it('passes values with quotes, spaces, $ and backquotes through unchanged', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    const name = `O'Brien "The Lock" $HOME \`id\` ; echo \\n`;
    const email = 'ci+$USER@example.com';
    const result = await runScript(
      'out',
      {
        source: source(repo, {
          git_config: [
            { name: 'user.name', value: name },
            { name: 'user.email', value: email },
          ],
        }),
        params: { acquire: true },
      },
      { args: [await mkdtemp(join(repo.root, 'src-'))] },
    );
    expect(result.code, result.stderr).toBe(0);
    const { stdout } = await exec('git', ['log', '-1', '--format=%cn%n%ce%n%an', repo.branch], {
      cwd: repo.bare,
    });
    expect(stdout).toBe(`${name}\n${email}\n${name}\n`);
  });

  it.each([
    'core.sshCommand',
    'core.fsmonitor',
    'core.hooksPath',
    'core.gitProxy',
    'core.askPass',
    'credential.helper',
    'credential.https://example.com.helper',
    'protocol.allow',
    'protocol.file.allow',
    'include.path',
    'alias.st',
    'ssh.variant',
    'filter.lfs.smudge',
  ])('refuses %s before any git work, naming the key', async (key) => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    const before = await repo.tip();
    const result = await runScript(
      'out',
      {
        source: source(repo, { git_config: [{ name: key, value: 'touch /tmp/owned' }] }),
        params: { acquire: true },
      },
      { args: [await mkdtemp(join(repo.root, 'src-'))] },
    );
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(
      `invalid payload (git_config: "${key}" is not allowed: it makes git run a program, read more configuration or use another transport)\n`,
    );
    expect(await repo.tip()).toBe(before);
  });

  it('reports every refused key and malformed name at once', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    const result = await runScript('check', {
      source: source(repo, {
        git_config: [
          { name: 'core.sshCommand', value: 'ssh' },
          { name: 'user.name', value: 'fine' },
          { name: 'not a key', value: 'x' },
          { name: 'CREDENTIAL.Helper', value: 'store' },
        ],
      }),
    });
    expect(result.code).toBe(1);
    expect(result.stderr.trimEnd().split('\n')).toEqual([
      'invalid payload (git_config: "core.sshCommand" is not allowed: it makes git run a program, read more configuration or use another transport)',
      'invalid payload (git_config: "not a key" is not a git config name (section.name))',
      'invalid payload (git_config: "CREDENTIAL.Helper" is not allowed: it makes git run a program, read more configuration or use another transport)',
    ]);
  });
});
