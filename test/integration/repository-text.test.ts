// Text from the lock repository is anyone's who can push there: holder trailers, Build URL lines,
// authors and lock names reach the build log and the terminal only through the display filter,
// escaped, never as escape sequences or carriage returns.
import { rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLockRepo, git, GIT_TEST_ENV, type LockRepo } from '../helpers/lock-repo.js';
import { runScript, startScript, tempDir } from '../helpers/run-script.js';
import { source } from '../helpers/source.js';

let repo: LockRepo;
afterEach(async () => repo?.cleanup());

const EVIL = '\u001b[2J\rx';
const SHOWN = '\\x1b[2J\\x0dx';

/** Anything that would act on a terminal: every control character but the line ends. */
function expectNothingRaw(text: string) {
  // eslint-disable-next-line no-control-regex
  expect(text).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
}

/** Moves `name` to claimed in one commit made by hand, as `author`, with `message`. */
async function claimByHand(name: string, message: string, author = 'Fixture') {
  await rename(join(repo.work, 'pool/unclaimed', name), join(repo.work, 'pool/claimed', name));
  await git(repo.work, 'add', '-A');
  const { execFile } = await import('node:child_process');
  await new Promise<void>((resolve, reject) =>
    execFile(
      'git',
      ['-c', 'commit.gpgSign=false', 'commit', '--quiet', '--date=2026-01-02T03:04:05Z', '-F', '-'],
      { cwd: repo.work, env: { ...GIT_TEST_ENV, GIT_AUTHOR_NAME: author } },
      (error) => (error ? reject(error) : resolve()),
    ).stdin!.end(message),
  );
}

async function push() {
  await git(repo.work, 'push', '--quiet', 'origin', `HEAD:refs/heads/${repo.branch}`);
}

describe('text from the lock repository', () => {
  it('shows holders escaped in the waiting progress and in pool status', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['by-trailer', 'by-url', 'by-author'] } });
    await claimByHand(
      'by-trailer',
      `claiming: by-trailer\n\nBuild URL: https://ci/builds/1\n\nClaimed-By: https://ci/${EVIL}/1\nClaimed-At: 2026-01-02T03:04:05Z\n`,
    );
    await claimByHand('by-url', `claiming: by-url\n\nBuild URL: https://ci/${EVIL}/2\n`);
    await claimByHand('by-author', 'claimed by hand\n', `Mallory ${EVIL}`);
    await push();

    const running = startScript(
      'out',
      { source: source(repo, { retry_delay: '50ms' }), params: { acquire: true } },
      { args: [await tempDir()] },
    );
    await running.waitForStderr(/waiting for lock/);
    running.child.kill('SIGTERM');
    const waited = await running.done;
    expect(waited.code).toBe(143);
    expectNothingRaw(waited.stderr);
    const line = waited.stderr.split('\n').find((text) => text.startsWith('waiting for lock'));
    expect(line).toContain(`"by-trailer" held by https://ci/${SHOWN}/1 since 2026-01-02T03:04:05Z`);
    // A Build URL line ends at the carriage return (it ends a line for the parser too).
    expect(line).toContain(`"by-url" held by https://ci/\\x1b[2J since 2026-01-02T03:04:05Z`);
    expect(line).toContain(`"by-author" held by Mallory ${SHOWN} <fixture@localhost> since`);

    const flags = ['--uri', repo.bare, '--branch', repo.branch, '--pool', 'pool'];
    const table = await runScript('pool', '', { args: ['status', ...flags] });
    expect(table.code, table.stderr).toBe(0);
    expectNothingRaw(table.stdout);
    expect(table.stdout).toContain(`https://ci/${SHOWN}/1`);
    expect(table.stdout).toContain(`https://ci/\\x1b[2J `);
    expect(table.stdout).toContain(`Mallory ${SHOWN} <fixture@localhost>`);

    // JSON escapes them itself, and keeps the values exact for scripts.
    const json = await runScript('pool', '', { args: ['status', '--json', ...flags] });
    expect(json.code, json.stderr).toBe(0);
    expectNothingRaw(json.stdout);
    const holders = (JSON.parse(json.stdout) as { claimed_by: string }[]).map(
      (entry) => entry.claimed_by,
    );
    expect(holders).toContain(`https://ci/${EVIL}/1`);
  });

  it('never writes a lock name with control characters raw to stderr', async () => {
    const name = `evil${EVIL}`;
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    const ref = await repo.commit('claiming by hand', async (work) => {
      await writeFile(join(work, 'pool/claimed', name), 'x\n');
    });

    const fetched = await runScript(
      'in',
      { source: source(repo, { retry_delay: '50ms' }), version: { ref } },
      { args: [await tempDir()] },
    );
    expect(fetched.code, fetched.stderr).toBe(0);
    expectNothingRaw(fetched.stderr);
    expect(fetched.stderr).toContain(`fetched lock: evil${SHOWN} (claimed)`);

    const table = await runScript('pool', '', {
      args: ['status', '--uri', repo.bare, '--branch', repo.branch, '--pool', 'pool'],
    });
    expect(table.code, table.stderr).toBe(0);
    expectNothingRaw(table.stdout + table.stderr);
    expect(table.stdout).toMatch(new RegExp(`^evil\\\\x1b\\[2J\\\\x0dx +claimed +Fixture`, 'm'));
  });
});
