// SPEC §7, no leaked lock: SIGTERM at random instants over the whole acquire of a free lock, from
// the start until the result is written, over git daemon, over SSH (where git runs our SSH
// program), over HTTP with basic auth (git-remote-http) and over a local path (where git's
// upload-pack and receive-pack are our own grandchildren). Every run must either print a valid
// result and hold its lock, or exit non-zero with no lock claimed by it on the remote.
import { mkdtemp, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startGitDaemon, type GitDaemon } from '../helpers/git-daemon.js';
import { startHttpGit, type HttpGitServer } from '../helpers/http-git.js';
import { createLockRepo, type LockRepo } from '../helpers/lock-repo.js';
import { generateKey, startSshd, type Sshd } from '../helpers/sshd.js';
import { processesWithTmpdir } from '../helpers/leftover-processes.js';
import { sleep, startStoppable, stepFolder, stop, type Stopped } from '../helpers/stopping.js';
import { runScript, startScript, type ScriptResult } from '../helpers/run-script.js';

let repo: LockRepo;
let daemon: GitDaemon;
let sshd: Sshd;
let privateKey: string;
let http: HttpGitServer;
beforeAll(async () => {
  repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
  daemon = await startGitDaemon(repo.root);
  const key = await generateKey(repo.root, 'client', { type: 'ed25519' });
  privateKey = key.privateKey;
  sshd = await startSshd([key.publicKey]);
  http = await startHttpGit({ projectRoot: repo.root, username: 'locksmith', password: 'pw' });
});
afterAll(async () => {
  await daemon?.stop();
  await sshd?.stop();
  await http?.stop();
  await repo?.cleanup();
});

async function freeLock(): Promise<void> {
  if ((await repo.state('pool')).claimed.length === 0) return;
  await repo.commit('unclaiming: lock-a', (work) =>
    rename(join(work, 'pool/claimed/lock-a'), join(work, 'pool/unclaimed/lock-a')),
  );
}

/** Git's lock files left in the remote (a receive-pack killed without cleaning up). */
async function remoteLockFiles(): Promise<string[]> {
  const entries = await readdir(repo.bare, { recursive: true });
  return entries.filter((path) => path.endsWith('.lock'));
}

it('leaks no lock over 32 acquires over git daemon stopped at random instants', async () => {
  await stopAtRandom(daemon.url(repo.bare), 32);
}, 240_000);

it('leaks no lock over 12 acquires over SSH stopped at random instants', async () => {
  await stopAtRandom(sshd.url(repo.bare), 12, { private_key: privateKey });
}, 120_000);

it('leaks no lock over 12 acquires over HTTP stopped at random instants', async () => {
  await stopAtRandom(http.url(repo.bare), 12, { username: 'locksmith', password: 'pw' });
}, 120_000);

it('leaks no lock over 12 acquires over a local path stopped at random instants', async () => {
  await stopAtRandom(repo.bare, 12);
}, 120_000);

// Concourse reuses a check container, and with it the copy `check` keeps in TMPDIR; a check it
// stops (check_timeout, a worker going away) must leave that copy to the next check in a state
// that answers right, with no process left and no lock folder that would keep it from the copy.
it('a check stopped at random instants leaves its cached copy to the next check', async () => {
  const pool = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
  const server = await startGitDaemon(pool.root);
  const tmp = await mkdtemp(join(tmpdir(), 'pool-check-stop-'));
  try {
    const source = { uri: server.url(pool.bare), branch: pool.branch, pool: 'pool' };
    const update = (i: number) =>
      pool.commit(`updating: lock-a`, (work) =>
        writeFile(join(work, 'pool/unclaimed/lock-a'), `{"round":${i}}\n`),
      );
    await update(0);
    const first = await runScript('check', { source }, { tmpdir: tmp });
    expect(first.code).toBe(0);
    let version = (JSON.parse(first.stdout) as { ref: string }[]).at(-1);
    // How long an undisturbed check of one new commit takes: the last follow-up check's.
    let span = first.exitMs;
    const outcomes = { finished: 0, stopped: 0, killedBeforeHandlers: 0, answeredAnyway: 0 };
    for (let i = 1; i <= 24; i++) {
      await update(i);
      // Over the second half of a check: its first half is mostly Node starting and loading, when
      // a signal still ends the process outright (nothing has started yet).
      const delay = Math.round(span * (0.5 + 0.5 * Math.random()));
      const context = `run ${i}, SIGTERM ${delay} ms after spawn`;
      const run = startScript('check', { source, version }, { tmpdir: tmp });
      const finished = await Promise.race([run.done, sleep(delay).then(() => undefined)]);
      if (!finished) run.child.kill('SIGTERM');
      const result = finished ?? (await run.done);
      if (finished) outcomes.finished++;
      else if (result.code === 143) outcomes.stopped++;
      else if (result.signal === 'SIGTERM') outcomes.killedBeforeHandlers++;
      else {
        // The signal came as it was writing its answer.
        expect(result.code, `${context}: ${result.stderr}`).toBe(0);
        outcomes.answeredAnyway++;
      }
      const others = (await processesWithTmpdir(tmp)).filter((p) => p.pid !== run.child.pid);
      expect(others, context).toEqual([]);
      const cache = await readdir(join(tmp, 'pool-resource-check'));
      expect(
        cache.filter((name) => name.endsWith('.lock')),
        context,
      ).toEqual([]);

      const next = await runScript('check', { source, version }, { tmpdir: tmp });
      expect(next.code, `${context}; the next check: ${next.stderr}`).toBe(0);
      const versions = JSON.parse(next.stdout) as { ref: string }[];
      expect(versions.at(-1)?.ref, context).toBe(await pool.tip());
      version = versions.at(-1);
      span = next.exitMs;
    }
    console.log(`check stopped at random, 24 runs: ${JSON.stringify(outcomes)}`);
    expect(outcomes.stopped, 'some checks were stopped while working').toBeGreaterThan(0);
  } finally {
    await server.stop();
    await pool.cleanup();
    await rm(tmp, { recursive: true, force: true });
  }
}, 120_000);

