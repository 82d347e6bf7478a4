// `pool report`: what a pool did over a window of time, from the branch history. Per lock the
// share of the window it was held, its claims and how long they waited (the `Waited:` trailer of
// each claiming commit); the current holders and the waiting line. As JSON, or as one HTML page
// that needs nothing but itself (inline CSS and SVG, no scripts, fonts or other requests).
import { formatMs } from '../../base/errors.js';
import { parseGoDuration } from '../../base/duration.js';
import { holderFromCommit } from '../../repo/claim-trailers.js';
import { formatInstant } from '../../repo/lock-holders.js';
import type { PoolHistory } from '../../repo/pool-history.js';
import { compareEntries, type WaitingEntry } from '../../lock/line-entry.js';
import { shortHolder, trailerValue } from './holder.js';

/** One stretch of time a lock was held, clipped to the window. */
export interface Hold {
  from: number;
  to: number;
  /** Claimed-By or the build URL (undefined when the claim lies before the history read). */
  by?: string;
  holder?: string;
  waitedMs?: number;
  /** Still held at the window's end. */
  open: boolean;
}

export interface LockFigures {
  name: string;
  claims: number;
  held_fraction: number;
  wait_p50_s: number | null;
  wait_p95_s: number | null;
  wait_max_s: number | null;
  /** Claims in the window whose commit has no `Waited:` trailer (made before it existed). */
  waits_unknown: number;
  /** The current holder, short (`team/pipeline/job #build`); only for a lock claimed now. */
  holder?: string;
  /** The current holder in full, as `pool status --json` says it: the build URL or operator. */
  claimed_by?: string;
  claimed_at?: string;
  /** The claim's lease, when it has one: its latest renewal's, else its claiming commit's (SPEC §10). */
  lease_expires?: string;
}

export interface WaitingFigures {
  /** Who waits (`team/pipeline/job #build`, an operator), when the put said. */
  who?: string;
  /** How many locks it waits for. */
  locks: number;
  since: string;
  waited_s: number;
}

export interface ReportFigures {
  pool: string;
  since: string;
  until: string;
  locks: LockFigures[];
  waiting: WaitingFigures[];
}

/** A lock claimed now, as the holder lookup found it. */
export interface CurrentHolder {
  name: string;
  by?: string;
  since?: Date;
  trailers: string;
  /** The claim's lease as renewed (see LockHolders.records); else the claiming commit's trailer. */
  leaseExpires?: Date;
}

export interface Report {
  figures: ReportFigures;
  holds: Map<string, Hold[]>;
  window: { since: number; until: number };
}

export function buildReport(input: {
  pool: string;
  history: PoolHistory;
  /** The locks at the tip, with the holders of the claimed ones. */
  locks: readonly { name: string; state: 'claimed' | 'unclaimed' }[];
  holders: readonly CurrentHolder[];
  line: readonly WaitingEntry[];
  since: number;
  until: number;
}): Report {
  const { history, since, until } = input;
  const names = new Set<string>([...history.start.keys(), ...input.locks.map((l) => l.name)]);
  for (const change of history.changes) names.add(change.name);

  const holds = new Map<string, Hold[]>();
  const waits = new Map<string, number[]>();
  const claims = new Map<string, number>();
  const unknown = new Map<string, number>();
  const current = new Map<string, Hold>();
  for (const [name, state] of history.start) {
    if (state === 'claimed') current.set(name, { from: since, to: until, open: true });
  }
  const close = (name: string, at: number) => {
    const hold = current.get(name);
    if (!hold) return;
    current.delete(name);
    const from = Math.max(hold.from, since);
    const to = Math.min(at, until);
    if (to > from) push(holds, name, { ...hold, from, to, open: false });
  };
  for (const change of history.changes) {
    if (change.state !== 'claimed') continue;
    if (change.change === 'D') {
      close(change.name, change.at);
      continue;
    }
    close(change.name, change.at);
    const { by } = holderFromCommit({
      trailers: change.trailers,
      body: change.body,
      author: change.author,
      authoredAt: new Date(change.at),
    });
    const waited = trailerValue(change.trailers, 'Waited');
    const parsed = waited === undefined ? undefined : parseGoDuration(waited);
    const waitedMs = parsed && 'ms' in parsed ? parsed.ms : undefined;
    current.set(change.name, {
      from: change.at,
      to: until,
      by,
      holder: shortHolder(by, change.trailers),
      waitedMs,
      open: true,
    });
    if (change.at >= since && change.at <= until) {
      claims.set(change.name, (claims.get(change.name) ?? 0) + 1);
      if (waitedMs === undefined) unknown.set(change.name, (unknown.get(change.name) ?? 0) + 1);
      else push(waits, change.name, waitedMs);
    }
  }
  for (const [name, hold] of current) {
    const from = Math.max(hold.from, since);
    if (until > from) push(holds, name, { ...hold, from, to: until, open: true });
  }

  const byName = new Map(input.holders.map((holder) => [holder.name, holder]));
  const span = Math.max(1, until - since);
  const locks = [...names].sort().map((name): LockFigures => {
    const held = (holds.get(name) ?? []).reduce((sum, hold) => sum + hold.to - hold.from, 0);
    const sorted = [...(waits.get(name) ?? [])].sort((a, b) => a - b);
    const figures: LockFigures = {
      name,
      claims: claims.get(name) ?? 0,
      held_fraction: round(held / span, 4),
      wait_p50_s: seconds(percentile(sorted, 0.5)),
      wait_p95_s: seconds(percentile(sorted, 0.95)),
      wait_max_s: seconds(sorted.at(-1)),
      waits_unknown: unknown.get(name) ?? 0,
    };
    const holder = byName.get(name);
    if (holder && input.locks.some((lock) => lock.name === name && lock.state === 'claimed')) {
      const by = holder.by ?? 'unknown';
      figures.holder = shortHolder(by, holder.trailers);
      figures.claimed_by = by;
      if (holder.since) figures.claimed_at = formatInstant(holder.since);
      const lease = holder.leaseExpires
        ? formatInstant(holder.leaseExpires)
        : trailerValue(holder.trailers, 'Lease-Expires');
      if (lease) figures.lease_expires = lease;
    }
    return figures;
  });
  const waiting = [...input.line].sort(compareEntries).map((entry) => ({
    ...(entry.who === undefined ? {} : { who: entry.who }),
    locks: entry.count ?? 1,
    since: formatInstant(new Date(entry.since)),
    waited_s: round(Math.max(0, until - entry.since) / 1000, 3),
  }));
  return {
    figures: {
      pool: input.pool,
      since: formatInstant(new Date(since)),
      until: formatInstant(new Date(until)),
      locks,
      waiting,
    },
    holds,
    window: { since, until },
  };
}

