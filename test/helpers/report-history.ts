// A pool history with known holds and waits, for `pool report`: claims and releases written with
// fixed times (relative to now) and the trailers real claims carry.
import { appendCommits, releaseCommit, type FastCommit } from './long-history.js';
import { createLockRepo, type LockRepo } from './lock-repo.js';

const MINUTE = 60;

export function buildUrl(job: string, build: number): string {
  return `https://ci.example.com/teams/main/pipelines/deploy/jobs/${job}/builds/${build}`;
}

function claim(name: string, at: number, job: string, build: number, waited?: string): FastCommit {
  const url = buildUrl(job, build);
  const trailers = [
    `Claim-Token: t${build}`,
    `Claimed-At: ${new Date(at * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z')}`,
    `Claimed-By: ${url}`,
    'Build-Team: main',
    'Build-Pipeline: deploy',
    `Build-Job: ${job}`,
    `Build-Name: ${build}`,
    ...(waited ? [`Waited: ${waited}`] : []),
  ];
  return {
    message: `claiming: ${name}\n\nBuild URL: ${url}\n\n${trailers.join('\n')}`,
    changes: [`R pool/unclaimed/${name} pool/claimed/${name}`],
    time: at,
  };
}

function release(name: string, at: number): FastCommit {
  return { ...releaseCommit('pool', name), time: at };
}

/**
 * Pool `pool` with locks a, b, c, d; looked at over the last two hours:
 * - a: three claims (waited 5s, 1m, 2m30s), held 30 + 15 + 10 minutes, free now;
 * - b: one claim 50 minutes ago by smoke #40, with no Waited trailer (an older claim), held now;
 * - c: never claimed;
 * - d: claimed three hours ago, released 90 minutes ago: held for the window's first 30 minutes,
 *   with no claim inside the window.
 */
export async function knownHistory(): Promise<{ repo: LockRepo; now: number }> {
  const repo = await createLockRepo({ pool: { unclaimed: ['a', 'b', 'c', 'd'] } });
  const now = Math.floor(Date.now() / 1000);
  const ago = (minutes: number) => now - minutes * MINUTE;
  await appendCommits(repo.bare, repo.branch, [
    claim('d', ago(180), 'nightly', 7, '0s'),
    release('d', ago(90)),
    claim('a', ago(100), 'build', 1, '5s'),
    release('a', ago(70)),
    claim('a', ago(60), 'build', 2, '1m0s'),
    claim('b', ago(50), 'smoke', 40),
    release('a', ago(45)),
    claim('a', ago(30), 'build', 3, '2m30s'),
    release('a', ago(20)),
  ]);
  return { repo, now: now * 1000 };
}
