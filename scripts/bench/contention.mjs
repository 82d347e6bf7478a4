// @ts-check
// Contention: N workers × R rounds of acquire → hold → in → release over M locks, with the
// invariants the soak tests check (test/helpers/hold-checks.mjs).
import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  overlappingHolds,
  turnTakingProblems,
  waitingLineRefs,
} from '../../test/helpers/hold-checks.mjs';
import { contention } from './options.mjs';
import { git } from './process.mjs';
import { BRANCH, buildRepository } from './repository.mjs';
import { lockName, script, source, stepFolder } from './scripts.mjs';
import { median, percentile } from './stats.mjs';

/**
 * `daemon`: the server (git daemon, or sshd counting logins); `extra`: more source fields;
 * `tmpRoot`: where the workers' TMPDIRs go; `settings`: workers, locks, rounds, hold and
 * retry_delay (the command line's by default); `scripts`: another folder of scripts to run (the
 * reference's) and the environment they need.
 */
export async function measureContention(
  root,
  daemon,
  {
    name = 'contention.git',
    extra = {},
    tmpRoot = root,
    kills = false,
    settings = contention,
    scripts = { assets: undefined, env: {} },
  } = {},
) {
  const { workers, locks, rounds, holdMs, retryDelay } = settings;
  const repo = join(root, 'repos', name);
  await buildRepository(repo, 100, locks);
  const url = daemon.url(name);
  const sourced = () => source(url, retryDelay, extra);
  /** @type {(name: string, request: unknown, options: Parameters<typeof script>[2]) => ReturnType<typeof script>} */
  const put = (name, request, options) =>
    script(name, request, {
      ...options,
      assets: scripts.assets,
      // Another folder's scripts (the reference's) write ~/.ssh/config and ~/.netrc, and remove
      // ~/.netrc, at every start: each worker gets a home of its own, as each Concourse step has
      // a container of its own.
      env: { ...(scripts.assets ? { HOME: options.tmp } : {}), ...scripts.env, ...options.env },
    });
  const holds = [];
  const acquires = [];
  /** Acquires of puts that were not killed: [started, ended]. */
  const live = [];
  const killed = { count: 0, leaked: 0 };
  /** When each doomed put was killed. */
  const killedAt = [];
  /**
   * A put SIGKILLed while it waits (a lost worker): started, killed a random moment after it
   * says it waits, and its claim released by hand should the kill have come after it landed.
   */
  const doomed = async (id, round, tmp) => {
    const buildUrl = `http://bench/doomed/${id}-${round}`;
    const src = await mkdtemp(join(tmp, 'doomed-'));
    /** @type {import('node:child_process').ChildProcess} */
    let child;
    const run = put(
      'out',
      { source: sourced(), params: { acquire: true } },
      { args: [src], tmp, env: { BUILD_URL: buildUrl }, started: (c) => (child = c) },
    ).then(
      (result) => ({ result }),
      () => ({ result: undefined }),
    );
    let said = '';
    child.stderr.on('data', (chunk) => (said += chunk));
    for (;;) {
      const outcome = await Promise.race([run, sleep(20).then(() => undefined)]);
      if (outcome) {
        // It was served before it waited: an ordinary hold, released at once.
        if (outcome.result) {
          const { ended } = outcome.result;
          const released = await releaseLock(lockName(outcome.result.result), tmp);
          holds.push({
            worker: -1,
            lock: released.lock,
            from: ended,
            to: released.started,
            released: released.ended,
          });
        }
        return;
      }
      if (/waiting in line|waiting for lock/.test(said)) break;
    }
    await sleep(Math.random() * 500);
    child.kill('SIGKILL');
    killedAt.push(performance.now());
    await run;
    killed.count++;
    // Its git children are in groups of their own and may still finish a push.
    await sleep(500);
    const claim = (
      await git(repo, 'log', '-1', '--format=%s', '--fixed-strings', `--grep=${buildUrl}`, BRANCH)
    ).stdout.trim();
    if (claim.startsWith('claiming: ')) {
      killed.leaked++;
      const from = performance.now();
      const released = await releaseLock(claim.slice('claiming: '.length), tmp);
      holds.push({ worker: -1, lock: released.lock, from, to: from, released: released.ended });
    }
  };
  const releaseLock = async (lock, tmp) => {
    const step = await stepFolder(tmp, lock);
    const released = await put(
      'out',
      { source: sourced(), params: { release: 'lock' } },
      { args: [step], tmp },
    );
    return { lock, started: released.started, ended: released.ended };
  };
  const latencies = [];
  const inMs = [];
  const lostRaces = { acquire: 0, release: 0 };
  // `out` says so on stderr each time its push lost a race.
  const races = (stderr) => (stderr.match(/the pool changed while taking/g) ?? []).length;
  const releaseMs = [];
  const startConnections = daemon.connections();
  const startPushes = daemon.pushes();
  const startLooks = daemon.looks?.();
  const startRequests = daemon.requests?.();
  const started = performance.now();
  const worker = async (id) => {
    const tmp = await mkdtemp(join(tmpRoot, `worker-${id}-`));
    for (let round = 0; round < rounds; round++) {
      // Killed before this worker's own put joins: the line gets a dead entry ahead of it.
      if (kills && Math.random() < 0.5) await doomed(id, round, tmp);
      const src = await mkdtemp(join(tmp, 'src-'));
      const acquired = await put(
        'out',
        { source: sourced(), params: { acquire: true } },
        { args: [src], tmp },
      );
      live.push([acquired.started, acquired.ended]);
      latencies.push(acquired.ms);
      lostRaces.acquire += races(acquired.stderr);
      const lock = lockName(acquired.result);
      acquires.push({
        worker: id,
        lock,
        from: acquired.started,
        to: acquired.ended,
        lostRaces: races(acquired.stderr),
      });
      const holdFrom = acquired.ended;
      await sleep(holdMs);
      const dest = await mkdtemp(join(tmp, 'dest-'));
      const fetched = await put(
        'in',
        { source: sourced(), version: acquired.result.version },
        { args: [dest], tmp },
      );
      const step = await stepFolder(tmp, lock);
      const releasing = performance.now();
      const released = await put(
        'out',
        { source: sourced(), params: { release: 'lock' } },
        { args: [step], tmp },
      );
      holds.push({ worker: id, lock, from: holdFrom, to: releasing, released: released.ended });
      inMs.push(fetched.ms);
      lostRaces.release += races(released.stderr);
      releaseMs.push(released.ms);
    }
    // Retried: once, over SSH, a file appeared in the folder while it was being removed (ENOTEMPTY),
    // and the whole bench ended there.
    await rm(tmp, { recursive: true, force: true, maxRetries: 5 });
  };
  await Promise.all(Array.from({ length: workers }, (_, id) => worker(id)));
  const elapsedMs = performance.now() - started;
  const used = daemon.connections() - startConnections;
  const pushes = daemon.pushes() - startPushes;
  const looks = startLooks === undefined ? undefined : daemon.looks() - startLooks;
  const endRequests = daemon.requests?.();

  // Mutual exclusion, from our own clock (a lock's hold intervals never overlap) and from the
  // branch's history (per lock, claims and releases take turns).
  const subjects = (await git(repo, 'log', '--reverse', '--format=%s', BRANCH)).stdout
    .split('\n')
    .filter((s) => /^(un)?claiming: /.test(s));
  const violations =
    overlappingHolds(holds).length + turnTakingProblems(subjects.slice(-(2 * holds.length))).length;
  // Every put that waited in line took itself out of it (its claiming push does).
  const lineLeft = (await waitingLineRefs(repo)).length;
  const byLock = new Map();
  for (const hold of holds) byLock.set(hold.lock, [...(byLock.get(hold.lock) ?? []), hold]);
  for (const list of byLock.values()) list.sort((a, b) => a.from - b.from);
  // Hand-over: from a release's put finishing to the next claim of that lock finishing. The
  // longest of those during which a put that was not killed was waiting: a lock free for that
  // long while a put wanted one (the line's stall, if dead entries hold it up). Apart, the longest
  // with no put killed meanwhile: one killed while the lock stood free was alive until then, and
  // its grace counts from the last time it showed it (docs/waiting-line.md), as the soak test
  // with kills tells the two apart.
  const handovers = [];
  let maxFreeWhileWaitingMs = 0;
  let maxFreeBehindDeadMs = 0;
  for (const list of byLock.values())
    for (let i = 1; i < list.length; i++) {
      const free = list[i - 1].released;
      const taken = list[i].from;
      const gap = taken - free;
      handovers.push(gap);
      if (!live.some(([from, to]) => from < free && to > free)) continue;
      maxFreeWhileWaitingMs = Math.max(maxFreeWhileWaitingMs, gap);
      if (!killedAt.some((at) => at > free && at < taken))
        maxFreeBehindDeadMs = Math.max(maxFreeBehindDeadMs, gap);
    }
  const acquireCount = latencies.length;
  return {
    workers,
    locks,
    rounds,
    holdMs,
    retryDelay,
    acquires: acquireCount,
    elapsedMs,
    throughput: acquireCount / (elapsedMs / 1000),
    p50Ms: percentile(latencies, 50),
    p95Ms: percentile(latencies, 95),
    maxMs: Math.max(...latencies),
    connectionsPerAcquire: used / acquireCount,
    pushesPerAcquire: pushes / acquireCount,
    // Over git daemon: the looks among the connections, made without git.
    looksPerAcquire: looks === undefined ? undefined : looks / acquireCount,
    // Over HTTP(S): the requests the server answered, and the ls-refs among them.
    requestsPerAcquire:
      endRequests && startRequests
        ? (endRequests.all - startRequests.all) / acquireCount
        : undefined,
    listingsPerAcquire:
      endRequests && startRequests
        ? (endRequests.listings - startRequests.listings) / acquireCount
        : undefined,
    lostRacesPerAcquire: lostRaces.acquire / acquireCount,
    lostRacesPerRelease: lostRaces.release / acquireCount,
    inMedianMs: median(inMs),
    handoverMedianMs: median(handovers),
    handoverP95Ms: percentile(handovers, 95),
    maxFreeWhileWaitingMs,
    maxFreeBehindDeadMs: kills ? maxFreeBehindDeadMs : undefined,
    killed: kills ? killed : undefined,
    releaseMedianMs: median(releaseMs),
    violations,
    lineLeft,
    // Who held which lock when (ms since the run started), for looking into fairness.
    holds: holds
      .sort((a, b) => a.from - b.from)
      .map((h) => ({
        worker: h.worker,
        lock: h.lock,
        from: Math.round(h.from - started),
        to: Math.round(h.to - started),
      })),
    // Each acquire: who, which lock, when it started and ended, how many races it lost.
    timeline: acquires
      .sort((a, b) => a.from - b.from)
      .map((a) => ({
        ...a,
        from: Math.round(a.from - started),
        to: Math.round(a.to - started),
      })),
  };
}
