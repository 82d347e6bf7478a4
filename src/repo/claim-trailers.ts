// What a lock repository's commits say about claims (SPEC §9, §10): the trailers `git log`
// prints, a claim's token and lease, a renewal's new lease, and who made a change and when,
// from the claim trailers first, then the older `Build URL:` line or the author.
import { HOLDER_LOG_FORMAT, type HolderLogRecord } from './git-output.js';

export interface CommitFacts {
  /** `%(trailers:only,unfold)`: one `Key: value` per line. */
  trailers: string;
  /** The whole message. */
  body: string;
  /** `Name <email>` */
  author: string;
  /** The author date: what `git log` shows; for our own commits, the moment of the claim. */
  authoredAt: Date;
}

/** The trailer naming the token of the claim a reclaim ended (SPEC §10). */
export const RECLAIMED_TOKEN = 'Reclaimed-Token';

/** The subject of a lease renewal (SPEC §10), followed by the lock's name. */
export const RENEWING = 'renewing: ';

/** The value of trailer `key` in `%(trailers:only,unfold)` text; the last one wins. */
export function trailerOf(trailers: string, key: string): string | undefined {
  return trailerValues(trailers, key).at(-1);
}

/**
 * Every value of `key` in `trailers` (`Key: value` lines), in order, as
 * `%(trailers:key=KEY,valueonly)` lists them (the key matched regardless of case).
 */
export function trailerValues(trailers: string, key: string): string[] {
  const values: string[] = [];
  for (const line of trailers.split('\n')) {
    const colon = line.indexOf(':');
    if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === key.toLowerCase()) {
      values.push(line.slice(colon + 1).trim());
    }
  }
  return values;
}

/**
 * `git log` of the `renewing:` commits (and the claiming ones: so it always prints, which spares
 * simple-git's wait after a silent command) in `revisions`, for parseHolderLog and renewedLeases.
 */
export function renewalLogArgs(revisions: readonly string[]): string[] {
  return [
    'log',
    '-z',
    ...RENEWAL_LOG_SUBJECTS.map((subject) => `--grep=^${subject}`),
    `--format=${HOLDER_LOG_FORMAT}`,
    ...revisions,
    '--',
  ];
}

/** The messages renewalLogArgs's log keeps: a line of theirs starts so (git's --grep). */
const RENEWAL_LOG_SUBJECTS = [RENEWING, 'claiming: ', 'adding claimed: '];

/** Whether renewalLogArgs's log keeps a commit with this message. */
export function inRenewalLog(message: string): boolean {
  return message
    .split('\n')
    .some((line) => RENEWAL_LOG_SUBJECTS.some((subject) => line.startsWith(subject)));
}

/**
 * The latest lease each claim's renewals recorded. `log` is newest first; a renewal counts when
 * its subject names the claim's lock and it carries the claim's token. The locks of a set share
 * one token (SPEC §11), so a claim is its token and its lock together.
 */
export function renewedLeases<Claim extends { name: string; token?: string }>(
  log: readonly HolderLogRecord[],
  claims: readonly Claim[],
): Map<Claim, Date> {
  const byRenewal = new Map<string, Claim>();
  for (const claim of claims)
    if (claim.token !== undefined) byRenewal.set(`${claim.token} ${RENEWING}${claim.name}`, claim);
  const leases = new Map<Claim, Date>();
  for (const { trailers, body } of log) {
    const token = trailerOf(trailers, 'Claim-Token');
    const claim = token === undefined ? undefined : byRenewal.get(`${token} ${firstLine(body)}`);
    if (claim === undefined || leases.has(claim)) continue;
    const lease = instant(trailerOf(trailers, 'Lease-Expires'));
    if (lease) leases.set(claim, lease);
  }
  return leases;
}

/** An RFC 3339 trailer value as a date; undefined when absent or unreadable. */
function instant(text: string | undefined): Date | undefined {
  const parsed = text ? new Date(text) : undefined;
  return parsed && !Number.isNaN(parsed.getTime()) ? parsed : undefined;
}

/** A commit message's subject. */
export function firstLine(body: string): string {
  return body.split('\n', 1)[0]!.trim();
}

/** What a claiming commit says about the claim itself: its token and its lease, when it has them. */
export function claimFromTrailers(trailers: string): { token?: string; leaseExpires?: Date } {
  const token = trailerOf(trailers, 'Claim-Token');
  const leaseExpires = instant(trailerOf(trailers, 'Lease-Expires'));
  return {
    ...(token ? { token } : {}),
    ...(leaseExpires ? { leaseExpires } : {}),
  };
}

/** What a commit says about who made the change and when; claims first, then older habits. */
export function holderFromCommit(facts: CommitFacts): { by: string; since: Date } {
  const trailer = (key: string) => trailerOf(facts.trailers, key);
  const known = (value: string | undefined) =>
    value !== undefined && value !== '' && value !== 'unknown' ? value : undefined;
  const buildUrl = /^Build URL: (.*)$/m.exec(facts.body)?.[1]?.trim();
  const by = known(trailer('Claimed-By')) ?? known(buildUrl) ?? facts.author;
  const since = instant(trailer('Claimed-At')) ?? facts.authoredAt;
  return { by, since };
}
