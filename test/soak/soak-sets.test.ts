// Soak with sets and filters: 8 workers share a pool of 5 locks (3 in region eu, 2 in us) over git
// daemon, each round taking 1 or 2 locks at once, some of them only among the eu locks
// (`match`), then the get and the release of what it took. Every put finishes, no lock is ever
// held twice (from the workers' own clocks), every lock is free at the end, and the history is
// one lock moved per commit.
//
// Tagged `soak`, sized by SOAK_ROUNDS as soak.test.ts.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { servedLockRepo } from '../helpers/git-daemon.js';
import { overlappingHolds } from '../helpers/hold-checks.mjs';
import { consistencyProblems, history, singleMoveProblem } from '../helpers/pool-invariants.js';
import { runScript, tempDir, type ScriptResult } from '../helpers/run-script.js';
import { source as lockSource } from '../helpers/source.js';
import { succeeded } from '../helpers/steps.js';

const ROUNDS = Math.max(1, Number(process.env.SOAK_ROUNDS ?? 2) || 2);
const WORKERS = 8;
const HOLD_MS = 100;
const LOCKS: Record<string, string> = {
  'eu-1': 'region: eu\n',
  'eu-2': '{"region": "eu"}\n',
  'eu-3': 'region: eu\nsize: large\n',
  'us-1': 'region: us\n',
  'us-2': 'region: us\n',
};

/** What worker `index` asks for: one or two locks, from the whole pool or only in eu. */
function asked(index: number): { count?: number; match?: Record<string, string> } {
  const count = index % 2 === 0 ? {} : { count: 2 };
  return index % 4 < 2 ? count : { ...count, match: { region: 'eu' } };
}

const served = servedLockRepo({ unclaimed: LOCKS });

/** A run that succeeded with one JSON response, whose failure says which run it was. */
function expectSuccess(what: string, result: ScriptResult): { version: { ref: string } } {
  expect(result.code, `${what}: ${result.stderr}`).toBe(0);
  return succeeded(result) as { version: { ref: string } };
}

interface Hold {
  worker: number;
  lock: string;
  from: number;
  to: number;
}

async function worker(index: number, holds: Hold[]): Promise<void> {
  const source = lockSource(served.url, { retry_delay: '250ms' });
  const want = asked(index);
  for (let round = 0; round < ROUNDS; round++) {
    const what = `worker ${index} round ${round}`;
    const acquired = expectSuccess(
      `${what} acquire`,
      await runScript(
        'out',
        { source, params: { acquire: true, ...want } },
        {
          args: [await tempDir()],
        },
      ),
    );
    const from = Date.now();
    await new Promise((resolve) => setTimeout(resolve, Math.random() * HOLD_MS));
    const build = await tempDir();
    expectSuccess(
      `${what} in`,
      await runScript('in', { source, version: acquired.version }, { args: [join(build, 'set')] }),
    );
    const names =
      want.count === 2
        ? (await readFile(join(build, 'set', 'names'), 'utf8')).split('\n').filter(Boolean)
        : [(await readFile(join(build, 'set', 'name'), 'utf8')).trim()];
    expect(names).toHaveLength(want.count ?? 1);
    if (want.match) for (const name of names) expect(name).toMatch(/^eu-/);
    const to = Date.now();
    expectSuccess(
      `${what} release`,
      await runScript('out', { source, params: { release: 'set' } }, { args: [build] }),
    );
    for (const lock of names) holds.push({ worker: index, lock, from, to });
  }
}

describe('soak with sets and filters', () => {
  it(
    `${WORKERS} workers taking 1 or 2 of 5 locks, some only eu ones, × ${ROUNDS} rounds`,
    { tags: ['soak'], timeout: Math.max(180_000, ROUNDS * 90_000) },
    async () => {
      const holds: Hold[] = [];
      await Promise.all(Array.from({ length: WORKERS }, (_, index) => worker(index, holds)));
      const expected = Array.from({ length: WORKERS }, (_, index) => asked(index).count ?? 1);
      expect(holds).toHaveLength(ROUNDS * expected.reduce((a, b) => a + b, 0));
      expect(overlappingHolds(holds)).toEqual([]);
      expect(await served.repo.state('pool')).toEqual({
        claimed: [],
        unclaimed: Object.keys(LOCKS),
      });
      expect(await consistencyProblems(served.repo.bare, served.repo.branch, ['pool'])).toEqual([]);
      const moves = (await history(served.repo.bare, served.repo.branch)).slice(1);
      expect(moves).toHaveLength(2 * holds.length);
      expect(moves.map((commit) => singleMoveProblem(commit, 'pool')).filter(Boolean)).toEqual([]);
    },
  );
});
