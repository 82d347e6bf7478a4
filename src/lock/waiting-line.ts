// The waiting line's timings: how often a put in line polls, by its place and what it has seen
// the line do, and when a put ahead that stopped showing itself counts as gone. Pure; the entries
// themselves (their refs and order) are line-entry.ts's, LineMember acts on both.
import type { HoldHistory } from './pool-state.js';
import type { WaitingEntry } from './line-entry.js';

/**
 * The fastest any put polls, whatever its retry_delay (`retry_delay: 0` included): each poll is a
 * connection to the git server, and a poll sooner than this finds nothing new.
 */
export const POLL_FLOOR_MS = 100;

/** The wait between polls for a put with this retry_delay: retry_delay, never under the floor. */
export function pollMs(retryDelayMs: number): number {
  return Math.max(POLL_FLOOR_MS, retryDelayMs);
}

/**
 * How often a put near the front of the line polls. Wherever else it stands a put waits out
 * retry_delay between polls; at the front, a release noticed a whole retry_delay late would leave
 * the lock free all that time, since the puts behind no longer take it. A fifth of retry_delay,
 * never under POLL_FLOOR_MS: the puts that free locks or the next hand-overs can reach
 * (FRONT_SPARE) poll this fast, and each such poll is the fetch itself (one connection, as an
 * ls-remote is), so a release costs them no second round trip. Only while the pool is busy: where
 * the tip has not moved for ten retry_delays (line-member.ts, QUIET_AFTER_DELAYS), locks are held
 * for long and the front polls at retry_delay again. Measured with `npm run bench` (README).
 */
export function frontPollMs(retryDelayMs: number): number {
  return Math.max(POLL_FLOOR_MS, Math.min(retryDelayMs, Math.round(retryDelayMs / 5)));
}

/**
 * How long after the branch last moved a put near the front that reads the tip on its kept
 * session (git://, line-member.ts) polls every POLL_FLOOR_MS rather than frontPollMs, whatever
 * its retry_delay: such a poll that finds the branch where it was is an `ls-refs` on a connection
 * open already, no connection and no process on the server, and a release is then seen within
 * 100 ms. Past this, in a pool whose locks are held for longer, it polls at frontPollMs again.
 */
export const WATCHED_BUSY_MS = 10_000;

/**
 * When enough releases of the `claimed` locks to serve a put become plausible (`needed`: how many
 * locks must be released before it is served), from what the branch's recent commits tell
 * (HoldHistory): each lock's claim plus the shortest hold seen, less one front poll, so that the
 * fast polls have begun by then; the `needed`-th earliest of those. A claimed lock whose claim lies
 * beyond the commits read may be released at any time. Undefined when a release is plausible at
 * any time: no hold seen yet. A put near the front polls at retry_delay until then (a release
 * sooner than any seen is noticed as the reference would notice it), and at frontPollMs from then
 * on: in a pool whose locks are held for minutes, the front no longer polls five times per
 * retry_delay through every hold, and the put behind the next to be served polls fast only once a
 * second release is plausible too.
 *
 * Commit times are kept to the second, and need no second's margin: a hold read as ⌊release⌋ −
 * ⌊claim⌋ is its length plus its claim's fraction of a second less its release's, while the
 * current claim adds its own fraction to its ⌊claim⌋. A release comes before ⌊claim⌋ plus the
 * shortest hold seen only where its hold is shorter than any seen, or its claim came earlier in
 * its second than the shortest one's less that one's release: rarely, as the shortest of several
 * is one with a small such difference (under one hold in a hundred where holds vary by a second:
 * scripts/hold-margin-model.mjs).
 */
export function releasePlausibleAt(
  history: HoldHistory,
  claimed: readonly string[],
  retryDelayMs: number,
  needed = 1,
): number | undefined {
  if (history.holds.length === 0 || claimed.length === 0) return undefined;
  const shortest = Math.min(...history.holds);
  const margin = frontPollMs(retryDelayMs);
  const times = claimed
    .map((name) => (history.claimedAt.get(name) ?? -Infinity) + shortest - margin)
    .sort((a, b) => a - b);
  const at = times[Math.min(Math.max(needed, 1), times.length) - 1]!;
  return Number.isFinite(at) ? at : undefined;
}

/**
 * Whether the holds seen are too short to poll more slowly between a claim and its plausible
 * release (see releasePlausibleAt): a put that sees them stops reading the history for a while.
 */
export function holdsTooShort(history: HoldHistory, retryDelayMs: number): boolean {
  if (history.holds.length === 0) return false;
  return Math.min(...history.holds) - frontPollMs(retryDelayMs) < pollMs(retryDelayMs);
}

/**
 * The slowest a put waiting in line within FAR_BACK_LOCKS of the front polls, however slowly the
 * line ahead of it moves (see backPollMs; further back, backSlowdown times this): half the grace a
 * put with the same retry_delay gives it before taking it for gone (goneAfterMs), and never
 * faster than pollMs. A stall may wait for such a put (the puts ahead of it gone): it sees the
 * stall within this, and shows it is alive (showLife) with the other half to spare.
 */
