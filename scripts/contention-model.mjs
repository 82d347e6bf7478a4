#!/usr/bin/env node
// What the bench's contention run (N workers × M locks × R rounds of acquire → hold → in →
// release) can reach under each order of hand-over, with the step costs a bench run measured.
// It answers one question: which contention targets a faster or cheaper hand-over can meet, and
// which need a different order of waiters. Nothing here runs git; `npm run bench` measures.
//
//   node scripts/contention-model.mjs [--from bench-results/bench-<time>.json] [--runs 3000]
//                                     [--scale 1]
//
// --scale multiplies every measured git step (claim, in, release and the gaps) to ask what a
// faster resource would reach: --scale 0.83, say, puts an acquire at the plain-git floor of a run
// where acquire / floor was 1.21.
//
// The model, per lock: a claim ends, the holder holds, runs `in`, then releases; the next claim
// ends a "gap" after that release started. The orders:
//   measured      the next holder is the releaser, asking again at once, as often as the bench
//                 saw when it was still asking; else a random waiter. Gaps: the bench's own.
//   any waiter    a random waiter, never favouring the releaser. Gaps: the bench's own.
//   first come    the longest waiter. It must notice the release by polling, so its gap is the
//                 release, a uniform part of retry_delay, and its own claim (the bench's
//                 uncontended acquire).
//   two longest   whichever of the two longest waiters polls first; the same gap, but with the
//                 earlier of two polls. Neither ordered variant counts what keeping an order
//                 would cost (telling waiters apart needs shared state, so writes to the remote).
//   line          the waiting line the resource keeps (src/waiting-line.ts): first come, and the
//                 puts next in line poll five times per retry_delay, so the gap's uniform part
//                 is a fifth of it. Its cost (an entry per waiting put) is in the bench's figures
//                 for runs of the resource that keeps it; the model leaves it out as above.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const ROOT = resolve(import.meta.dirname, '..');
const { values: opts } = parseArgs({
  options: {
    from: { type: 'string' },
    runs: { type: 'string', default: '3000' },
    scale: { type: 'string', default: '1' },
  },
});

function fail(message) {
  console.error(`contention-model: ${message}`);
  process.exit(1);
}

function newestBench() {
  const folder = join(ROOT, 'bench-results');
  const files = (existsSync(folder) ? readdirSync(folder) : [])
    .filter((f) => f.startsWith('bench-') && f.endsWith('.json'))
    .sort();
  if (files.length === 0) fail('no bench results: run `npm run bench` or pass --from');
  return join(folder, files.at(-1));
}

const file = opts.from ?? newestBench();
let bench;
try {
  bench = JSON.parse(readFileSync(file, 'utf8'));
} catch (error) {
  fail(`cannot read ${file}: ${error.message}`);
}
const c = bench.contention;
if (!c?.holds) fail(`${file} has no contention run with its holds`);

const scale = Number(opts.scale);
if (!(scale > 0)) fail(`--scale ${opts.scale}: give a positive number`);
const sec = (ms) => ms / 1000;
/** A measured git step, in seconds, times --scale. */
const step = (ms) => (scale * ms) / 1000;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const hold = sec(c.holdMs);
const inStep = step(c.inMedianMs);
const release = step(c.releaseMedianMs);
const claim = step(bench.sizes[0].medians.acquire);
const UNIT_MS = { ms: 1, s: 1000, m: 60_000 };
const [, amount, unit] = /^([\d.]+)(ms|s|m)$/.exec(c.retryDelay) ?? [];
if (!unit) fail(`retry_delay ${c.retryDelay}: give it in ms, s or m`);
const retryDelay = sec(Number(amount) * UNIT_MS[unit]);

// From the bench's holds: each gap (a release starting → the next claim of that lock ending),
// and how often the releaser won the lock back while it still had rounds to go.
const holds = [...c.holds].sort((a, b) => a.from - b.from);
const gaps = [];
let releaserWon = 0;
let releaserAsked = 0;
const byLock = new Map();
for (const h of holds) byLock.set(h.lock, [...(byLock.get(h.lock) ?? []), h]);
for (const list of byLock.values()) {
  for (let i = 1; i < list.length; i++) {
    const [before, after] = [list[i - 1], list[i]];
    gaps.push(step(after.from - before.to));
    if (holds.some((h) => h.worker === before.worker && h.from > before.from)) {
      releaserAsked++;
      if (after.worker === before.worker) releaserWon++;
    }
  }
}
const releaserShare = releaserWon / releaserAsked;
const pick = (xs) => xs[Math.floor(Math.random() * xs.length)];

