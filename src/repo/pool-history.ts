// A pool's history over a window of time, for `pool report`: a bare, shallow copy of the branch,
// deepened in steps until it reaches back past the window's start, so the cost follows the window
// and not the length of the branch; then the pool's lock changes found there, oldest first.
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Git } from '../git/git.js';
import type { LockState } from '../lock/pool-state.js';

export interface PoolHistoryOptions {
  uri: string;
  branch: string;
  pool: string;
  /** Folder for the bare copy (created if missing). */
  gitDir: string;
  /** The window's start (ms since the epoch): the copy reaches back past it. */
  since: number;
}

/** One lock file appearing in or leaving a state folder. */
export interface LockChange {
  commit: string;
  /** The commit's committer date (ms): what the window is measured in. */
  at: number;
  name: string;
  state: LockState;
  /** A: the lock entered `state` (claimed, released, added); D: it left it. */
  change: 'A' | 'D';
  /** `%(trailers:only,unfold)`: one `Key: value` per line. */
  trailers: string;
  body: string;
  /** `Name <email>` */
  author: string;
}

export interface PoolHistory {
  /** Each lock's state at the oldest commit of the copy (empty when the copy holds the root). */
  start: Map<string, LockState>;
  /** The changes after that commit, oldest first. */
  changes: LockChange[];
  /** How many commits the copy holds. */
  commits: number;
}

/** The first window: a busy pool makes some tens of commits an hour. */
const FIRST_DEPTH = 64;
/** How much wider each deepening makes the window: a few round trips reach any window. */
const DEEPEN_FACTOR = 4;

const RECORD = '\x1e';
const FIELD = '\x1f';

export async function readPoolHistory(
  git: Git,
  options: PoolHistoryOptions,
  signal?: AbortSignal,
): Promise<PoolHistory> {
  const { gitDir, branch, pool } = options;
  const run = (args: readonly string[]) => git.run(args, { cwd: gitDir, signal });
  const tracking = `refs/remotes/origin/${branch}`;
  const fetch = (depth: number) =>
    // An absolute --depth, not --deepen or --shallow-since: git 2.39's deepen-relative stops
    // after a long run of commits sharing one timestamp, and --shallow-since fails outright when
    // no commit is that recent.
    run([
      'fetch',
      '--quiet',
      '--no-tags',
      `--depth=${depth}`,
      'origin',
      `+refs/heads/${branch}:${tracking}`,
    ]);

  await mkdir(gitDir, { recursive: true });
  await run(['init', '--quiet', '--bare']);
  await run(['remote', 'add', 'origin', options.uri]);
  let depth = FIRST_DEPTH;
  await fetch(depth);
  let commits = await count(run, tracking);
  for (;;) {
    const shallow = await shallowCommits(gitDir);
    if (shallow.length === 0) break;
    const oldest = await run(['log', '--no-walk', '--format=%ct', ...shallow]);
    const reached = oldest
      .split('\n')
      .filter(Boolean)
      .some((time) => Number(time) * 1000 < options.since);
    if (reached || commits < depth) break;
    depth = commits * DEEPEN_FACTOR;
    await fetch(depth);
    const deeper = await count(run, tracking);
    if (deeper <= commits) break;
    commits = deeper;
  }

  const shallow = await shallowCommits(gitDir);
  const start = new Map<string, LockState>();
  // The oldest commit of a shallow copy seems to add every file: its tree is the state the
  // changes after it start from, and it is no change itself.
  for (const boundary of shallow) {
    const tree = await run(['ls-tree', '-r', '-z', '--name-only', boundary, '--', `${pool}/`]);
    for (const path of tree.split('\0')) {
      const lock = lockOfPath(pool, path);
      if (lock) start.set(lock.name, lock.state);
    }
  }
  const format = [`${RECORD}%H`, '%ct', '%an <%ae>', '%(trailers:only,unfold)', '%B', ''].join(
    FIELD,
  );
  const out = await run([
    'log',
    '--reverse',
    '-z',
    '--no-renames',
    '--name-status',
    `--format=${format}`,
    tracking,
    ...(shallow.length > 0 ? ['--not', ...shallow] : []),
    '--',
    `${pool}/`,
  ]);
  const changes: LockChange[] = [];
  for (const entry of out.split(RECORD).slice(1)) {
    const [commit = '', time = '', author = '', trailers = '', body = '', files = ''] =
      entry.split(FIELD);
    const tokens = files.replace(/^\0?\n?/, '').split('\0');
    for (let index = 0; index + 1 < tokens.length; index += 2) {
      const status = tokens[index]!.trim();
      const lock = lockOfPath(pool, tokens[index + 1]!);
      if (!lock || (status !== 'A' && status !== 'D')) continue;
      changes.push({
        commit,
        at: Number(time) * 1000,
        ...lock,
        change: status,
        trailers,
        body,
        author,
      });
    }
  }
  return { start, changes, commits };
}

function lockOfPath(pool: string, path: string): { name: string; state: LockState } | undefined {
  if (!path.startsWith(`${pool}/`)) return undefined;
  const match = /^(claimed|unclaimed)\/([^/]+)$/.exec(path.slice(pool.length + 1));
  if (!match || match[2]!.startsWith('.')) return undefined;
  return { state: match[1] as LockState, name: match[2]! };
}

async function count(run: (args: readonly string[]) => Promise<string>, ref: string) {
  return Number((await run(['rev-list', '--count', ref])).trim());
}

/** The shallow boundary: `shallow` in the bare copy's folder (absent once complete). */
async function shallowCommits(gitDir: string): Promise<string[]> {
  try {
    return (await readFile(join(gitDir, 'shallow'), 'utf8')).split('\n').filter(Boolean);
  } catch {
    return [];
  }
}