export function slowestPollMs(retryDelayMs: number): number {
  return Math.max(pollMs(retryDelayMs), Math.min(retryDelayMs, CREDIBLE_CEILING_MS) + 1_000);
}

/** What a put has seen of the line ahead of it move (see backPollMs). */
export interface LineSeen {
  /** How long the put has watched the line. */
  watchedMs: number;
  /** How many locks the puts that left the line ahead of it meanwhile waited for. */
  departed: number;
  /** The pool's claims before its first look, as if it had watched them (line-pace.ts). */
  before?: { spanMs: number; claims: number };
}

/**
 * How long a put further back in line waits between polls: about half the time the line ahead of
 * it takes to move up the `toFront` locks that leave it near the front, at the pace it has `seen`
 * the line move (unknown before its first look), never faster than pollMs and never slower than
 * slowestPollMs, or farPollMs for a put whose polls are fetches (`fetches`); far back, up to
 * backSlowdown times that. One lock from the front, in a line seen moving faster than that, as
 * fast as frontPollMs: with locks released more often than every retry_delay (several locks, short
 * holds), a put there would otherwise learn a retry_delay late that its turn has come, and the
 * lock would wait for it meanwhile.
 *
 * The pace is the time watched over the locks the puts that left ahead waited for, and one more
 * (the next to leave): a few departures seen early never read as a slow line, and a line that
 * has not moved at all reads as slow as the watch is long. Such a line may have only just formed
 * (puts that all joined at once), so until the put has seen someone ahead leave, it polls more
 * slowly than near the front only once it has watched the line for twice as long. The pool's
 * claims just before its first look count as watched, and as leaving (`seen.before`): a put just
 * joined would otherwise read the pace from the first puts to leave.
 */
export function backPollMs(
  retryDelayMs: number,
  toFront: number,
  seen: LineSeen | undefined,
  fetches = false,
): number {
  if (seen === undefined) return pollMs(retryDelayMs);
  const near = fetches ? farPollMs(retryDelayMs) : slowestPollMs(retryDelayMs);
  const far = near * backSlowdown(toFront);
  const { spanMs = 0, claims = 0 } = seen.before ?? {};
  const moved = seen.departed + claims > 0;
  const slowest = moved ? far : Math.max(near, Math.min(far, seen.watchedMs / 2));
  const turnoverMs = (seen.watchedMs + spanMs) / (seen.departed + claims + 1);
  const floor =
    toFront <= 1 && seen.departed > 0 ? frontPollMs(retryDelayMs) : pollMs(retryDelayMs);
  return Math.max(floor, Math.min((toFront * turnoverMs) / 2, slowest));
}

/**
 * How many times slower than the puts near it a put `toFront` locks from the front may poll when
 * the line barely moves (locks held for long): as fast within FAR_BACK_LOCKS, then once more for
 * each lock beyond, up to BACK_SLOWDOWN_MAX. A line stalls on a put that far back only when the
 * puts ahead of it, holding all those places, are gone at once (a pipeline's builds aborted
 * together, a lost worker); the free lock then waits for its poll, and it may be taken for gone
 * meanwhile by a put behind it that polls first (it puts itself back, in its place, at its next
 * poll). In exchange, a long line of puts waiting for locks held for hours polls a fraction as
 * often: a put ten locks back about once every eight slowest polls.
 */
export function backSlowdown(toFront: number): number {
  return Math.min(BACK_SLOWDOWN_MAX, Math.max(1, toFront - FAR_BACK_LOCKS + 1));
}

/** The most backSlowdown slows a put: `retry_delay: 10s` far back over SSH, 110 s between polls. */
export const BACK_SLOWDOWN_MAX = 10;

/**
 * How many locks the puts ahead take before a put is far back: where a look costs a connection
 * as a fetch does (`git://`, LockStore.looksAreCheap), it then polls by fetching, at farPollMs.
 */
export const FAR_BACK_LOCKS = 3;

/**
 * How many puts ahead of it a put in line has when it lets its kept session go (git://): the first
 * this many in line keep theirs, so a pool's line holds at most this many of git daemon's
 * connections (`--max-connections`, 32 by default, and a second's pause for any connection past
 * it) however long it grows. A kept session answers "has the tip moved?" at no cost; a put that
 * let it go makes a connection at each poll.
 */
export const KEPT_SESSIONS = 16;

/**
 * The slowest a put far back polls where each poll is a fetch (times backSlowdown beyond
 * FAR_BACK_LOCKS): its own grace (goneAfterMs) less a second, almost twice slowestPollMs. A look
 * tells it only that the tip moved, and a put the line stalls on (the puts ahead of it gone)
 * needs two of them to see the stall: one that sees the tip move, and one a poll later that sees
 * nobody ahead has left since, before it fetches. A fetch shows it the free lock at once: one
 * poll at this interval sees the stall sooner than two looks at slowestPollMs, and leaves the
 * second for the push that shows it is alive.
 */