const ORDERS = {
  measured: { next: (waiting, releaser) => preferReleaser(waiting, releaser, releaserShare) },
  'any waiter': { next: (waiting) => Math.floor(Math.random() * waiting.length) },
  'first come': {
    next: () => 0,
    gap: () => release + Math.random() * retryDelay + claim,
  },
  'two longest': {
    next: (waiting) => (waiting.length > 1 && Math.random() < 0.5 ? 1 : 0),
    gap: () => release + Math.min(Math.random(), Math.random()) * retryDelay + claim,
  },
  line: {
    next: () => 0,
    gap: () => release + (Math.random() * retryDelay) / 5 + claim,
  },
};

function preferReleaser(waiting, releaser, share) {
  const own = waiting.findIndex((w) => w.worker === releaser);
  if (own >= 0 && Math.random() < share) return own;
  const others = waiting.map((_, i) => i).filter((i) => i !== own);
  return others.length > 0 ? pick(others) : own;
}

/** One contention run; returns its p95 acquire latency and throughput. */
function simulate(order) {
  const gap = order.gap ?? (() => pick(gaps));
  const waiting = Array.from({ length: c.workers }, (_, worker) => ({ worker, since: 0 }));
  const rounds = new Array(c.workers).fill(0);
  const latencies = [];
  const releases = []; // { at, lock, worker }: when each holder starts to release
  let end = 0;
  const give = (lock, at, releaser) => {
    const [w] = waiting.splice(order.next(waiting, releaser), 1);
    latencies.push(at - w.since);
    releases.push({ at: at + hold + inStep, lock, worker: w.worker });
    releases.sort((a, b) => a.at - b.at);
  };
  for (let lock = 0; lock < c.locks && waiting.length > 0; lock++) give(lock, claim);
  const idle = [];
  while (releases.length > 0) {
    const r = releases.shift();
    end = Math.max(end, r.at + release);
    if (++rounds[r.worker] < c.rounds) waiting.push({ worker: r.worker, since: r.at + release });
    if (waiting.length > 0) give(r.lock, r.at + gap(), r.worker);
    else idle.push(r);
  }
  for (const r of idle) end = Math.max(end, r.at + release);
  latencies.sort((a, b) => a - b);
  return {
    p95: latencies[Math.ceil(0.95 * latencies.length) - 1],
    throughput: latencies.length / end,
  };
}

const runs = Number(opts.runs);
console.log(`model of ${file}`);
console.log(
  `  ${c.workers} workers × ${c.locks} locks × ${c.rounds} rounds; hold ${hold} s, in ${inStep.toFixed(3)} s, ` +
    `release ${release.toFixed(3)} s, claim ${claim.toFixed(3)} s, retry_delay ${retryDelay} s` +
    (scale === 1 ? '' : ` (git steps × ${scale})`),
);
console.log(
  `  measured gaps: median ${median(gaps).toFixed(3)} s over ${gaps.length}; the releaser won ` +
    `${releaserWon} of ${releaserAsked} hand-overs it asked for`,
);
console.log(
  `  bench itself: p95 ${sec(c.p95Ms).toFixed(1)} s, ${c.throughput.toFixed(2)} acquires/s`,
);
console.log('');
console.log('order          p95 median   p95 10th–90th   runs with p95 ≤ 6 s   acquires/s median');
for (const [name, order] of Object.entries(ORDERS)) {
  const results = Array.from({ length: runs }, () => simulate(order));
  const p95s = results.map((r) => r.p95).sort((a, b) => a - b);
  const at = (q) => p95s[Math.floor(q * (runs - 1))].toFixed(1);
  const met = results.filter((r) => r.p95 <= 6).length / runs;
  console.log(
    `${name.padEnd(15)}${`${at(0.5)} s`.padEnd(13)}${`${at(0.1)}–${at(0.9)} s`.padEnd(16)}` +
      `${`${Math.round(met * 100)}%`.padEnd(22)}${median(results.map((r) => r.throughput)).toFixed(2)}`,
  );
}
