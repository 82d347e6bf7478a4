// @ts-check
// The table `npm run bench` prints, and the targets (targets.json) it checks the run against.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { contention, REFERENCE } from './options.mjs';
import { TIME } from './scripts.mjs';
import { HTTPS_MODES } from './https.mjs';
import { SSH_MODES } from './ssh.mjs';

/** What a run must meet, as ratios within the run and absolute figures of the contention run. */
export const TARGETS = JSON.parse(readFileSync(join(import.meta.dirname, 'targets.json'), 'utf8'));

const s = (ms) => (ms / 1000).toFixed(3);
const ratio = (a, b) => (a / b).toFixed(2);
const pad = (text, width) => String(text).padEnd(width);

export function printTable(results, contentionResult, ssh, https) {
  const lines = [];
  const cols = results.map((r) => `${r.commits} commits`);
  const width = 16;
  lines.push(
    pad('median (s)', 26) + cols.map((c) => pad(c, width)).join('') + 'largest / smallest',
  );
  const rows = [
    ['acquire', 'acquire'],
    ['in', 'in'],
    ['check, cold', 'checkCold'],
    ['check, warm', 'checkWarm'],
    ['release', 'release'],
    ['acquire of 3 (count)', 'acquireSet'],
    ['in of 3', 'inSet'],
    ['release of 3', 'releaseSet'],
    ['plain git (floor)', 'floor'],
    ['plain git, protocol v0', 'floorV0'],
  ];
  const first = results[0];
  const last = results.at(-1);
  for (const [label, key] of rows) {
    lines.push(
      pad(label, 26) +
        results.map((r) => pad(s(r.medians[key]), width)).join('') +
        ratio(last.medians[key], first.medians[key]),
    );
  }
  lines.push(
    pad('acquire / floor', 26) +
      results.map((r) => pad(ratio(r.medians.acquire, r.medians.floor), width)).join(''),
  );
  lines.push(
    pad('acquire / v0 floor', 26) +
      results.map((r) => pad(ratio(r.medians.acquire, r.medians.floorV0), width)).join(''),
  );
  lines.push(
    pad('acquire of 3 / of 1', 26) +
      results.map((r) => pad(ratio(r.medians.acquireSet, r.medians.acquire), width)).join(''),
  );
  lines.push('');
  lines.push(pad('git connections per op', 26) + cols.map((c) => pad(c, width)).join(''));
  for (const [label, key] of rows.slice(0, 8)) {
    lines.push(
      pad(label, 26) + results.map((r) => pad(r.connections[key].toFixed(1), width)).join(''),
    );
  }
  if (first.peakMiB) {
    for (const [title, field] of [
      ['peak memory (MiB)', 'peakMiB'],
      ['peak memory, git (MiB)', 'gitPeakMiB'],
    ]) {
      lines.push('');
      lines.push(pad(title, 26) + cols.map((c) => pad(c, width)).join('') + 'largest / smallest');
      for (const [label, key] of rows.slice(0, 8)) {
        // 0: no such process (an operation that ran no git command).
        const ran = results.every((r) => r[field][key] > 0);
        lines.push(
          pad(label, 26) +
            results
              .map((r) => pad(r[field][key] > 0 ? r[field][key].toFixed(1) : '–', width))
              .join('') +
            (ran ? ratio(last[field][key], first[field][key]) : ''),
        );
      }
    }
    lines.push(
      '  (the largest single process of an operation: any, then its git commands alone; – none ran)',
    );
  } else {
    lines.push('');
    lines.push(`peak memory: not measured (${TIME} is missing: apt-get install time)`);
  }
  if (contentionResult) {
    const c = contentionResult;
    lines.push('');
    lines.push(
      `contention: ${c.workers} workers × ${c.locks} locks × ${c.rounds} rounds, hold ${c.holdMs} ms, retry_delay ${c.retryDelay}`,
    );
    lines.push(`  acquires            ${c.acquires} in ${s(c.elapsedMs)} s`);
    lines.push(`  throughput          ${c.throughput.toFixed(2)} acquires/s`);
    lines.push(
      `  acquire latency     p50 ${s(c.p50Ms)} s, p95 ${s(c.p95Ms)} s, max ${s(c.maxMs)} s`,
    );
    lines.push(`  git connections     ${connectionsLine(c)}`);
    lines.push(
      `  lost races          ${c.lostRacesPerAcquire.toFixed(1)} per acquire, ${c.lostRacesPerRelease.toFixed(1)} per release`,
    );
    lines.push(
      `  in, release         median ${s(c.inMedianMs)} s, ${s(c.releaseMedianMs)} s; hand-over median ${s(c.handoverMedianMs)} s, p95 ${s(c.handoverP95Ms)} s`,
    );
    lines.push(`  lock free           longest ${s(c.maxFreeWhileWaitingMs)} s while a put waited`);
    lines.push(`  mutual exclusion    ${c.violations} violations`);
    lines.push(`  waiting line        ${c.lineLeft} entries left behind`);
    const k = c.kills;
    if (k) {
      lines.push(
        `contention with puts SIGKILLed while waiting: ${k.killed.count} killed (${k.killed.leaked} after their claim landed, released by hand)`,
      );
      lines.push(
        `  lock free           longest ${s(k.maxFreeWhileWaitingMs)} s while a put that was not killed waited; ${s(k.maxFreeBehindDeadMs)} s with no put killed meanwhile`,
      );
      lines.push(
        `  git connections     ${k.connectionsPerAcquire.toFixed(1)} per acquire (${k.pushesPerAcquire.toFixed(1)} of them pushes; the killed puts' own included)`,
      );
      lines.push(
        `  acquire latency     p50 ${s(k.p50Ms)} s, p95 ${s(k.p95Ms)} s, max ${s(k.maxMs)} s; ${k.throughput.toFixed(2)} acquires/s`,
      );
      lines.push(`  mutual exclusion    ${k.violations} violations`);
      lines.push(`  waiting line        ${k.lineLeft} entries left behind`);
    }
  }
  for (const v of contentionResult?.variants ?? []) {
    lines.push('');
    lines.push(
      `contention, ${v.label} (${v.workers} workers × ${v.locks} locks × ${v.rounds} rounds, hold ${v.holdMs} ms, retry_delay ${v.retryDelay}):`,
      `  ${v.throughput.toFixed(2)} acquires/s, p50 ${s(v.p50Ms)} s, p95 ${s(v.p95Ms)} s; lost races ${v.lostRacesPerAcquire.toFixed(1)} per acquire, ${v.lostRacesPerRelease.toFixed(1)} per release`,
      `  git connections ${connectionsLine(v)}`,
      `  hand-over median ${s(v.handoverMedianMs)} s, p95 ${s(v.handoverP95Ms)} s; ${v.violations} violations, ${v.lineLeft} entries left behind`,
    );
  }
  if (contentionResult?.reference) lines.push('', ...referenceLines(contentionResult));
  const h = contentionResult?.http;
  if (h) {
    lines.push('');
    lines.push(
      `contention over HTTP (git http-backend, basic auth): ${h.throughput.toFixed(2)} acquires/s, p50 ${s(h.p50Ms)} s, p95 ${s(h.p95Ms)} s,`,
    );
    lines.push(
      `  ${h.connectionsPerAcquire.toFixed(1)} TCP connections per acquire, hand-over median ${s(h.handoverMedianMs)} s, p95 ${s(h.handoverP95Ms)} s, ${h.violations} violations`,
    );
    const requests = requestsLine(h);
    if (requests) lines.push(requests);
  }
  if (https) lines.push('', ...httpsLines(https));
  if (ssh) lines.push('', ...sshLines(ssh));
  const hosted = hostedPairs(contentionResult, ssh);
  if (hosted.length > 0) lines.push('', ...hostedLines(hosted));
  lines.push('');
  lines.push('targets (ratios within this run)');
  for (const [label, ok] of targets(results, contentionResult, ssh, https))
    lines.push(`  ${ok ? 'met    ' : 'NOT MET'}  ${label}`);
  return lines.join('\n');
}

