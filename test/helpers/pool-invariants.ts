// What "the lock repository is consistent" means, read straight from a bare repository: no lock in
// both states, nothing but locks under a pool, and (for histories written only by the resource)
// every commit after the first changing exactly one lock.
import { git } from './lock-repo.js';

export interface TreeEntry {
  mode: string;
  type: string;
  path: string;
}

export async function tree(bare: string, rev: string): Promise<TreeEntry[]> {
  const out = await git(bare, 'ls-tree', '-r', '-z', rev);
  return out
    .split('\0')
    .filter(Boolean)
    .map((entry) => {
      const tab = entry.indexOf('\t');
      const [mode = '', type = ''] = entry.slice(0, tab).split(' ');
      return { mode, type, path: entry.slice(tab + 1) };
    });
}

/** Problems with the pools at `rev`: locks in both states, paths that are not locks. */
export async function consistencyProblems(
  bare: string,
  rev: string,
  pools: readonly string[],
  /** Paths outside the pools' lock folders that are expected (README.md, seeded oddities). */
  allowed: readonly string[] = ['README.md'],
): Promise<string[]> {
  const problems: string[] = [];
  const seen = new Map<string, string>();
  for (const { path } of await tree(bare, rev)) {
    const match = /^([^/]+)\/(claimed|unclaimed)\/([^/]+)$/.exec(path);
    if (!match || !pools.includes(match[1]!)) {
      if (!allowed.includes(path)) problems.push(`unexpected path ${path}`);
      continue;
    }
    const [, pool, state, name] = match as unknown as [string, string, string, string];
    if (name === '.gitkeep') continue;
    const key = `${pool}/${name}`;
    if (seen.has(key)) problems.push(`lock ${key} is both ${seen.get(key)} and ${state}`);
    seen.set(key, state);
  }
  return problems;
}

export interface CommitChange {
  commit: string;
  subject: string;
  /** `git log --name-status` lines: status letter and path(s). */
  changes: string[][];
}

/** `git log` of `rev`, oldest first: each commit as `format`, then its `--name-status` lines. */
function logWithChanges(bare: string, rev: string, format: string): Promise<string> {
  return git(bare, 'log', '--reverse', '--no-renames', '--name-status', `--format=${format}`, rev);
}

/** Every commit on `rev` after the root, oldest first, with what it changed (renames as A+D). */
export async function history(bare: string, rev: string): Promise<CommitChange[]> {
  const out = await logWithChanges(bare, rev, '%x01%H%x09%s');
  return out
    .split('\x01')
    .filter(Boolean)
    .map((record) => {
      const [header = '', ...lines] = record.split('\n').filter(Boolean);
      const [commit = '', subject = ''] = header.split('\t');
      return { commit, subject, changes: lines.map((line) => line.split('\t')) };
    });
}

/**
 * Why `commit` is not a move of exactly one lock (claim or release): undefined when it is one.
 * A move shows as one deletion and one addition of the same name across the two states.
 */
export function singleMoveProblem(commit: CommitChange, pool: string): string | undefined {
  const paths = commit.changes.map(([status, path]) => `${status} ${path}`).sort();
  const describe = `${commit.commit.slice(0, 8)} "${commit.subject}" (${paths.join(', ')})`;
  if (commit.changes.length !== 2) return `${describe} changes ${commit.changes.length} paths`;
  const added = commit.changes.find(([status]) => status === 'A');
  const deleted = commit.changes.find(([status]) => status === 'D');
  if (!added || !deleted) return `${describe} is not a move`;
  const from = /^([^/]+)\/(claimed|unclaimed)\/([^/]+)$/.exec(deleted[1] ?? '');
  const to = /^([^/]+)\/(claimed|unclaimed)\/([^/]+)$/.exec(added[1] ?? '');
  if (!from || !to || from[1] !== pool || to[1] !== pool) return `${describe} leaves the pool`;
  if (from[3] !== to[3] || from[2] === to[2]) return `${describe} is not one lock changing state`;
  const expected = to[2] === 'claimed' ? `claiming: ${to[3]}` : `unclaiming: ${to[3]}`;
  if (commit.subject !== expected) return `${describe} should say "${expected}"`;
  return undefined;
}

export interface LockClaim {
  lock: string;
  /** The claiming commit's `Build URL:` line (who claimed). */
  buildUrl: string;
  token: string;
  /** How the claim ended: released by its holder, reclaimed (by whom), or still held. */
  end: 'released' | 'reclaimed' | 'held';
}

/**
 * Replays the branch's claims and releases of `pool`, oldest first: each lock must alternate
 * between claimed and unclaimed (never claimed twice, never released twice), and a reclaim must
 * name the token of the claim it ends. Returns every claim with how it ended, and the problems.
 */
export async function claimHistory(
  bare: string,
  rev: string,
  pool: string,
): Promise<{ claims: LockClaim[]; problems: string[] }> {
  const out = await logWithChanges(
    bare,
    rev,
    '%x01%H%x1f%s%x1f%(trailers:key=Claim-Token,valueonly)%x1f%(trailers:key=Reclaimed-Token,valueonly)%x1f%b%x1f',
  );
  const claims: LockClaim[] = [];
  const problems: string[] = [];
  const current = new Map<string, LockClaim>();
  for (const record of out.split('\x01').filter(Boolean)) {
    const [commit = '', subject = '', token = '', reclaimed = '', body = '', names = ''] =
      record.split('\x1f');
    const added = names
      .split('\n')
      .map((line) => line.split('\t'))
      .filter(([status, path]) => status === 'A' && path?.startsWith(`${pool}/`));
    for (const [, path] of added) {
      const [, state, lock] = path!.split('/') as [string, string, string];
      if (lock === '.gitkeep') continue;
      const held = current.get(lock);
      const at = `${commit.slice(0, 8)} "${subject}"`;
      if (state === 'claimed') {
        if (held) problems.push(`${at} claims ${lock}, still held by ${held.buildUrl}`);
        const claim: LockClaim = {
          lock,
          buildUrl: /^Build URL: (.*)$/m.exec(body)?.[1] ?? '?',
          token: token.trim(),
          end: 'held',
        };
        claims.push(claim);
        current.set(lock, claim);
      } else {
        if (!held) {
          // The first release of a lock the repository was seeded with as claimed.
          continue;
        }
        if (reclaimed.trim() !== '') {
          if (reclaimed.trim() !== held.token)
            problems.push(
              `${at} reclaims token ${reclaimed.trim()}, but ${lock} is held by ${held.token}`,
            );
          held.end = 'reclaimed';
        } else held.end = 'released';
        current.delete(lock);
      }
    }
  }
  return { claims, problems };
}
