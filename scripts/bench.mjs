#!/usr/bin/env node
// @ts-check
// `npm run bench`: how the resource's time and memory grow with the lock repository's history
// and how it behaves under contention, measured through the real check, in and out over `git
// daemon` on 127.0.0.1, next to the plain-git floor measured in the same run. Prints a table and
// writes bench-results/bench-<time>.json. The scripts measured are the packaged payload in
// build/resource/ (`npm run package`: what the image installs at /opt/resource), or another
// folder of scripts with --assets (assets/ runs the unbundled build in dist/).
//
//   node scripts/bench.mjs [--quick] [--sizes 100,10000,100000] [--reps 9]
//                          [--workers 8] [--locks 2] [--rounds 3] [--hold-ms 200]
//                          [--retry-delay 1s] [--no-contention] [--no-kills] [--no-variants]
//                          [--no-ssh] [--no-http] [--keep] [--out FILE] [--assets build/resource]
//                          [--node PATH] [--reference DIR]
//
// The scripts run with the machine's node, or with --node (the image's major version, say); a
// payload gets a warm compile cache first, as the image does (node >= 22.1 reads it).
//
// The contention run is measured twice over git daemon: as it is, and with puts SIGKILLed while
// they wait (a lost worker: before each round a worker starts a second put, which is killed once
// it waits in line; --no-kills leaves that out). Both report the longest time a lock stayed free
// while a put that was not killed waited for one; the second also that time with no put killed
// meanwhile. Then three times more over git daemon
// (--no-variants leaves them out): at retry_delay 100ms, with twice the workers on twice the
// locks, and with half as many workers again holding each lock 5 s. With --reference (the
// reference's scripts: its image's /opt/resource), each of those four runs again with the
// reference's scripts, and the table sets them side by side. It runs
// once more over HTTP (git http-backend
// behind basic auth; --no-http leaves it out), counting TCP connections, and with --reference
// the reference's scripts run it there too, and over SSH: the transports a shared host serves.
//
// Without --no-http the operations are also measured over HTTPS with the server a 50 ms round trip
// away (a delaying TCP proxy), once as the resource runs (one connection per run) and once with git
// connecting for each command (an `http.*` entry in git_config makes it), alternating.
//
// With OpenSSH's sshd installed (and without --no-ssh), the operations and the contention run are
// also measured over SSH, once as the resource runs (one connection per run) and once with a
// connection per git command (a TMPDIR too long for the run's socket forces that), alternating.
//
// --quick takes 3 rounds per size instead of 9. Sizes take turns round by round, so a burst of
// load from elsewhere on the machine lands on every size alike; the figures to compare are the
// ratios within one run.
//
// The parts are in scripts/bench/: the lock repositories (repository.mjs), the servers
// (servers.mjs, on the tests' git daemon), the scripts' runner (scripts.mjs), the operations
// and their peak memory (operations.mjs), contention (contention.mjs, on the soak tests' checks),
// SSH (ssh.mjs), HTTPS at a distance (https.mjs), the contention scenarios and the reference's
// run of them (reference.mjs), and the table with the targets it checks (report.mjs, targets.json).
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { measureContention } from './bench/contention.mjs';
import {
  measureMemory,
  measureRound,
  MEMORY_PASSES,
  setupSize,
  summarise,
} from './bench/operations.mjs';
import { ASSETS, contention, opts, reps, REFERENCE, ROOT, sizes } from './bench/options.mjs';
import { run } from './bench/process.mjs';
import { measureReference, referenceScripts, scenarios } from './bench/reference.mjs';
import { printTable } from './bench/report.mjs';
import { prepareScripts, TIME } from './bench/scripts.mjs';
import { HTTP_LOGIN, SSHD, startDaemon, startHttp } from './bench/servers.mjs';
import { measureHttps } from './bench/https.mjs';
import { measureSsh } from './bench/ssh.mjs';

/**
 * The contention run over git daemon again at the fastest retry_delay and with twice the puts on
 * twice the locks (scenarios() past the first): what waiting costs the server as the setting and
 * the pool's size change.
 */
async function measureVariants(root, daemon) {
  const results = [];
  for (const [index, { label, settings }] of scenarios().slice(1).entries()) {
    process.stderr.write(`contention, ${label}…\n`);
    const name = `contention-variant-${index}.git`;
    results.push({ label, ...(await measureContention(root, daemon, { name, settings })) });
  }
  return results;
}

