// While `out` waits, its lines say who holds the wanted locks and for how long, read from the
// claiming commits (trailers, or for older commits the Build URL line or the author), and they
// come when something changes, not once per poll.
import { spawn } from 'node:child_process';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { runScript, startScript, tempDir } from '../helpers/run-script.js';
import { source } from '../helpers/source.js';

let repo: LockRepo;
afterEach(async () => repo?.cleanup());

/** Commits in the working clone with a chosen author date, without pushing. */
async function commitAt(message: string, date: string, change: (work: string) => Promise<void>) {
  await change(repo.work);
  await git(repo.work, 'add', '-A');
  await git(repo.work, 'commit', '--quiet', '--allow-empty', `--date=${date}`, '-m', message);
}

async function push() {
  await git(repo.work, 'push', '--quiet', 'origin', `HEAD:refs/heads/${repo.branch}`);
}

function moveToClaimed(name: string) {
  return (work: string) =>
    rename(join(work, 'pool/unclaimed', name), join(work, 'pool/claimed', name));
}

function waitingLines(stderr: string): string[] {
  return stderr.split('\n').filter((line) => /waiting for lock/.test(line));
}

async function claimAs(buildUrl: string, params: Record<string, unknown>) {
  const result = await runScript(
    'out',
    { source: source(repo, { retry_delay: '50ms' }), params },
    { args: [await tempDir()], env: { BUILD_URL: buildUrl } },
  );
  expect(result.code).toBe(0);
}

/** Runs a put until its first waiting line, then stops it as Concourse would (SIGTERM). */
async function untilWaiting(params: Record<string, unknown>, src: string) {
  const running = startScript(
    'out',
    { source: source(repo, { retry_delay: '50ms' }), params },
    { args: [src] },
  );
  await running.waitForStderr(/waiting for lock/);
  running.child.kill('SIGTERM');
  const result = await running.done;
  expect(result.code).toBe(143);
  return result;
}