/**
 * The operations over one transport in two modes, side by side: `title` first, then the medians,
 * their ratio and the connections per operation, counted as `unit`.
 */
function modeLines(title, operations, [first, second], unit) {
  const a = operations[first];
  const b = operations[second];
  const width = 16;
  const lines = [
    ...title,
    pad('median (s)', 26) +
      pad('per run', width) +
      pad('per command', width) +
      'per run / per command',
  ];
  const keys = [
    ['acquire', 'acquire'],
    ['in', 'in'],
    ['check, cold', 'checkCold'],
    ['check, warm', 'checkWarm'],
    ['release', 'release'],
  ];
  for (const [label, key] of keys)
    lines.push(
      pad(label, 26) +
        pad(s(a.medians[key]), width) +
        pad(s(b.medians[key]), width) +
        ratio(a.medians[key], b.medians[key]),
    );
  lines.push(pad(`${unit} per op`, 26) + pad('per run', width) + 'per command');
  for (const [label, key] of keys)
    lines.push(
      pad(label, 26) + pad(a.connections[key].toFixed(1), width) + b.connections[key].toFixed(1),
    );
  return lines;
}

function sshLines(ssh) {
  return transportLines(
    [
      `over SSH (OpenSSH sshd on 127.0.0.1, ${ssh.commits} commits): one connection per run, as the`,
      'resource runs, against one per git command (forced by a TMPDIR too long for its socket)',
    ],
    ssh,
    ['shared', 'perCommand'],
    { name: 'SSH', unit: 'SSH logins', modes: SSH_MODES },
  );
}

