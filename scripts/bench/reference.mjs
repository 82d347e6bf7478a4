// @ts-check
// The reference's scripts (--reference: its image's /opt/resource) under the same contention over
// git daemon as the resource, scenario by scenario, so that the two compare within one run (and
// over HTTP and SSH in the command line's scenario: bench.mjs, ssh.mjs).
import { measureContention } from './contention.mjs';
import { contention, REFERENCE } from './options.mjs';
import { GIT_ENV } from './process.mjs';

/**
 * The contention scenarios over git daemon: the command line's, then at the fastest retry_delay
 * (100ms, where every poll is at the floor), with twice the puts on twice the locks, and with
 * locks held 5 s (half as many puts again, two rounds each): a pool whose jobs hold a lock for
 * long, where waiting is most of what the server sees.
 */
export function scenarios() {
  const { workers, locks } = contention;
  const many = Math.round(1.5 * workers);
  return [
    { label: undefined, settings: contention },
    { label: 'retry_delay 100ms', settings: { ...contention, retryDelay: '100ms' } },
    {
      label: `${2 * workers} puts on ${2 * locks} locks`,
      settings: { ...contention, workers: 2 * workers, locks: 2 * locks },
    },
    {
      label: `${many} puts on ${locks} locks, each held 5s`,
      settings: { ...contention, workers: many, holdMs: 5_000, rounds: 2 },
    },
  ];
}

/**
 * The reference's scripts, as `measureContention` runs another folder's. Its image gives git an
 * identity in its global config; here the environment does.
 */
export function referenceScripts() {
  return {
    assets: REFERENCE,
    env: Object.fromEntries(
      Object.entries(GIT_ENV).filter(([key]) => /^GIT_(AUTHOR|COMMITTER)_/.test(key)),
    ),
  };
}

/**
 * Each scenario that `variants` says ran (the first always; the others unless --no-variants) with
 * the reference's scripts.
 */
export async function measureReference(root, daemon, variants) {
  const scripts = referenceScripts();
  const results = [];
  for (const [index, { label, settings }] of scenarios().entries()) {
    if (index > 0 && !variants) break;
    process.stderr.write(`contention with the reference's scripts${label ? `, ${label}` : ''}…\n`);
    const name = `contention-reference-${index}.git`;
    results.push({
      label,
      ...(await measureContention(root, daemon, { name, settings, scripts })),
    });
  }
  return results;
}