export function farPollMs(retryDelayMs: number): number {
  return Math.max(pollMs(retryDelayMs), 2 * Math.min(retryDelayMs, CREDIBLE_CEILING_MS) + 1_000);
}

/**
 * How many puts beyond those the free locks serve poll at frontPollMs: the next to be served, and
 * the one after it, who is next once the first takes its lock (a put further back learns that
 * only at its next retry_delay poll, often after the following release).
 */
export const FRONT_SPARE = 2;

/**
 * The most of an entry's own retry_delay (from its ref name) another put believes: this many
 * times its own, and never more than CREDIBLE_CEILING_MS. An entry left by a killed put with
 * `retry_delay: 1h`, or pushed by hand, would otherwise keep a free lock from everyone for hours.
 */
export const CREDIBLE_FACTOR = 3;
export const CREDIBLE_CEILING_MS = 60_000;

/** The retry_delay of `entry` as a put with `ownRetryDelayMs` counts it (see CREDIBLE_FACTOR). */
export function credibleRetryDelayMs(entry: WaitingEntry, ownRetryDelayMs: number): number {
  return Math.min(
    entry.retryDelayMs,
    CREDIBLE_FACTOR * pollMs(ownRetryDelayMs),
    CREDIBLE_CEILING_MS,
  );
}

/**
 * How long a put in line may leave free locks untaken, as a put with `ownRetryDelayMs` judges
 * it: the put polls at least every retry_delay (as far as it is believed), so twice that and a
 * margin for a slow fetch or a transient retry means it is gone (SIGKILL, a lost worker) rather
 * than slow. A put taken out by mistake finds its entry gone at its next poll and puts it back,
 * in its place.
 */
export function goneAfterMs(entry: WaitingEntry, ownRetryDelayMs: number): number {
  return 2 * credibleRetryDelayMs(entry, ownRetryDelayMs) + 2_000;
}

/**
 * What a put knows of a stall: locks free while entries stand in line. A live put shows it is
 * alive by moving its entry: it joins, or points it at the tip once the stall is older than
 * showLifeAfterMs. An entry of a put that is gone stays as it was, pointing at a tip from before.
 */
export interface Stall {
  /** Since when every lock free now has been free, as far as this put can tell. */
  since: number;
  /** The branch tips this put has seen since then. */
  tips: ReadonlySet<string>;
  /** When this put first saw each entry pointing where it points now (see sightKey). */
  sightings: ReadonlyMap<string, number>;
  /** When this put first looked at the line: an entry seen since has moved, or joined, since. */
  watchingSince: number;
}

export function sightKey(entry: WaitingEntry): string {
  return `${entry.token}@${entry.at ?? ''}`;
}

/**
 * When `entry` counts as gone, judged by a put with `ownRetryDelayMs`: one grace after the stall
 * began, or after the entry last showed it was alive, whichever is later. Every entry ahead is
 * judged from the same moment, so however many puts that are gone stand ahead of a free lock,
 * it waits for one grace, not one after another.
 */
export function goneAt(entry: WaitingEntry, stall: Stall, ownRetryDelayMs: number): number {
  const seen = stall.sightings.get(sightKey(entry));
  // Pointing at a tip of the stall, or moved while this put watched: alive when first seen so.
  const moved =
    seen !== undefined &&
    ((entry.at !== undefined && stall.tips.has(entry.at)) || seen > stall.watchingSince);
  return Math.max(stall.since, moved ? seen : stall.since) + goneAfterMs(entry, ownRetryDelayMs);
}

/**
 * How old a stall is when a put in it shows it is alive: half its own grace, so that the puts
 * behind see it before they would take it for gone, while an ordinary hand-over (a fifth of
 * retry_delay and a push) ends long before and costs no push.
 */
export function showLifeAfterMs(retryDelayMs: number): number {
  return Math.min(pollMs(retryDelayMs), CREDIBLE_CEILING_MS) + 1_000;
}

/**
 * The entries a put arriving now would take for gone (see goneAt), from one look at the line:
 * with locks free since the tip was committed (`tipTime`, to the second), an entry pointing at
 * an older tip has not shown it is alive since. None while no lock is free.
 */
export function goneAtRest(
  line: readonly WaitingEntry[],
  pool: { free: number; tip: string; tipTime: number | undefined },
  now: number,
  retryDelayMs: number,
): WaitingEntry[] {
  if (pool.free === 0 || pool.tipTime === undefined) return [];
  const stall = {
    since: Math.min(now, pool.tipTime + 1_000),
    tips: new Set([pool.tip]),
    sightings: new Map(line.map((entry) => [sightKey(entry), now])),
    watchingSince: now,
  };
  return line.filter((entry) => goneAt(entry, stall, retryDelayMs) <= now);
}

/** The earlier of two moments, either of which may be unknown. */
export function earliest(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.min(a, b);
}
