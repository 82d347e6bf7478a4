// Soak: 16 workers share 4 locks over git daemon, and 6 share 2 over OpenSSH's sshd (each run on
// one shared SSH connection), each round acquire → hold → in → release through the real scripts.
// Zero overlapping holds (from the workers' own clocks), every lock free at the end, and a
// history in which every commit after the first moves exactly one lock.
//
// Tagged `soak`. Size: SOAK_ROUNDS rounds per worker (default 2, about a minute on two cores;
// `npm test` runs the default). Alone and bigger: `SOAK_ROUNDS=25 npx vitest run --tags-filter=soak`.
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { servedLockRepo } from '../helpers/git-daemon.js';
import { generateKey, startSshd, type KeyPair, type Sshd } from '../helpers/sshd.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { overlappingHolds } from '../helpers/hold-checks.mjs';
import { consistencyProblems, history, singleMoveProblem } from '../helpers/pool-invariants.js';
import { runScript, tempDir, type ScriptResult } from '../helpers/run-script.js';
import { source as lockSource } from '../helpers/source.js';

const ROUNDS = Math.max(1, Number(process.env.SOAK_ROUNDS ?? 2) || 2);
/** How long a worker keeps its lock, at most (random, so holds interleave differently each run). */
const HOLD_MS = 100;

interface Soak {
  workers: number;
  locks: string[];
  /** SSH polls start a process on each side, so they poll less often there. */
  retryDelay: string;
  repo: LockRepo;
  uri: string;
  /** More source fields: the SSH key. */
  extra: Record<string, string>;
}

interface Hold {
  worker: number;
  round: number;
  lock: string;
  ref: string;
  /** When acquire had exited (the claim was on the remote) and when release was started. */
  from: number;
  to: number;
}

let sshd: Sshd;
let sshRepo: LockRepo;
let keysDir: string;
let key: KeyPair;
const DAEMON_LOCKS = ['lock-1', 'lock-2', 'lock-3', 'lock-4'];
const SSH_LOCKS = ['lock-1', 'lock-2'];
const daemonServed = servedLockRepo({ unclaimed: DAEMON_LOCKS });

beforeAll(async () => {
  sshRepo = await createLockRepo({ pool: { unclaimed: SSH_LOCKS } });
  keysDir = await mkdtemp(join(tmpdir(), 'pool-keys-'));
  key = await generateKey(keysDir, 'client', { type: 'ed25519' });
  sshd = await startSshd([key.publicKey]);
});

afterAll(async () => {
  await sshd?.stop();
  await sshRepo?.cleanup();
  if (keysDir) await rm(keysDir, { recursive: true, force: true });
});

function expectSuccess(what: string, result: ScriptResult): { version: { ref: string } } {
  if (result.code !== 0) throw new Error(`${what} exited ${result.code}: ${result.stderr}`);
  const lines = result.stdout.trim().split('\n');
  if (lines.length !== 1) throw new Error(`${what} printed ${lines.length} lines on stdout`);
  return JSON.parse(result.stdout);
}

async function worker(index: number, soak: Soak, holds: Hold[]): Promise<void> {
  const source = lockSource(soak.uri, { retry_delay: soak.retryDelay, ...soak.extra });
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

async function soak(run: Soak): Promise<void> {
  const { workers, locks, repo } = run;
  const holds: Hold[] = [];
  const started = Date.now();
  await Promise.all(Array.from({ length: workers }, (_, index) => worker(index, run, holds)));
  const elapsed = Date.now() - started;
  expect(holds).toHaveLength(workers * ROUNDS);

  // Mutual exclusion, from the workers' own clocks: two holds of one lock never overlap.
  expect(overlappingHolds(holds)).toEqual([]);

  // Every lock is free again, nothing else changed.
  expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: locks });
  expect(await consistencyProblems(repo.bare, repo.branch, ['pool'])).toEqual([]);

  // The history: the seed, then one claim and one release per hold, each moving one lock.
  const commits = await history(repo.bare, repo.branch);
  expect(commits[0]!.subject).toBe('initial pools');
  const moves = commits.slice(1);
  expect(moves).toHaveLength(2 * workers * ROUNDS);
  expect(moves.map((commit) => singleMoveProblem(commit, 'pool')).filter(Boolean)).toEqual([]);
  // Each response's version is that worker's own claiming commit, every one distinct.
  const claims = new Map(moves.map((commit) => [commit.commit, commit.subject]));
  for (const hold of holds) expect(claims.get(hold.ref)).toBe(`claiming: ${hold.lock}`);
  expect(new Set(holds.map((hold) => hold.ref)).size).toBe(holds.length);
  // Every claim carries its own token.
  const tokens = (await git(repo.bare, 'log', '--format=%(trailers:key=Claim-Token,valueonly)'))
    .split('\n')
    .filter(Boolean);
  expect(tokens).toHaveLength(workers * ROUNDS);
  expect(new Set(tokens).size).toBe(tokens.length);

  process.stderr.write(
    `soak: ${holds.length} holds, ${moves.length} commits in ${(elapsed / 1000).toFixed(1)}s\n`,
  );
}

describe('soak', () => {
  const options = { tags: ['soak'], timeout: Math.max(180_000, ROUNDS * 90_000) };
  it(`16 workers × 4 locks × ${ROUNDS} rounds over git daemon`, options, () =>
    soak({
      workers: 16,
      locks: DAEMON_LOCKS,
      retryDelay: '250ms',
      repo: daemonServed.repo,
      uri: daemonServed.url,
      extra: {},
    }),
  );

  it(`6 workers × 2 locks × ${ROUNDS} rounds over SSH, one connection per run`, options, () =>
    soak({
      workers: 6,
      locks: SSH_LOCKS,
      retryDelay: '1s',
      repo: sshRepo,
      uri: sshd.url(sshRepo.bare),
      extra: { private_key: key.privateKey },
    }),
  );
});