async function stopAtRandom(
  uri: string,
  runs: number,
  extra: Record<string, unknown> = {},
): Promise<void> {
  const request = {
    source: { uri, branch: repo.branch, pool: 'pool', ...extra },
    params: { acquire: true },
  };
  const src = await stepFolder('unused');

  // When an undisturbed acquire says it has the lock (its claim was pushed just before) and when
  // it exits, measured from spawn: the signals cover all of it and aim at the claim half the time.
  const acquiredAt: number[] = [];
  const exitedAt: number[] = [];
  const start = async () => {
    const started = Date.now();
    const run = await startStoppable('out', request, [src]);
    run.child.stderr!.on('data', (chunk: string) => {
      if (chunk.includes('acquired!')) acquiredAt.push(Date.now() - started);
    });
    return run;
  };
  for (let i = 0; i < 3; i++) {
    const run = await start();
    const result = await run.done;
    await run.cleanup();
    expect(result.code).toBe(0);
    exitedAt.push(result.exitMs);
    await freeLock();
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1] ?? 0;

  const tally = {
    held: 0,
    finishedFirst: 0,
    stoppedBeforeClaim: 0,
    released: 0,
    releasedAfterResult: 0,
  };
  const exits: number[] = [];
  const eofs: number[] = [];
  for (let i = 0; i < runs; i++) {
    const span = median(exitedAt);
    const acquired = median(acquiredAt);
    const [from, to] = i % 2 === 0 ? [0, span] : [acquired - 200, acquired + 80];
    const delay = Math.round(from + Math.random() * (to - from));
    const context = `run ${i}, SIGTERM ${delay} ms after spawn (an acquire takes ${span} ms)`;
    const run = await start();
    const finished = await Promise.race([run.done, sleep(delay).then(() => undefined)]);
    const stopped: Stopped | undefined = finished ? undefined : await stop(run, 'SIGTERM');
    const result: ScriptResult = stopped ?? finished!;
    if (stopped) {
      exits.push(stopped.exitAfterSignal);
      eofs.push(stopped.eofAfterSignal);
      // Well inside the 10 s before Concourse's SIGKILL, release included.
      expect(stopped.eofAfterSignal, context).toBeLessThan(6000);
    }
    expect(await run.leftovers(), context).toEqual([]);
    expect(await remoteLockFiles(), context).toEqual([]);
    const state = await repo.state('pool');
    const seen = `${context}; exit ${result.code ?? result.signal}; stderr:\n${result.stderr}`;
    if (result.code === 0) {
      const response = JSON.parse(result.stdout) as { version: { ref: string } };
      expect(response.version.ref, context).toBe(await repo.tip());
      expect(state, seen).toEqual({ claimed: ['lock-a'], unclaimed: [] });
      tally.held++;
      if (!('exitAfterSignal' in result)) tally.finishedFirst++;
      exitedAt.push(result.exitMs);
    } else {
      // Killed before the handlers were installed (nothing started yet), or 128+15.
      expect(result.code === 143 || result.signal === 'SIGTERM', context).toBe(true);
      expect(state, seen).toEqual({ claimed: [], unclaimed: ['lock-a'] });
      if (result.stderr.includes('released "lock-a"')) {
        tally.released++;
        if (result.stdout !== '') tally.releasedAfterResult++;
      } else {
        tally.stoppedBeforeClaim++;
      }
    }
    await run.cleanup();
    await freeLock();
  }
  const max = (values: number[]) => Math.max(0, ...values);
  // The figures SPEC §7 asks about, for the record.
  console.log(
    `${uri}, ${runs} runs: ${tally.held} held their lock (${tally.finishedFirst} finished before the signal), ${tally.stoppedBeforeClaim} stopped before claiming, ` +
      `${tally.released} released their claim (${tally.releasedAfterResult} after writing the result), 0 leaked; ` +
      `signal→exit median ${median(exits)} ms max ${max(exits)} ms, signal→EOF max ${max(eofs)} ms`,
  );
  expect(tally.held + tally.stoppedBeforeClaim + tally.released).toBe(runs);
}
