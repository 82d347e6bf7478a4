// @ts-check
// Invariants of a contended pool, shared by the soak tests and the bench: holds of one lock never
// overlap, claims and releases of a lock take turns on the branch, and no waiting-line entry is
// left behind once every put is done.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const exec = promisify(execFile);

/**
 * @typedef {object} Hold
 * @property {string} lock
 * @property {number} from when the lock was held, on the worker's own clock
 * @property {number} to when its release started
 * @property {number | string} worker who held it
 */

/**
 * Mutual exclusion, from the workers' own clocks: each pair of holds of one lock that overlap.
 *
 * @param {readonly Hold[]} holds
 * @returns {string[]}
 */
export function overlappingHolds(holds) {
  /** @type {Map<string, Hold[]>} */
  const byLock = new Map();
  for (const hold of holds) byLock.set(hold.lock, [...(byLock.get(hold.lock) ?? []), hold]);
  const problems = [];
  for (const [lock, list] of byLock) {
    const ofLock = [...list].sort((a, b) => a.from - b.from);
    for (let i = 1; i < ofLock.length; i++) {
      const previous = /** @type {Hold} */ (ofLock[i - 1]);
      const current = /** @type {Hold} */ (ofLock[i]);
      if (current.from < previous.to)
        problems.push(
          `${lock}: worker ${current.worker} took it at ${current.from} while worker ${previous.worker} held it until ${previous.to}`,
        );
    }
  }
  return problems;
}

/**
 * Mutual exclusion, from the branch's history: "claiming: X" and "unclaiming: X" subjects, oldest
 * first, must take turns per lock (starting unclaimed). Other subjects are ignored.
 *
 * @param {readonly string[]} subjects
 * @returns {string[]}
 */
export function turnTakingProblems(subjects) {
  const held = new Set();
  const problems = [];
  for (const subject of subjects) {
    const match = /^(un)?claiming: (.*)$/.exec(subject);
    if (!match) continue;
    const lock = match[2];
    if (!match[1]) {
      if (held.has(lock)) problems.push(`${lock} claimed while claimed`);
      held.add(lock);
    } else {
      if (!held.has(lock)) problems.push(`${lock} released while not claimed`);
      held.delete(lock);
    }
  }
  return problems;
}

/**
 * The waiting line's refs left in a bare repository.
 *
 * @param {string} bare
 * @returns {Promise<string[]>}
 */
export async function waitingLineRefs(bare) {
  const { stdout } = await exec(
    'git',
    ['for-each-ref', '--format=%(refname)', 'refs/pool-resource/'],
    { cwd: bare },
  );
  return stdout.split('\n').filter(Boolean);
}