function httpsLines(https) {
  const lines = transportLines(
    [
      `over HTTPS with the server a ${https.rttMs} ms round trip away (${https.commits} commits): one`,
      'connection per run, as the resource runs, against one per git command (an http.* git_config)',
    ],
    https,
    ['relayed', 'perCommand'],
    { name: 'HTTPS', unit: 'TCP connections', modes: HTTPS_MODES },
  );
  if (!https.operations.proxiedRelayed) return lines;
  return [
    ...lines,
    '',
    ...modeLines(
      [
        'the same behind an HTTP proxy on the worker (https_proxy): a CONNECT tunnel per connection',
      ],
      https.operations,
      ['proxiedRelayed', 'proxiedPerCommand'],
      'TCP connections',
    ),
  ];
}

/** A transport's two modes side by side (modeLines), then its contention runs, one per mode. */
function transportLines(title, result, keys, { name, unit, modes }) {
  const lines = modeLines(title, result.operations, keys, unit);
  for (const [key, c] of Object.entries(result.contention ?? {})) {
    lines.push(
      `contention over ${name}, ${modes[key]}: ${c.throughput.toFixed(2)} acquires/s, p50 ${s(c.p50Ms)} s, p95 ${s(c.p95Ms)} s,`,
      `  hand-over median ${s(c.handoverMedianMs)} s, p95 ${s(c.handoverP95Ms)} s, ${c.connectionsPerAcquire.toFixed(1)} ${unit} per acquire, ${c.violations} violations`,
    );
    const requests = requestsLine(c);
    if (requests) lines.push(requests);
  }
  return lines;
}

/** Each contention run over git daemon with the resource's scripts and the reference's pairs. */
function referencePairs(c) {
  return c.reference.map((theirs, index) => ({
    ours: index === 0 ? c : c.variants[index - 1],
    theirs,
  }));
}

/** A scenario's name: puts × locks and retry_delay, and how long each holds its lock if not as usual. */
const scenarioName = (r) =>
  `${r.workers} × ${r.locks}, ${r.retryDelay}${r.holdMs === contention.holdMs ? '' : `, held ${r.holdMs / 1000}s`}`;

/** The figures set beside the reference's: title, width, figure, digits. */
/** @type {[string, number, (r: any) => number, number][]} */
const PAIR_COLUMNS = [
  ['acquires/s', 24, (r) => r.throughput, 2],
  ['p95 (s)', 24, (r) => r.p95Ms / 1000, 2],
  ['connections per acquire', 28, (r) => r.connectionsPerAcquire, 1],
];

const both = (a, b, f, digits = 2) => `${f(a).toFixed(digits)} / ${f(b).toFixed(digits)}`;

/** The header of a table of runs set beside the reference's, its first column `first`. */
function pairHeader(first, width) {
  return (
    pad(first, width) +
    PAIR_COLUMNS.map(([title, w]) => pad(title, w)).join('') +
    'hand-over median, p95 (s)'
  );
}

/** One run beside the reference's: ours / theirs, and their ratio. */
function pairRow(label, width, ours, theirs) {
  const cells = PAIR_COLUMNS.map(([, w, f, digits]) =>
    pad(`${both(ours, theirs, f, digits)} (${ratio(f(ours), f(theirs))}×)`, w),
  );
  const median = both(ours, theirs, (r) => r.handoverMedianMs / 1000);
  const p95 = both(ours, theirs, (r) => r.handoverP95Ms / 1000);
  return pad(label, width) + cells.join('') + `${median}, ${p95}`;
}

