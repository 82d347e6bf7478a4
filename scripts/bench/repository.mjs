// @ts-check
// Lock repositories of a given history length, written with git fast-import.
import { tmpdir } from 'node:os';
import { git, run } from './process.mjs';

export const BRANCH = 'master';
export const POOL = 'pool';
/** Locks in the measured pool; a few other pools make some commits irrelevant to `check`. */
export const POOL_LOCKS = 8;
export const OTHER_POOLS = ['other-a', 'other-b'];

/**
 * A bare repository on `master` whose history has `commits` commits: the pools, then claims and
 * releases taking turns over the locks (one in ten about another pool). Every lock of `pool` is
 * unclaimed at the tip.
 */
export async function buildRepository(path, commits, locks = POOL_LOCKS) {
  await git(tmpdir(), 'init', '--quiet', '--bare', `--initial-branch=${BRANCH}`, path);
  const parts = [];
  let time = 1_600_000_000;
  let mark = 0;
  const commit = (message, changes) => {
    mark++;
    const body = Buffer.from(`${message}\n`);
    parts.push(
      `commit refs/heads/${BRANCH}\nmark :${mark}\ncommitter Bench <bench@localhost> ${time++} +0000\n`,
      `data ${body.length}\n`,
      body,
      mark > 1 ? `from :${mark - 1}\n` : '',
      ...changes.map((line) => `${line}\n`),
      '\n',
    );
  };
  const inline = (path, content) => {
    const data = Buffer.from(content);
    return `M 100644 inline ${path}\ndata ${data.length}\n${content}`;
  };
  const lockNames = Array.from({ length: locks }, (_, i) => `lock-${i}`);
  const initial = [inline('README.md', 'locks\n')];
  for (const pool of [POOL, ...OTHER_POOLS]) {
    initial.push(inline(`${pool}/claimed/.gitkeep`, ''), inline(`${pool}/unclaimed/.gitkeep`, ''));
    for (const name of lockNames)
      initial.push(inline(`${pool}/unclaimed/${name}`, `{"pool":"${pool}","name":"${name}"}\n`));
  }
  commit('initial pools', initial);
  // Pairs of claim + release, so every lock is unclaimed again at the tip.
  let i = 0;
  while (mark < commits) {
    const pool = i % 10 === 9 ? OTHER_POOLS[i % OTHER_POOLS.length] : POOL;
    const name = lockNames[i % lockNames.length];
    const claimed = `${pool}/claimed/${name}`;
    const unclaimed = `${pool}/unclaimed/${name}`;
    commit(`claiming: ${name}`, [`R ${unclaimed} ${claimed}`]);
    commit(`unclaiming: ${name}`, [`R ${claimed} ${unclaimed}`]);
    i++;
  }
  const stream = [];
  for (const part of parts) stream.push(typeof part === 'string' ? Buffer.from(part) : part);
  await run('git', ['fast-import', '--quiet'], { cwd: path, input: Buffer.concat(stream) });
  await git(path, 'repack', '-a', '-d', '-q');
  const count = Number((await git(path, 'rev-list', '--count', BRANCH)).stdout.trim());
  return count;
}
