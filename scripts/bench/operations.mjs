// @ts-check
// The operations (acquire, in, release, a cold and a warm check, and an acquire, get and release
// of three locks at once) per history size, timed in rounds next to the plain-git floor, with
// their git connections and peak memory.
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { plainGitClaim } from './floor.mjs';
import { reps } from './options.mjs';
import { run } from './process.mjs';
import { buildRepository } from './repository.mjs';
import { lockName, script, source, stepFolder, TIME } from './scripts.mjs';
import { median } from './stats.mjs';

/**
 * Builds one size's repository and primes its warm check cache. `name`, `sourceExtra` (the SSH
 * key), `scratchRoot` (where its TMPDIRs go) and `env` (more variables for its scripts: a proxy)
 * serve the SSH and HTTPS measurements.
 */
export async function setupSize(
  root,
  daemon,
  commits,
  { name = `locks-${commits}.git`, sourceExtra = {}, scratchRoot = root, env = {} } = {},
) {
  const building = performance.now();
  const actual = await buildRepository(join(root, 'repos', name), commits);
  const buildMs = performance.now() - building;
  const size = {
    commits: actual,
    buildMs,
    url: daemon.url(name),
    sourceExtra,
    scratchRoot,
    env,
    // Concourse reuses the check container between checks: the warm cache lives in its TMPDIR.
    warmTmp: await mkdtemp(join(scratchRoot, 'warm-')),
    samples: {
      acquire: [],
      in: [],
      release: [],
      checkCold: [],
      checkWarm: [],
      acquireSet: [],
      inSet: [],
      releaseSet: [],
      floor: [],
      floorV0: [],
    },
    perOp: {
      acquire: 0,
      in: 0,
      release: 0,
      checkCold: 0,
      checkWarm: 0,
      acquireSet: 0,
      inSet: 0,
      releaseSet: 0,
    },
  };
  const primed = await script(
    'check',
    { source: sourceOf(size) },
    { tmp: size.warmTmp, env: size.env },
  );
  size.lastVersion = primed.result.at(-1);
  return size;
}

/**
 * The five measured operations, in order, as [script, request, options] for a size and the
 * round's scratch folders `r` (tmp, src, dest, cold). Each may read what the ones before it
 * returned, kept in `r` under its key.
 */
/** @type {Record<string, (size: any, r: any) => Promise<[string, unknown, { args?: string[], tmp?: string }]>>} */
export const OPERATIONS = {
  acquire: async (size, r) => [
    'out',
    { source: sourceOf(size), params: { acquire: true } },
    { args: [r.src], tmp: r.tmp },
  ],
  in: async (size, r) => [
    'in',
    { source: sourceOf(size), version: r.acquire.result.version },
    { args: [r.dest], tmp: r.tmp },
  ],
  release: async (size, r) => {
    r.step = await stepFolder(r.root, lockName(r.acquire.result));
    return [
      'out',
      { source: sourceOf(size), params: { release: 'lock' } },
      { args: [r.step], tmp: r.tmp },
    ];
  },
  checkCold: async (size, r) => ['check', { source: sourceOf(size) }, { tmp: r.cold }],
  // Concourse reuses the check container between checks: the warm cache lives in its TMPDIR.
  checkWarm: async (size) => [
    'check',
    { source: sourceOf(size), version: size.lastVersion },
    { tmp: size.warmTmp },
  ],
  // Three locks at once (count), their get into a step folder, and the release of all three:
  // after the checks, which look at the single lock's cycle.
  acquireSet: async (size, r) => [
    'out',
    { source: sourceOf(size), params: { acquire: true, count: SET_COUNT } },
    { args: [r.src], tmp: r.tmp },
  ],
  inSet: async (size, r) => [
    'in',
    { source: sourceOf(size), version: r.acquireSet.result.version },
    { args: [join(r.setBuild, 'set')], tmp: r.tmp },
  ],
  releaseSet: async (size, r) => [
    'out',
    { source: sourceOf(size), params: { release: 'set' } },
    { args: [r.setBuild], tmp: r.tmp },
  ],
};

/** How many locks the set operations take at once. */
export const SET_COUNT = 3;

/** The source for what is measured: a size's repository, over git daemon or SSH. */
const sourceOf = (size) => source(size.url, '1s', size.sourceExtra);

/** Scratch folders for one size's run of the operations, all below one folder. */
export async function scratch(root) {
  const dir = await mkdtemp(join(root, 'run-'));
  const r = { root: dir };
  for (const name of ['tmp', 'src', 'dest', 'cold', 'setBuild']) {
    r[name] = join(dir, name);
    await mkdir(r[name]);
  }
  return r;
}

/**
 * One round of every measurement. Each step runs on every size before the next step, in a
 * shuffled order, so that load from elsewhere on the machine lands on the sizes alike.
 */