describe('holder-aware waiting progress', () => {
  it('names the build holding the lock, since when and for how long (holder trailers)', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    await claimAs('https://ci.example.com/builds/1', { claim: 'lock-a' });
    const claimedAt = (
      await git(repo.bare, 'log', '-1', '--format=%(trailers:key=Claimed-At,valueonly)')
    ).trim();

    const result = await untilWaiting({ claim: 'lock-a' }, await tempDir());
    expect(result.stderr).toContain('claiming lock: lock-a on: pool');
    const lines = waitingLines(result.stderr);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      new RegExp(
        `^waiting for lock: lock "lock-a" in pool "pool" is claimed \\(1 claimed, 0 unclaimed\\); "lock-a" held by https://ci\\.example\\.com/builds/1 since ${claimedAt} \\(for \\d+(\\.\\d)?m?s\\)$`,
      ),
    );
  });

  it('reads older commits: the Build URL line and the commit date', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    await commitAt(
      'claiming: lock-a\n\nBuild URL: https://old.example.com/builds/7',
      '2026-01-02T03:04:05Z',
      moveToClaimed('lock-a'),
    );
    await push();
    const result = await untilWaiting({ claim: 'lock-a' }, await tempDir());
    expect(waitingLines(result.stderr)[0]).toMatch(
      /is claimed \(1 claimed, 0 unclaimed\); "lock-a" held by https:\/\/old\.example\.com\/builds\/7 since 2026-01-02T03:04:05Z \(for \d+h(\d+m)?\)$/,
    );
  });

  it('names the author of a hand-made claim without a Build URL line', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    await commitAt('took it by hand', '2026-03-04T05:06:07Z', moveToClaimed('lock-a'));
    await push();
    const result = await untilWaiting({ check: 'lock' }, await stepWith('lock-a'));
    expect(waitingLines(result.stderr)[0]).toContain(
      '"lock-a" held by Fixture <fixture@localhost> since 2026-03-04T05:06:07Z',
    );
  });

  it('finds a claim made long before the shallow tip (many commits since, on another pool)', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] }, other: { unclaimed: ['x'] } });
    await commitAt(
      'claiming: lock-a\n\nBuild URL: https://deep.example.com/builds/1\n\nClaimed-By: https://deep.example.com/builds/1\nClaimed-At: 2026-02-03T04:05:06Z',
      '2026-02-03T04:05:06Z',
      moveToClaimed('lock-a'),
    );
    await appendCommits(120);
    const result = await untilWaiting({ update: 'lock' }, await stepWith('lock-a', 'new\n'));
    expect(waitingLines(result.stderr)[0]).toContain(
      '"lock-a" held by https://deep.example.com/builds/1 since 2026-02-03T04:05:06Z',
    );
  });

  it('stops looking after 1360 commits and says so', async () => {
    repo = await createLockRepo({ pool: { claimed: ['lock-a'] }, other: { unclaimed: ['x'] } });
    await appendCommits(1400);
    const started = Date.now();
    const running = startScript(
      'out',
      { source: source(repo, { retry_delay: '50ms' }), params: { claim: 'lock-a' } },
      { args: [await tempDir()] },
    );
    await running.waitForStderr(/waiting for lock/);
    expect(Date.now() - started).toBeLessThan(15_000);
    running.child.kill('SIGTERM');
    const result = await running.done;
    expect(result.code).toBe(143);
    expect(waitingLines(result.stderr)[0]).toBe(
      'waiting for lock: lock "lock-a" in pool "pool" is claimed (1 claimed, 0 unclaimed); "lock-a": holder not found in the last 1360 commits',
    );
  });

  it('acquire names the longest-held locks first, at most three, and counts the rest', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a', 'b', 'c', 'd'] } });
    const dates = {
      a: '2026-05-01T00:00:00Z',
      b: '2026-04-01T00:00:00Z',
      c: '2026-06-01T00:00:00Z',
      d: '2026-03-01T00:00:00Z',
    };
    for (const [name, date] of Object.entries(dates)) {
      await commitAt(
        `claiming: ${name}\n\nBuild URL: https://ci/builds/${name}`,
        date,
        moveToClaimed(name),
      );
    }
    await push();
    const result = await untilWaiting({ acquire: true }, await tempDir());
    expect(result.stderr).toContain('acquiring lock on: pool');
    const [line] = waitingLines(result.stderr);
    expect(line).toMatch(
      /^waiting for lock: no unclaimed lock in pool "pool" \(4 claimed, 0 unclaimed\); "d" held by https:\/\/ci\/builds\/d since 2026-03-01T00:00:00Z \(for \d+h\d*m?\), "b" held by https:\/\/ci\/builds\/b since 2026-04-01T00:00:00Z \(for [^)]+\), "a" held by https:\/\/ci\/builds\/a since 2026-05-01T00:00:00Z \(for [^)]+\), and 1 more$/,
    );
  });

  it('in line behind a put that the free lock goes to, names the holders of the claimed ones', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a', 'lock-b'] } });
    await claimAs('https://ci/builds/1', { claim: 'lock-a' });
    // A put ahead in line (left by a stopped build, say) is entitled to lock-b, the free one.
    const ahead = `refs/pool-resource/waiting/master/pool/${Date.now() - 60_000}-3600000-ahead`;
    await git(repo.bare, 'update-ref', ahead, repo.branch);
    const result = await untilWaiting({ acquire: true }, await tempDir());
    expect(waitingLines(result.stderr)[0]).toMatch(
      /^waiting for lock: the unclaimed lock in pool "pool" goes to puts that have waited longer \(1 claimed, 1 unclaimed\); "lock-a" held by https:\/\/ci\/builds\/1 since \S+Z \(for [^)]+\)$/,
    );
  });

  it('writes one line per change, not one per poll, and the key phrases of the reference', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a', 'b'] } });
    await claimAs('https://ci/builds/1', { claim: 'a' });
    await claimAs('https://ci/builds/2', { claim: 'b' });
    const running = startScript(
      'out',
      {
        source: source(repo, { retry_delay: '50ms' }),
        params: { acquire: true, wait_timeout: '20s' },
      },
      { args: [await tempDir()], env: { BUILD_URL: 'https://ci/builds/3' } },
    );
    await running.waitForStderr(/waiting for lock: .*2 claimed/);
    // Dozens of polls at 50 ms go by without a new line.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(waitingLines(running.stderrSoFar())).toHaveLength(1);

    // Someone else adds a claimed lock: the situation changed, so one new line.
    const src = await stepWith('c', '{}\n');
    const added = await runScript(
      'out',
      { source: source(repo, { retry_delay: '50ms' }), params: { add_claimed: 'lock' } },
      { args: [src], env: { BUILD_URL: 'https://ci/builds/4' } },
    );
    expect(added.code).toBe(0);
    await running.waitForStderr(/waiting for lock: .*3 claimed/);

    // Then "b" is released: the waiting put takes it.
    const released = await runScript(
      'out',
      { source: source(repo, { retry_delay: '50ms' }), params: { release: 'lock' } },
      { args: [await stepWith('b')] },
    );
    expect(released.code).toBe(0);
    const result = await running.done;
    expect(result.code).toBe(0);
    const lines = waitingLines(result.stderr);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toContain('"c" held by https://ci/builds/4 since');
    expect(result.stderr).toMatch(/acquired! lock: b/);
  });
});

/** Many commits on another pool at once, through git fast-import (one process). */
async function appendCommits(count: number) {
  const tip = (await git(repo.work, 'rev-parse', 'HEAD')).trim();
  let stream = '';
  for (let i = 1; i <= count; i++) {
    const content = `${i}\n`;
    stream += `commit refs/heads/${repo.branch}\nmark :${i}\n`;
    stream += `author Fixture <fixture@localhost> 1767225600 +0000\n`;
    stream += `committer Fixture <fixture@localhost> 1767225600 +0000\n`;
    stream += `data 12\nupdating: x\n${i === 1 ? `from ${tip}` : `from :${i - 1}`}\n`;
    stream += `M 100644 inline other/unclaimed/x\ndata ${Buffer.byteLength(content)}\n${content}\n`;
  }
  await new Promise<void>((resolve, reject) => {
    const child = spawn('git', ['fast-import', '--quiet', '--force'], {
      cwd: repo.work,
      stdio: ['pipe', 'ignore', 'inherit'],
    });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`fast-import exit ${code}`)),
    );
    child.stdin.end(stream);
  });
  await git(repo.work, 'reset', '--quiet', '--hard', repo.branch);
  await push();
}

async function stepWith(name: string, metadata?: string): Promise<string> {
  const src = await tempDir();
  await mkdir(join(src, 'lock'));
  await writeFile(join(src, 'lock', 'name'), `${name}\n`);
  if (metadata !== undefined) await writeFile(join(src, 'lock', 'metadata'), metadata);
  return src;
}