/** The contention runs side by side with the reference's: ours / theirs, and their ratio. */
function referenceLines(c) {
  const lines = [
    `against the reference's scripts (${REFERENCE}), over git daemon in this run: resource / reference`,
    pairHeader('puts × locks, retry_delay', 26),
  ];
  for (const { ours, theirs } of referencePairs(c))
    lines.push(pairRow(scenarioName(ours), 26, ours, theirs));
  for (const { theirs } of referencePairs(c))
    if (theirs.violations > 0)
      lines.push(
        `  the reference, ${scenarioName(theirs)}: ${theirs.violations} mutual-exclusion violations`,
      );
  return lines;
}

/**
 * The contention runs over the transports a shared host serves (HTTP, SSH) that the reference's
 * scripts ran too: each with its unit (what the server counted) and both runs.
 */
function hostedPairs(c, ssh) {
  const pairs = [];
  if (c?.http?.reference)
    pairs.push({ name: 'HTTP', unit: 'TCP connections', ours: c.http, theirs: c.http.reference });
  if (ssh?.reference && ssh.contention?.shared)
    pairs.push({
      name: 'SSH',
      unit: 'SSH logins',
      ours: ssh.contention.shared,
      theirs: ssh.reference,
    });
  return pairs;
}

function hostedLines(pairs) {
  const lines = [
    `against the reference's scripts over HTTP and SSH, ${scenarioName(pairs[0].ours)}: resource / reference`,
    pairHeader('over', 8),
  ];
  for (const { name, unit, ours, theirs } of pairs) {
    lines.push(pairRow(name, 8, ours, theirs));
    lines.push(`        (connections: ${unit}; the reference, ${theirs.violations} violations)`);
  }
  return lines;
}

/** A git daemon contention run's connections per acquire, and which kinds they were. */
function connectionsLine(c) {
  const looks =
    c.looksPerAcquire === undefined ? '' : `, ${c.looksPerAcquire.toFixed(1)} looks without git`;
  return `${c.connectionsPerAcquire.toFixed(1)} per acquire (${c.pushesPerAcquire.toFixed(1)} of them pushes${looks})`;
}

/** What an HTTP(S) server answered per acquire under contention, where it was counted. */
function requestsLine(c) {
  if (c.requestsPerAcquire === undefined) return undefined;
  return `  ${c.requestsPerAcquire.toFixed(1)} HTTP requests per acquire, ${c.listingsPerAcquire.toFixed(1)} of them ls-refs`;
}

