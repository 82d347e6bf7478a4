// What a commit says about the build behind it: the `Build URL:` line every commit carries and
// the holder trailers of claiming commits.

import { formatGoDuration } from '../base/duration.js';

export interface BuildInfo {
  url?: string;
  id?: string;
  team?: string;
  pipeline?: string;
  job?: string;
  name?: string;
}

/** Reads Concourse's build variables. `BUILD_URL` exists from Concourse v8; older workers need it built. */
export function buildInfoFromEnv(env: Readonly<Record<string, string | undefined>>): BuildInfo {
  const value = (key: string) => (env[key] ? env[key] : undefined);
  return {
    url: value('BUILD_URL') ?? buildUrl(env),
    id: value('BUILD_ID'),
    team: value('BUILD_TEAM_NAME'),
    pipeline: value('BUILD_PIPELINE_NAME'),
    job: value('BUILD_JOB_NAME'),
    name: value('BUILD_NAME'),
  };
}

/**
 * Who a build is, said short, as `pool status` shows a holder (commands/pool/holder.ts):
 * `team/pipeline/job #build`, `build #ID` for a one-off build, else its URL.
 */
export function buildLabel(build: BuildInfo): string | undefined {
  const { team, pipeline, job, name, id, url } = build;
  if (team && pipeline && job && name) return `${team}/${pipeline}/${job} #${name}`;
  if (id) return `build #${id}`;
  return url;
}

function buildUrl(env: Readonly<Record<string, string | undefined>>): string | undefined {
  const atc = env.ATC_EXTERNAL_URL?.replace(/\/+$/, '');
  if (!atc) return undefined;
  const {
    BUILD_TEAM_NAME: team,
    BUILD_PIPELINE_NAME: pipeline,
    BUILD_JOB_NAME: job,
    BUILD_NAME: name,
  } = env;
  if (team && pipeline && job && name) {
    const vars = env.BUILD_PIPELINE_INSTANCE_VARS;
    const query = vars ? `?vars=${encodeURIComponent(vars)}` : '';
    const path = [team, pipeline, job, name].map(encodeURIComponent);
    return `${atc}/teams/${path[0]}/pipelines/${path[1]}/jobs/${path[2]}/builds/${path[3]}${query}`;
  }
  if (env.BUILD_ID) return `${atc}/builds/${encodeURIComponent(env.BUILD_ID)}`;
  return undefined;
}

export interface ClaimRecord {
  token: string;
  at: Date;
  /** Who holds the lock when it is not a build (the pool command's operator); else the build URL. */
  by?: string;
  /** How long the put took to get the lock, from its start to this commit. */
  waitedMs: number;
  /** When the claim's lease runs out (SPEC §10); a claim without one never expires. */
  leaseExpires?: Date;
}

/**
 * `SUBJECT`, a blank line, `Build URL: …`; claiming commits add a trailer block after it, and
 * `more` trailers (a reclaim's, a set's) follow in the same block.
 */
export function commitMessage(
  subject: string,
  build: BuildInfo,
  claim?: ClaimRecord,
  more: readonly (readonly [string, string])[] = [],
): string {
  const url = build.url ?? 'unknown';
  let message = `${subject}\n\nBuild URL: ${url}\n`;
  const trailers: (readonly [string, string | undefined])[] = [];
  if (claim) {
    trailers.push(
      ['Claim-Token', claim.token],
      ['Claimed-At', rfc3339(claim.at)],
      ['Claimed-By', claim.by ?? url],
      ['Build-Id', build.id],
      ['Build-Team', build.team],
      ['Build-Pipeline', build.pipeline],
      ['Build-Job', build.job],
      ['Build-Name', build.name],
      ['Waited', formatGoDuration(claim.waitedMs)],
      ['Lease-Expires', claim.leaseExpires && rfc3339(claim.leaseExpires)],
    );
  }
  trailers.push(...more);
  if (trailers.length > 0) {
    message += '\n';
    for (const [key, value] of trailers) {
      if (value !== undefined) message += `${key}: ${oneLine(value)}\n`;
    }
  }
  return message;
}

/** RFC 3339 in UTC, to the second, as every time in a trailer is written. */
function rfc3339(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function oneLine(value: string): string {
  // eslint-disable-next-line no-control-regex
  return value.replace(/[\u0000-\u001f\u007f]+/g, ' ');
}