export async function measureRound(root, daemon, sizes, rep, { floors = true } = {}) {
  const each = async (work) => {
    const order = [...sizes].sort(() => Math.random() - 0.5);
    for (const size of order) await work(size);
  };
  if (floors) await measureFloors(root, sizes, rep, each);
  const round = new Map(
    await Promise.all(sizes.map(async (size) => [size, await scratch(size.scratchRoot ?? root)])),
  );
  for (const [key, operation] of Object.entries(OPERATIONS)) {
    await each(async (size) => {
      const r = round.get(size);
      const start = daemon.connections();
      const [name, request, options] = await operation(size, r);
      r[key] = await script(name, request, { ...options, env: size.env });
      size.perOp[key] += daemon.connections() - start;
      size.samples[key].push(r[key].ms);
    });
  }
  for (const [size, r] of round) {
    // Answers, not just timings: the warm check ends with this round's release, the cold one is it.
    const { checkWarm: warm, checkCold: cold, release: released } = r;
    if (warm.result.at(-1)?.ref !== released.result.version.ref)
      throw new Error(`warm check missed the release: ${JSON.stringify(warm.result)}`);
    if (cold.result.length !== 1 || cold.result[0].ref !== released.result.version.ref)
      throw new Error(
        `cold check did not return the latest commit: ${JSON.stringify(cold.result)}`,
      );
    size.lastVersion = warm.result.at(-1);
    await rm(r.root, { recursive: true, force: true });
  }
}

async function measureFloors(root, sizes, rep, each) {
  await each(async (size) =>
    size.samples.floor.push(
      await plainGitClaim(size.url, join(root, `floor-${size.commits}-${rep}`)),
    ),
  );
  await each(async (size) =>
    size.samples.floorV0.push(
      await plainGitClaim(size.url, join(root, `floor-v0-${size.commits}-${rep}`), [
        '-c',
        'protocol.version=0',
      ]),
    ),
  );
}

export function summarise(size) {
  return {
    commits: size.commits,
    buildMs: size.buildMs,
    medians: Object.fromEntries(Object.entries(size.samples).map(([k, v]) => [k, median(v)])),
    samples: size.samples,
    connections: Object.fromEntries(
      Object.entries(size.perOp).map(([key, count]) => [key, count / reps]),
    ),
    peakMiB: size.peakMiB,
    gitPeakMiB: size.gitPeakMiB,
  };
}

// ---------------------------------------------------------------------------------------------
// Peak memory: each operation once per pass under GNU time, outside the timed rounds (so the
// timings never include time's own start). Two figures, in MiB: the largest single process of
// the operation (the node script itself or a git command it ran), and the largest git command
// alone, which the script's own size would otherwise hide. For the second, a `git` first on the
// script's PATH runs the real one under GNU time too. The resource runs git by its name and
// passes it only a few variables of its own (PATH among them), so the report file's path is
// written into that `git` rather than passed in the environment.

export const MEMORY_PASSES = 3;

export async function measureMemory(root, sizes) {
  const realGit = (await run('sh', ['-c', 'command -v git'])).stdout.trim();
  const empty = () => Object.fromEntries(Object.keys(OPERATIONS).map((key) => [key, []]));
  const peaks = new Map(sizes.map((size) => [size, { any: empty(), git: empty() }]));
  const kib = (text) =>
    text
      .split('\n')
      .filter((line) => /^\d+$/.test(line))
      .map(Number);
  const largest = async (file) => Math.max(...kib(await readFile(file, 'utf8'))) / 1024;
  for (let pass = 0; pass < MEMORY_PASSES; pass++) {
    for (const size of sizes) {
      const r = await scratch(root);
      for (const [key, operation] of Object.entries(OPERATIONS)) {
        const peakFile = join(r.root, `${key}.peak`);
        const gitPeaks = join(r.root, `${key}.git-peaks`);
        const shim = join(r.root, `${key}-bin`);
        await mkdir(shim);
        await writeFile(
          join(shim, 'git'),
          `#!/bin/sh\nexec ${TIME} -a -f %M -o '${gitPeaks}' '${realGit}' "$@"\n`,
          { mode: 0o755 },
        );
        const [name, request, options] = await operation(size, r);
        r[key] = await script(name, request, { ...options, peakFile, pathFirst: shim });
        peaks.get(size).any[key].push(await largest(peakFile));
        // No file: the operation ran no git command (`in` over git:// reads what it fetched).
        const ranGit = await stat(gitPeaks).then(
          () => true,
          () => false,
        );
        peaks.get(size).git[key].push(ranGit ? await largest(gitPeaks) : 0);
      }
      size.lastVersion = r.checkWarm.result.at(-1);
      await rm(r.root, { recursive: true, force: true });
    }
  }
  const medians = (byKey) =>
    Object.fromEntries(Object.entries(byKey).map(([key, values]) => [key, median(values)]));
  for (const [size, { any, git }] of peaks) {
    size.peakMiB = medians(any);
    size.gitPeakMiB = medians(git);
  }
}