async function main() {
  if (!existsSync(join(ASSETS, 'out'))) {
    process.stderr.write(
      `no scripts in ${ASSETS}: run \`npm run package\` first (or pass --assets assets)\n`,
    );
    process.exit(1);
  }
  if (REFERENCE && !existsSync(join(REFERENCE, 'out'))) {
    process.stderr.write(
      `no scripts in ${REFERENCE}: --reference takes the folder of check, in and out\n`,
    );
    process.exit(1);
  }
  const scriptsNode = await prepareScripts();
  const loadBefore = loadavg();
  const root = await mkdtemp(join(tmpdir(), 'pool-bench-'));
  await mkdir(join(root, 'repos'));
  const daemon = await startDaemon(join(root, 'repos'));
  const results = [];
  let contentionResult;
  let ssh;
  let https;
  try {
    const prepared = [];
    for (const commits of sizes) {
      process.stderr.write(`building a lock repository of ${commits} commits…\n`);
      prepared.push(await setupSize(root, daemon, commits));
    }
    for (let rep = 0; rep < reps; rep++) {
      process.stderr.write(`round ${rep + 1} of ${reps}…\n`);
      await measureRound(root, daemon, prepared, rep);
    }
    if (existsSync(TIME)) {
      process.stderr.write(`peak memory, ${MEMORY_PASSES} passes…\n`);
      await measureMemory(root, prepared);
    }
    results.push(...prepared.map(summarise));
    if (!opts['no-contention']) {
      process.stderr.write(
        `contention: ${contention.workers} workers × ${contention.locks} locks × ${contention.rounds} rounds…\n`,
      );
      contentionResult = await measureContention(root, daemon);
      if (!opts['no-kills']) {
        process.stderr.write('contention with puts SIGKILLed while they wait…\n');
        contentionResult.kills = await measureContention(root, daemon, {
          name: 'contention-kills.git',
          kills: true,
        });
      }
      if (!opts['no-variants']) contentionResult.variants = await measureVariants(root, daemon);
      if (REFERENCE)
        contentionResult.reference = await measureReference(root, daemon, !opts['no-variants']);
    }
    if (!opts['no-contention'] && !opts['no-http']) {
      process.stderr.write('contention over HTTP (git http-backend, basic auth)…\n');
      const http = await startHttp(join(root, 'repos'));
      try {
        contentionResult.http = await measureContention(root, http, {
          name: 'contention-http.git',
          extra: HTTP_LOGIN,
        });
        if (REFERENCE) {
          process.stderr.write("contention over HTTP with the reference's scripts…\n");
          contentionResult.http.reference = await measureContention(root, http, {
            name: 'contention-http-reference.git',
            extra: HTTP_LOGIN,
            scripts: referenceScripts(),
          });
        }
      } finally {
        await http.stop();
      }
    }
    if (!opts['no-http']) https = await measureHttps(root);
    if (!opts['no-ssh'] && existsSync(SSHD)) ssh = await measureSsh(root);
  } finally {
    await daemon.stop();
    if (opts.keep) process.stderr.write(`kept ${root}\n`);
    else await rm(root, { recursive: true, force: true });
  }
  const load = { before: loadBefore, after: loadavg() };
  const table = `${printTable(results, contentionResult, ssh, https)}\n\nload average (1, 5, 15 min) before ${load.before
    .map((v) => v.toFixed(2))
    .join(
      ', ',
    )}; after ${load.after.map((v) => v.toFixed(2)).join(', ')} on ${cpus().length} cores\nscripts measured: ${ASSETS}, run by node ${scriptsNode}`;
  process.stdout.write(`${table}\n`);
  const report = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, node: process.version, scriptsNode, load },
    git: (await run('git', ['--version'])).stdout.trim(),
    options: { sizes, reps, contention, quick: opts.quick, assets: ASSETS },
    sizes: results,
    contention: contentionResult,
    ssh,
    https,
    table,
  };
  const file =
    opts.out ?? join(ROOT, 'bench-results', `bench-${report.date.replace(/[:.]/g, '-')}.json`);
  await mkdir(resolve(file, '..'), { recursive: true });
  await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
  process.stdout.write(`results written to ${file}\n`);
}

await main();
