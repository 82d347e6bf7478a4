// Soak: 16 workers share 4 locks over git daemon, each round acquire → hold → in → release through
// the real scripts. Zero overlapping holds (from the workers' own clocks), every lock free at the
// end, and a history in which every commit after the first moves exactly one lock.
//
// Tagged `soak`. Size: SOAK_ROUNDS rounds per worker (default 2, about a minute on two cores;
// `npm test` runs the default). Alone and bigger: `SOAK_ROUNDS=25 npx vitest run --tags-filter=soak`.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGitDaemon, type GitDaemon } from '../helpers/git-daemon.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { consistencyProblems, history, singleMoveProblem } from '../helpers/pool-invariants.js';
import { runScript, tempDir, type ScriptResult } from '../helpers/run-script.js';

const WORKERS = 16;
const LOCKS = ['lock-1', 'lock-2', 'lock-3', 'lock-4'];
const ROUNDS = Math.max(1, Number(process.env.SOAK_ROUNDS ?? 2) || 2);
/** How long a worker keeps its lock, at most (random, so holds interleave differently each run). */
const HOLD_MS = 100;

interface Hold {
  worker: number;
  round: number;
  lock: string;
  ref: string;
  /** When acquire had exited (the claim was on the remote) and when release was started. */
  from: number;
  to: number;
}

let repo: LockRepo;
let daemon: GitDaemon;

beforeAll(async () => {
  repo = await createLockRepo({ pool: { unclaimed: LOCKS } });
  daemon = await startGitDaemon(repo.root);
});

afterAll(async () => {
  await daemon?.stop();
  await repo?.cleanup();
});

function expectSuccess(what: string, result: ScriptResult): { version: { ref: string } } {
  if (result.code !== 0) throw new Error(`${what} exited ${result.code}: ${result.stderr}`);
  const lines = result.stdout.trim().split('\n');
  if (lines.length !== 1) throw new Error(`${what} printed ${lines.length} lines on stdout`);
  return JSON.parse(result.stdout);
}

async function worker(index: number, uri: string, holds: Hold[]): Promise<void> {
  const source = { uri, branch: repo.branch, pool: 'pool', retry_delay: '250ms' };
  const env = {
    ATC_EXTERNAL_URL: 'http://ci.example',
    BUILD_TEAM_NAME: 'main',
    BUILD_PIPELINE_NAME: 'soak',
    BUILD_JOB_NAME: `worker-${index}`,
  };
  for (let round = 0; round < ROUNDS; round++) {
    const buildEnv = { ...env, BUILD_NAME: String(round + 1), BUILD_ID: `${index}-${round}` };
    const acquired = expectSuccess(
      `worker ${index} round ${round} acquire`,
      await runScript(
        'out',
        { source, params: { acquire: true } },
        {
          args: [await tempDir()],
          env: buildEnv,
        },
      ),
    );
    const from = Date.now();
    await new Promise((resolve) => setTimeout(resolve, Math.random() * HOLD_MS));

    // The implicit get after the put.
    const dest = join(await tempDir(), 'lock');
    expectSuccess(
      `worker ${index} round ${round} in`,
      await runScript('in', { source, version: acquired.version }, { args: [dest], env: buildEnv }),
    );
    const lock = (await readFile(join(dest, 'name'), 'utf8')).trim();

    const src = await tempDir();
    await mkdir(join(src, 'lock'));
    await writeFile(join(src, 'lock', 'name'), `${lock}\n`);
    const to = Date.now();
    expectSuccess(
      `worker ${index} round ${round} release`,
      await runScript(
        'out',
        { source, params: { release: 'lock' } },
        { args: [src], env: buildEnv },
      ),
    );
    holds.push({ worker: index, round, lock, ref: acquired.version.ref, from, to });
  }
}

describe('soak', () => {
  it(
    `${WORKERS} workers × ${LOCKS.length} locks × ${ROUNDS} rounds over git daemon`,
    { tags: ['soak'], timeout: Math.max(180_000, ROUNDS * 90_000) },
    async () => {
      const holds: Hold[] = [];
      const started = Date.now();
      await Promise.all(
        Array.from({ length: WORKERS }, (_, index) => worker(index, daemon.url(repo.bare), holds)),
      );
      const elapsed = Date.now() - started;
      expect(holds).toHaveLength(WORKERS * ROUNDS);

      // Mutual exclusion, from the workers' own clocks: two holds of one lock never overlap.
      const violations: string[] = [];
      for (const lock of LOCKS) {
        const ofLock = holds.filter((hold) => hold.lock === lock).sort((a, b) => a.from - b.from);
        for (let i = 1; i < ofLock.length; i++) {
          const previous = ofLock[i - 1]!;
          const current = ofLock[i]!;
          if (current.from < previous.to)
            violations.push(
              `${lock}: worker ${current.worker} took it at ${current.from} while worker ${previous.worker} held it until ${previous.to}`,
            );
        }
      }
      expect(violations).toEqual([]);

      // Every lock is free again, nothing else changed.
      expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: LOCKS });
      expect(await consistencyProblems(repo.bare, repo.branch, ['pool'])).toEqual([]);

      // The history: the seed, then one claim and one release per hold, each moving one lock.
      const commits = await history(repo.bare, repo.branch);
      expect(commits[0]!.subject).toBe('initial pools');
      const moves = commits.slice(1);
      expect(moves).toHaveLength(2 * WORKERS * ROUNDS);
      expect(moves.map((commit) => singleMoveProblem(commit, 'pool')).filter(Boolean)).toEqual([]);
      // Each response's version is that worker's own claiming commit, every one distinct.
      const claims = new Map(moves.map((commit) => [commit.commit, commit.subject]));
      for (const hold of holds) expect(claims.get(hold.ref)).toBe(`claiming: ${hold.lock}`);
      expect(new Set(holds.map((hold) => hold.ref)).size).toBe(holds.length);
      // Every claim carries its own token.
      const tokens = (await git(repo.bare, 'log', '--format=%(trailers:key=Claim-Token,valueonly)'))
        .split('\n')
        .filter(Boolean);
      expect(tokens).toHaveLength(WORKERS * ROUNDS);
      expect(new Set(tokens).size).toBe(tokens.length);

      process.stderr.write(
        `soak: ${holds.length} holds, ${moves.length} commits in ${(elapsed / 1000).toFixed(1)}s\n`,
      );
    },
  );
});