export function targets(results, c, ssh, https) {
  const { growth, floor, contention: k } = TARGETS;
  const first = results[0];
  const last = results.at(-1);
  const list = [];
  for (const [label, key] of Object.entries(growth.operations)) {
    const r = last.medians[key] / first.medians[key];
    list.push([
      `${label} at ${last.commits} commits within ${growth.maxRatio}× of ${first.commits}: ${r.toFixed(2)}×`,
      r <= growth.maxRatio,
    ]);
  }
  for (const r of results) {
    for (const [label, { key, maxRatio }] of Object.entries(floor.floors)) {
      const ratio = r.medians.acquire / r.medians[key];
      list.push([
        `acquire within ${maxRatio}× of ${label} at ${r.commits} commits: ${ratio.toFixed(2)}×`,
        ratio <= maxRatio,
      ]);
    }
    for (const [label, key] of Object.entries(floor.reads)) {
      const ratio = r.medians[key] / r.medians.floor;
      list.push([
        `${label} within ${floor.maxReadRatio}× of plain git's claim at ${r.commits} commits: ${ratio.toFixed(2)}×`,
        ratio <= floor.maxReadRatio,
      ]);
    }
  }
  for (const r of results) {
    const ratio = r.medians.acquireSet / r.medians.acquire;
    list.push([
      `acquire of 3 locks within ${TARGETS.several.maxRatio}× of acquire of 1 at ${r.commits} commits: ${ratio.toFixed(2)}×`,
      ratio <= TARGETS.several.maxRatio,
    ]);
  }
  if (c) {
    list.push([
      `throughput at least ${k.minThroughput} acquires/s: ${c.throughput.toFixed(2)}`,
      c.throughput >= k.minThroughput,
    ]);
    list.push([
      `p95 acquire latency at most ${k.maxP95Ms / 1000} s: ${s(c.p95Ms)} s`,
      c.p95Ms <= k.maxP95Ms,
    ]);
    list.push([
      `at most ${k.maxConnectionsPerAcquire} git connections per acquire: ${c.connectionsPerAcquire.toFixed(1)}`,
      c.connectionsPerAcquire <= k.maxConnectionsPerAcquire,
    ]);
    list.push([`no mutual-exclusion violation: ${c.violations}`, c.violations <= k.maxViolations]);
    list.push([`no waiting-line entry left behind: ${c.lineLeft}`, c.lineLeft <= k.maxLineLeft]);
    if (c.kills)
      list.push([
        `no mutual-exclusion violation with puts killed: ${c.kills.violations}`,
        c.kills.violations <= k.maxViolations,
      ]);
    for (const v of c.variants ?? []) {
      list.push([
        `no mutual-exclusion violation, ${v.label}: ${v.violations}`,
        v.violations <= k.maxViolations,
      ]);
      list.push([
        `no waiting-line entry left behind, ${v.label}: ${v.lineLeft}`,
        v.lineLeft <= k.maxLineLeft,
      ]);
    }
  }
  const versus = TARGETS.reference;
  for (const { ours, theirs } of c?.reference ? referencePairs(c) : []) {
    const connections = ours.connectionsPerAcquire / theirs.connectionsPerAcquire;
    list.push([
      `at most ${versus.maxConnectionsRatio}× the reference's git connections per acquire, ${scenarioName(ours)}: ${connections.toFixed(2)}×`,
      connections <= versus.maxConnectionsRatio,
    ]);
    // Locks held for long bound both to about as many acquires a second: the same, to the hold.
    if (ours.holdMs > versus.throughputUpToHoldMs) continue;
    const throughput = ours.throughput / theirs.throughput;
    list.push([
      `at least ${versus.minThroughputRatio}× the reference's throughput, ${scenarioName(ours)}: ${throughput.toFixed(2)}×`,
      throughput >= versus.minThroughputRatio,
    ]);
  }
  for (const { name, unit, ours, theirs } of hostedPairs(c, ssh)) {
    const connections = ours.connectionsPerAcquire / theirs.connectionsPerAcquire;
    list.push([
      `at most ${versus.maxConnectionsRatio}× the reference's ${unit} per acquire over ${name}, ${scenarioName(ours)}: ${connections.toFixed(2)}×`,
      connections <= versus.maxConnectionsRatio,
    ]);
  }
  if (c?.http) {
    list.push([
      `no mutual-exclusion violation over HTTP: ${c.http.violations}`,
      c.http.violations <= k.maxViolations,
    ]);
    list.push([
      `at most ${k.maxConnectionsPerAcquireKept} TCP connections per acquire over HTTP: ${c.http.connectionsPerAcquire.toFixed(1)}`,
      c.http.connectionsPerAcquire <= k.maxConnectionsPerAcquireKept,
    ]);
  }
  for (const [key, sc] of Object.entries(ssh?.contention ?? {}))
    list.push([
      `no mutual-exclusion violation over SSH, ${SSH_MODES[key]}: ${sc.violations}`,
      sc.violations <= k.maxViolations,
    ]);
  const shared = ssh?.contention?.shared;
  if (shared)
    list.push([
      `at most ${k.maxConnectionsPerAcquireKept} SSH logins per acquire, ${SSH_MODES.shared}: ${shared.connectionsPerAcquire.toFixed(1)}`,
      shared.connectionsPerAcquire <= k.maxConnectionsPerAcquireKept,
    ]);
  for (const [key, hc] of Object.entries(https?.contention ?? {}))
    list.push([
      `no mutual-exclusion violation over HTTPS, ${HTTPS_MODES[key]}: ${hc.violations}`,
      hc.violations <= k.maxViolations,
    ]);
  const pairs = [
    ['relayed', 'perCommand', 'a connection'],
    ['proxiedRelayed', 'proxiedPerCommand', 'a tunnel'],
  ];
  for (const [ours, theirs, each] of pairs) {
    const a = https?.operations[ours];
    const b = https?.operations[theirs];
    if (!a || !b) continue;
    const ratio = a.medians.acquire / b.medians.acquire;
    const where = ours === 'relayed' ? '' : ', behind a proxy';
    list.push([
      `over HTTPS at a ${https.rttMs} ms round trip${where}, acquire within ${TARGETS.distance.maxRatio}× of one with ${each} per git command: ${ratio.toFixed(2)}×`,
      ratio <= TARGETS.distance.maxRatio,
    ]);
  }
  return list;
}
