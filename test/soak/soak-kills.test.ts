// Soak with lost workers: 8 workers share 2 locks over git daemon, and before each of its rounds
// a worker may start a second put that is SIGKILLed while it waits in line (nothing can clean up
// after a SIGKILL: its entry stays in the line). Every put that was not killed finishes, no lock
// stays free for longer than one grace while such a put waits for one, mutual exclusion holds,
// and once the next put has come through, no entry of a killed put is left in the line.
//
// Tagged `soak`, sized by SOAK_ROUNDS as soak.test.ts.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGitDaemon, type GitDaemon } from '../helpers/git-daemon.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { consistencyProblems } from '../helpers/pool-invariants.js';
import { runScript, startScript, tempDir, type ScriptResult } from '../helpers/run-script.js';
import { source as lockSource } from '../helpers/source.js';
import { waitingLineRefs } from '../helpers/hold-checks.mjs';

const ROUNDS = Math.max(1, Number(process.env.SOAK_ROUNDS ?? 2) || 2);
const WORKERS = 8;
const LOCKS = ['lock-1', 'lock-2'];
const RETRY_DELAY_MS = 250;
/** Twice retry_delay and 2 s (README, "The waiting line"). */
const GRACE_MS = 2 * RETRY_DELAY_MS + 2_000;
/**
 * What a hand-over costs beyond the grace, as seen from here: up to a second before the grace
 * starts (the release's commit time is known to the second, or the poll that notices it), the
 * fetch, the push taking the puts gone out of the line, the claim's own commit and push (and a
 * race lost to another put in line), and two scripts starting and ending on two busy cores.
 * Without the grace, a hand-over takes 0.4–0.9 s here; one after another, the graces of three
 * puts killed in a row took 12 s and more.
 */
const HANDOVER_SLACK_MS = 4_000;

let daemon: GitDaemon;
let repo: LockRepo;

beforeAll(async () => {
  repo = await createLockRepo({ pool: { unclaimed: LOCKS } });
  daemon = await startGitDaemon(repo.root);
});

afterAll(async () => {
  await daemon?.stop();
  await repo?.cleanup();
});

interface Hold {
  lock: string;
  /** When the claim was known to be on the remote, and when its release had landed. */
  claimed: number;
  released: number;
  /** When its release was started. */
  releasing: number;
}

const source = () => lockSource(daemon.url(repo.bare), { retry_delay: `${RETRY_DELAY_MS}ms` });

function lockOf(what: string, result: ScriptResult): string {
  if (result.code !== 0) throw new Error(`${what} exited ${result.code}: ${result.stderr}`);
  const response = JSON.parse(result.stdout) as { metadata: { name: string; value: string }[] };
  return response.metadata.find((item) => item.name === 'lock_name')!.value;
}

async function release(
  lock: string,
  buildUrl: string,
): Promise<{ releasing: number; released: number }> {
  const releasing = Date.now();
  const src = await tempDir();
  await mkdir(join(src, 'lock'));
  await writeFile(join(src, 'lock', 'name'), `${lock}\n`);
  const result = await runScript(
    'out',
    { source: source(), params: { release: 'lock' } },
    { args: [src], env: { BUILD_URL: buildUrl } },
  );
  if (result.code !== 0) throw new Error(`release of ${lock} exited ${result.code}`);
  return { releasing, released: Date.now() };
}

/**
 * A put killed while it waits. Should it have been served first, it is an ordinary hold; should
 * the kill have come after its claim landed, that lock is released here, as a person would.
 */
async function doomed(name: string, holds: Hold[], kills: number[]): Promise<boolean> {
  const buildUrl = `https://ci/doomed/${name}`;
  const run = startScript(
    'out',
    { source: source(), params: { acquire: true } },
    { args: [await tempDir()], env: { BUILD_URL: buildUrl } },
  );
  const waiting = run.waitForStderr(/waiting in line/, 30_000).then(
    () => true,
    () => false,
  );
  if (!(await Promise.race([waiting, run.done.then(() => false)]))) {
    const result = await run.done;
    const claimed = Date.now();
    const lock = lockOf(name, result);
    holds.push({ lock, claimed, ...(await release(lock, buildUrl)) });
    return false;
  }
  await new Promise((resolve) => setTimeout(resolve, Math.random() * 400));
  run.child.kill('SIGKILL');
  kills.push(Date.now());
  await run.done;
  // Its git children have groups of their own and may still finish a push.
  await new Promise((resolve) => setTimeout(resolve, 300));
  const subject = (
    await git(
      repo.bare,
      'log',
      '-1',
      '--format=%s',
      '--fixed-strings',
      `--grep=${buildUrl}`,
      repo.branch,
    )
  ).trim();
  if (subject.startsWith('claiming: ')) {
    const lock = subject.slice('claiming: '.length);
    const claimed = Date.now();
    holds.push({ lock, claimed, ...(await release(lock, buildUrl)) });
  }
  return true;
}