function push<T>(map: Map<string, T[]>, key: string, value: T): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

/** Nearest rank: the smallest value with at least `q` of the values at or below it. */
function percentile(sorted: readonly number[], q: number): number | undefined {
  if (sorted.length === 0) return undefined;
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)];
}

function seconds(ms: number | undefined): number | null {
  return ms === undefined ? null : round(ms / 1000, 3);
}

function round(value: number, digits: number): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

// ---- The page ---------------------------------------------------------------------------------

const WIDTH = 960;
const LABEL = 170;
const ROW = 30;
const AXIS = 28;

function escape(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!,
  );
}

/** One colour per job (the holder without its build number), the same on every row. */
function colour(holder: string | undefined): string {
  if (!holder) return 'hsl(0 0% 62%)';
  let hash = 2166136261;
  for (const char of holder.replace(/ #[^ ]*$/, '')) {
    hash = Math.imul(hash ^ char.charCodeAt(0), 16777619) >>> 0;
  }
  return `hsl(${hash % 360} 55% 46%)`;
}

function waitText(ms: number | undefined): string {
  return ms === undefined ? 'wait unknown' : `waited ${formatMs(ms)}`;
}

function secondsText(value: number | null): string {
  return value === null ? '–' : formatMs(Math.round(value * 1000));
}

function timeline(report: Report): string {
  const { since, until } = report.window;
  const plot = WIDTH - LABEL - 10;
  const x = (t: number) => LABEL + ((t - since) / Math.max(1, until - since)) * plot;
  const locks = report.figures.locks;
  const height = AXIS + locks.length * ROW + 6;
  const ticks = Array.from({ length: 7 }, (_, i) => since + ((until - since) * i) / 6);
  const parts = [
    `<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" role="img" aria-label="who held each lock when">`,
    ...ticks.map((t, index) => {
      const at = x(t).toFixed(1);
      const label = formatInstant(new Date(t)).replace('T', ' ').slice(5, 16);
      const anchor = index === ticks.length - 1 ? 'end' : 'middle';
      return `<line class="tick" x1="${at}" x2="${at}" y1="${AXIS - 6}" y2="${height}"/><text class="tick-label" x="${at}" y="${AXIS - 10}" text-anchor="${anchor}">${escape(label)}</text>`;
    }),
  ];
  locks.forEach((lock, index) => {
    const y = AXIS + index * ROW;
    parts.push(
      `<g class="lock-row" data-lock="${escape(lock.name)}">`,
      `<rect class="row-bg" x="0" y="${y}" width="${WIDTH}" height="${ROW}"/>`,
      `<text class="lock-label" x="8" y="${y + ROW / 2 + 4}">${escape(lock.name)}</text>`,
    );
    for (const hold of report.holds.get(lock.name) ?? []) {
      const left = x(hold.from);
      const width = Math.max(1.5, x(hold.to) - left);
      const who = hold.holder ?? 'claimed before the history read';
      const title = [
        who,
        hold.by && hold.by !== who ? hold.by : undefined,
        `${formatInstant(new Date(hold.from))} – ${hold.open ? 'now' : formatInstant(new Date(hold.to))} (${formatMs(hold.to - hold.from)})`,
        hold.holder ? waitText(hold.waitedMs) : undefined,
      ]
        .filter(Boolean)
        .join('\n');
      parts.push(
        `<rect class="hold${hold.open ? ' open' : ''}" data-holder="${escape(who)}" data-from="${formatInstant(new Date(hold.from))}" data-to="${formatInstant(new Date(hold.to))}" x="${left.toFixed(1)}" y="${y + 5}" width="${width.toFixed(1)}" height="${ROW - 10}" rx="3" fill="${colour(hold.holder)}"><title>${escape(title)}</title></rect>`,
      );
    }
    parts.push('</g>');
  });
  parts.push('</svg>');
  return parts.join('\n');
}

function table(
  className: string,
  head: readonly string[],
  rows: readonly (readonly string[])[],
  empty: string,
): string {
  if (rows.length === 0) return `<p class="empty ${className}">${escape(empty)}</p>`;
  const th = head.map((cell) => `<th>${escape(cell)}</th>`).join('');
  const body = rows
    .map((row) => `<tr>${row.map((cell) => `<td>${escape(cell)}</td>`).join('')}</tr>`)
    .join('\n');
  return `<table class="${className}"><thead><tr>${th}</tr></thead><tbody>\n${body}\n</tbody></table>`;
}

const STYLE = `
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #1d2330; background: #fff; }
h1 { font-size: 20px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 28px 0 8px; }
.window { color: #5a6273; margin: 0 0 16px; }
svg.timeline { display: block; max-width: 100%; height: auto; border: 1px solid #d8dce4; border-radius: 6px; }
.row-bg { fill: #fff; }
.lock-row:nth-child(even) .row-bg { fill: #f4f6f9; }
.lock-label { font-size: 13px; fill: #1d2330; }
.tick { stroke: #e3e6ec; }
.tick-label { font-size: 11px; fill: #6b7384; }
.hold { stroke: rgba(0,0,0,.25); stroke-width: .5; }
.hold.open { stroke: #1d2330; stroke-dasharray: 3 2; }
table { border-collapse: collapse; min-width: 480px; }
th, td { text-align: left; padding: 4px 12px 4px 0; border-bottom: 1px solid #e3e6ec; }
th { font-weight: 600; color: #5a6273; }
.empty, .legend { color: #5a6273; }
.legend { font-size: 12px; margin: 6px 0 0; }
`;

export function reportHtml(report: Report): string {
  const { figures } = report;
  const lockRows = figures.locks.map((lock) => [
    lock.name,
    `${(lock.held_fraction * 100).toFixed(1)}%`,
    String(lock.claims),
    secondsText(lock.wait_p50_s),
    secondsText(lock.wait_p95_s),
    secondsText(lock.wait_max_s),
    String(lock.waits_unknown),
  ]);
  const holderRows = figures.locks
    .filter((lock) => lock.holder !== undefined)
    .map((lock) => [
      lock.name,
      lock.holder!,
      lock.claimed_by ?? '',
      lock.claimed_at ?? '?',
      // Leases are recorded by the claim's Lease-Expires trailer; a claim without one has none.
      lock.lease_expires ?? 'none',
    ]);
  const waitingRows = figures.waiting.map((entry, index) => [
    String(index + 1),
    entry.who ?? '?',
    String(entry.locks),
    entry.since,
    formatMs(Math.round(entry.waited_s * 1000)),
  ]);
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>pool ${escape(figures.pool)}: report</title>
<style>${STYLE}</style>
</head>
<body>
<h1>pool <span class="pool-name">${escape(figures.pool)}</span></h1>
<p class="window">from <time class="since">${figures.since}</time> to <time class="until">${figures.until}</time> (${formatMs(report.window.until - report.window.since)})</p>
<h2>Who held each lock when</h2>
${timeline(report)}
<p class="legend">One bar per claim, coloured by job; a dashed bar is still held; times in UTC. Point at a bar for its build.</p>
<h2>Locks</h2>
${table('figures', ['lock', 'held', 'claims', 'wait median', 'wait p95', 'longest wait', 'wait unknown'], lockRows, 'This pool has no locks.')}
<h2>Current holders</h2>
${table('holders', ['lock', 'holder', 'build', 'since', 'lease expires'], holderRows, 'No lock is claimed.')}
<h2>Waiting line</h2>
${table('waiting', ['#', 'who', 'locks', 'since', 'waiting for'], waitingRows, 'Nobody is waiting.')}
</body>
</html>
`;
}
