// Real lock repositories for tests: a bare repo in a temp folder, seeded through a working clone
// with local identity, no signing and gc off, removed after the test.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);

export const GIT_TEST_ENV = {
  ...process.env,
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_AUTHOR_NAME: 'Fixture',
  GIT_AUTHOR_EMAIL: 'fixture@localhost',
  GIT_COMMITTER_NAME: 'Fixture',
  GIT_COMMITTER_EMAIL: 'fixture@localhost',
  GIT_TERMINAL_PROMPT: '0',
};

export async function git(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await exec('git', ['-c', 'commit.gpgSign=false', '-c', 'gc.auto=0', ...args], {
    cwd,
    env: GIT_TEST_ENV,
    maxBuffer: 64 * 1024 * 1024,
  });
  return stdout;
}

export interface PoolSeed {
  claimed?: Record<string, string> | string[];
  unclaimed?: Record<string, string> | string[];
}

export interface LockRepo {
  /** The bare repository (what `source.uri` points at). */
  bare: string;
  /** A working clone for arranging and inspecting state. */
  work: string;
  branch: string;
  root: string;
  /** Makes changes in the working clone, commits and pushes them. */
  commit(message: string, change: (work: string) => Promise<void>): Promise<string>;
  /** Lock names per state at the remote branch tip. */
  state(pool: string): Promise<{ claimed: string[]; unclaimed: string[] }>;
  /** Subjects of the branch's commits, newest first. */
  subjects(): Promise<string[]>;
  tip(): Promise<string>;
  cleanup(): Promise<void>;
}

function entries(seed: Record<string, string> | string[] | undefined): [string, string][] {
  if (!seed) return [];
  if (Array.isArray(seed)) return seed.map((name) => [name, `{"name":"${name}"}\n`]);
  return Object.entries(seed);
}

export async function createLockRepo(
  pools: Record<string, PoolSeed>,
  options: { branch?: string } = {},
): Promise<LockRepo> {
  const branch = options.branch ?? 'master';
  const root = await mkdtemp(join(tmpdir(), 'pool-test-'));
  const bare = join(root, 'locks.git');
  const work = join(root, 'work');
  await git(root, 'init', '--quiet', '--bare', `--initial-branch=${branch}`, bare);
  await git(root, 'clone', '--quiet', bare, work);
  await git(work, 'checkout', '--quiet', '-B', branch);
  await writeFile(join(work, 'README.md'), 'locks\n');
  for (const [pool, seed] of Object.entries(pools)) {
    for (const state of ['claimed', 'unclaimed'] as const) {
      await mkdir(join(work, pool, state), { recursive: true });
      await writeFile(join(work, pool, state, '.gitkeep'), '');
      for (const [name, content] of entries(seed[state])) {
        await writeFile(join(work, pool, state, name), content);
      }
    }
  }
  await git(work, 'add', '-A');
  await git(work, 'commit', '--quiet', '-m', 'initial pools');
  await git(work, 'push', '--quiet', 'origin', `HEAD:refs/heads/${branch}`);

  const repo: LockRepo = {
    bare,
    work,
    branch,
    root,
    async commit(message, change) {
      await git(work, 'fetch', '--quiet', 'origin');
      await git(work, 'reset', '--quiet', '--hard', `origin/${branch}`);
      await change(work);
      await git(work, 'add', '-A');
      await git(work, 'commit', '--quiet', '--allow-empty', '-m', message);
      await git(work, 'push', '--quiet', 'origin', `HEAD:refs/heads/${branch}`);
      return (await git(work, 'rev-parse', 'HEAD')).trim();
    },
    async state(pool) {
      // -z: names with spaces or non-ASCII characters come unquoted.
      const out = await git(bare, 'ls-tree', '-r', '-z', '--name-only', branch, '--', `${pool}/`);
      const names = (state: string) =>
        out
          .split('\0')
          .filter((path) => path.startsWith(`${pool}/${state}/`))
          .map((path) => path.slice(`${pool}/${state}/`.length))
          .filter((name) => !name.startsWith('.'))
          .sort();
      return { claimed: names('claimed'), unclaimed: names('unclaimed') };
    },
    async subjects() {
      return (await git(bare, 'log', '--format=%s', branch)).split('\n').filter(Boolean);
    },
    async tip() {
      return (await git(bare, 'rev-parse', branch)).trim();
    },
    cleanup: () => rm(root, { recursive: true, force: true }),
  };
  return repo;
}