describe('soak with lost workers', () => {
  it(
    `${WORKERS} workers × ${LOCKS.length} locks × ${ROUNDS} rounds, waiting puts SIGKILLed at random`,
    { tags: ['soak'], timeout: Math.max(240_000, ROUNDS * 120_000) },
    async () => {
      const holds: Hold[] = [];
      /** Acquires of puts that were not killed: when each started and ended. */
      const live: { from: number; to: number }[] = [];
      /** When each killed put was killed. */
      const kills: number[] = [];
      let killed = 0;
      const worker = async (index: number) => {
        for (let round = 0; round < ROUNDS; round++) {
          if (Math.random() < 0.5 && (await doomed(`${index}-${round}`, holds, kills))) killed++;
          const from = Date.now();
          const acquired = await runScript(
            'out',
            { source: source(), params: { acquire: true } },
            { args: [await tempDir()], env: { BUILD_URL: `https://ci/live/${index}-${round}` } },
          );
          const claimed = Date.now();
          live.push({ from, to: claimed });
          const lock = lockOf(`worker ${index} round ${round}`, acquired);
          await new Promise((resolve) => setTimeout(resolve, Math.random() * 200));
          holds.push({ lock, claimed, ...(await release(lock, `https://ci/live/${index}`)) });
        }
      };
      await Promise.all(Array.from({ length: WORKERS }, (_, index) => worker(index)));
      // Every put that was not killed finished (a failure above throws).
      expect(live).toHaveLength(WORKERS * ROUNDS);

      // Mutual exclusion, and how long each lock stayed free while a live put waited for one:
      // behind puts killed before it became free, at most one grace (and the hand-over's work).
      // A put killed while the lock stood free was alive until then, and has its grace from the
      // last time it showed it: those stalls are reported, not bounded by one grace.
      let longestFree = 0;
      let longestBehindDead = 0;
      for (const lock of LOCKS) {
        const ofLock = holds
          .filter((hold) => hold.lock === lock)
          .sort((a, b) => a.claimed - b.claimed);
        for (let i = 1; i < ofLock.length; i++) {
          const free = ofLock[i - 1]!.released;
          const taken = ofLock[i]!.claimed;
          expect(taken, `${lock} claimed again before its release`).toBeGreaterThan(
            ofLock[i - 1]!.releasing,
          );
          if (!live.some(({ from, to }) => from < free && to > free)) continue;
          longestFree = Math.max(longestFree, taken - free);
          if (!kills.some((at) => at > free && at < taken))
            longestBehindDead = Math.max(longestBehindDead, taken - free);
        }
      }
      process.stderr.write(
        `soak with kills: ${killed} puts killed while waiting; longest a lock stayed free while a put waited: ${longestBehindDead} ms behind puts killed before, ${longestFree} ms in all\n`,
      );
      expect(longestBehindDead).toBeLessThan(GRACE_MS + HANDOVER_SLACK_MS);

      // The next put, a grace later, takes out whatever entry of a killed put is left. (The last
      // release's commit time is known to the second: a second more to be sure of the grace.)
      await new Promise((resolve) => setTimeout(resolve, GRACE_MS + 1_000));
      const next = await runScript(
        'out',
        { source: source(), params: { acquire: true } },
        { args: [await tempDir()], env: { BUILD_URL: 'https://ci/next' } },
      );
      await release(lockOf('the next put', next), 'https://ci/next');
      expect(await waitingLineRefs(repo.bare)).toEqual([]);
      expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: LOCKS });
      expect(await consistencyProblems(repo.bare, repo.branch, ['pool'])).toEqual([]);
    },
  );
});
