// Build folders as a Concourse put sees them (SRC with one folder per earlier step) and small
// readers for what a run left in the lock repository.
import { execFile } from 'node:child_process';
import { chmod, mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, onTestFinished } from 'vitest';
import { git, type LockRepo } from './lock-repo.js';
import { tempDir } from './run-script.js';

/** A temporary folder removed when the current test finishes (call it inside a test). */
export async function scratchDir(prefix = 'pool-step-'): Promise<string> {
  const dir = await tempDir(prefix);
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A build folder with step folders, each holding `name` and, when given, `metadata`. */
export async function buildFolder(
  steps: Record<string, { name?: string; metadata?: string | Buffer }> = {},
): Promise<string> {
  const src = await scratchDir();
  for (const [step, files] of Object.entries(steps)) {
    await mkdir(join(src, step), { recursive: true });
    if (files.name !== undefined) await writeFile(join(src, step, 'name'), files.name);
    if (files.metadata !== undefined) await writeFile(join(src, step, 'metadata'), files.metadata);
  }
  return src;
}

/** A build folder whose step `lock` names `name` (and holds `metadata` when given). */
export function lockStep(name: string, metadata?: string): Promise<string> {
  return buildFolder({ lock: { name: `${name}\n`, metadata } });
}

export interface CommitInfo {
  subject: string;
  body: string;
  committer: string;
  author: string;
  /** Paths the commit changed, relative to the repository. */
  files: string[];
}

/** The trailers of a commit (the branch tip by default), as git itself parses them. */
export async function commitTrailers(
  repo: LockRepo,
  ref = repo.branch,
): Promise<Record<string, string>> {
  const out = await git(repo.bare, 'log', '-1', '--format=%(trailers:only,unfold)', ref);
  return Object.fromEntries(
    out
      .split('\n')
      .filter(Boolean)
      .map((line) => [line.slice(0, line.indexOf(': ')), line.slice(line.indexOf(': ') + 2)]),
  );
}

export async function commitInfo(repo: LockRepo, ref: string): Promise<CommitInfo> {
  const [subject = '', committer = '', author = ''] = (
    await git(repo.bare, 'log', '-1', '--format=%s%x00%cn <%ce>%x00%an <%ae>', ref)
  )
    .trimEnd()
    .split('\0');
  // The message exactly as stored (git log would add a newline of its own).
  const raw = await git(repo.bare, 'cat-file', 'commit', ref);
  const body = raw.slice(raw.indexOf('\n\n') + 2);
  const files = (
    await git(repo.bare, 'diff-tree', '--no-commit-id', '--name-only', '-r', '--root', ref)
  )
    .split('\n')
    .filter(Boolean);
  return { subject, committer, author, body, files };
}

/** The lock file's bytes at the remote branch tip, or undefined when it is not there. */
export async function lockFile(
  repo: LockRepo,
  path: string,
  ref = repo.branch,
): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    execFile(
      'git',
      ['cat-file', 'blob', `${ref}:${path}`],
      { cwd: repo.bare, encoding: 'buffer' },
      (error, stdout) => resolve(error ? undefined : stdout),
    );
  });
}

/** What both a spawned script and an in-process command report. */
type RunResult = { code: number | null; stdout: string; stderr: string };

/** A run that succeeded: exit 0 and exactly one JSON document on stdout. */
export function succeeded(result: RunResult): unknown {
  expect(result.code, result.stderr).toBe(0);
  expect(result.stdout.endsWith('\n')).toBe(true);
  expect(result.stdout.trim().split('\n')).toHaveLength(1);
  return JSON.parse(result.stdout);
}

/** A run that was refused: exit 1, nothing on stdout, a message and no stack trace on stderr. */
export function refused(result: RunResult, message: string | RegExp): void {
  expect(result.code, result.stderr).toBe(1);
  expect(result.stdout).toBe('');
  expect(result.stderr).toMatch(typeof message === 'string' ? escape(message) : message);
  expect(result.stderr).not.toMatch(/^\s+at /m);
}

/** A pattern that matches `text` as it is. */
export function escape(text: string): RegExp {
  return new RegExp(text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
}

export function lockResponse(ref: string, name: string, pool = 'pool') {
  return {
    version: { ref },
    metadata: [
      { name: 'lock_name', value: name },
      { name: 'pool_name', value: pool },
    ],
  };
}

/** Another clone changing the pool `pool` and pushing, as other builds would. Each returns the commit. */
export function otherClone(repo: LockRepo, pool = 'pool') {
  const path = (work: string, state: string, name: string) => join(work, pool, state, name);
  const move = (name: string, from: string, to: string) => (work: string) =>
    rename(path(work, from, name), path(work, to, name));
  return {
    release: (name: string) =>
      repo.commit(`unclaiming: ${name}`, move(name, 'claimed', 'unclaimed')),
    claim: (name: string) => repo.commit(`claiming: ${name}`, move(name, 'unclaimed', 'claimed')),
    add: (name: string, metadata: string | Buffer = 'new\n') =>
      repo.commit(`adding unclaimed: ${name}`, (work) =>
        writeFile(path(work, 'unclaimed', name), metadata),
      ),
    update: (name: string, metadata: string | Buffer) =>
      repo.commit(`updating: ${name}`, (work) =>
        writeFile(path(work, 'unclaimed', name), metadata),
      ),
    remove: (name: string) =>
      repo.commit(`removing: ${name}`, (work) => rm(path(work, 'claimed', name))),
  };
}

/**
 * The branches `out` is tested on: `master`, and a branch that is not the repository's default,
 * where `master` holds a decoy pool (see guardDefaultBranch).
 */
export const OUT_BRANCHES = [
  { where: 'on master', branch: 'master', decoy: false },
  { where: 'on a branch that is not the default', branch: 'ci/locks', decoy: true },
];

/**
 * With `decoy`, makes `master` the repository's default branch holding a decoy pool. The returned
 * check asserts that nothing landed on it since.
 */
export async function guardDefaultBranch(
  repo: LockRepo,
  decoy: boolean,
): Promise<() => Promise<void>> {
  if (!decoy) return async () => undefined;
  await addDecoyDefaultBranch(repo);
  const tip = (await git(repo.bare, 'rev-parse', 'master')).trim();
  return async () => {
    expect((await git(repo.bare, 'rev-parse', 'master')).trim()).toBe(tip);
  };
}

/** Makes `master` the repository's default branch, holding a pool that must never be touched. */
async function addDecoyDefaultBranch(repo: LockRepo): Promise<void> {
  const work = repo.work;
  await git(work, 'checkout', '--quiet', '--orphan', 'decoy');
  await git(work, 'rm', '-r', '--quiet', '--cached', '.');
  await rm(join(work, 'pool'), { recursive: true, force: true });
  await mkdir(join(work, 'pool', 'claimed'), { recursive: true });
  await mkdir(join(work, 'pool', 'unclaimed'), { recursive: true });
  await writeFile(join(work, 'pool', 'claimed', '.gitkeep'), '');
  await writeFile(join(work, 'pool', 'unclaimed', 'decoy-lock'), 'decoy\n');
  await git(work, 'add', 'pool');
  await git(work, 'commit', '--quiet', '-m', 'decoy pool on the default branch');
  await git(work, 'push', '--quiet', 'origin', 'HEAD:refs/heads/master');
  await git(repo.bare, 'symbolic-ref', 'HEAD', 'refs/heads/master');
  await git(work, 'checkout', '--quiet', '--force', '-B', repo.branch, `origin/${repo.branch}`);
  await git(work, 'clean', '--quiet', '-ffdx');
}

/** What a put reports when the branch refuses every push (protectBranch). */
export const HOOK_REFUSAL =
  'the lock repository refused the push to branch "master": pre-receive hook declined';

/** Makes `repo`'s server refuse every push with a pre-receive hook, as a protected branch does. */
export async function protectBranch(repo: LockRepo): Promise<void> {
  const hook = join(repo.bare, 'hooks', 'pre-receive');
  await writeFile(hook, '#!/bin/sh\necho "branch master is protected" >&2\nexit 1\n');
  await chmod(hook, 0o755);
}

/**
 * Moves the branch under a put in line without freeing a lock: a claimed lock added for each of
 * `names`, a commit each, each awaited until the put names its holder.
 */
export async function movesThatFreeNothing(
  repo: LockRepo,
  put: { waitForStderr(pattern: RegExp, timeoutMs?: number): Promise<void> },
  names: readonly string[] = ['lock-b', 'lock-c'],
): Promise<void> {
  for (const name of names) {
    await repo.commit(`adding claimed: ${name}`, (work) =>
      writeFile(join(work, 'pool', 'claimed', name), 'added\n'),
    );
    await put.waitForStderr(new RegExp(`"${name}" held by`), 20_000);
  }
}

/**
 * Moves the branch every `everyMs` with an empty commit until the returned function is called
 * (which resolves once the last commit is in): a waiting put then fetches again and again.
 */
export function keepMoving(repo: LockRepo, everyMs = 100): () => Promise<void> {
  let moving = true;
  const mover = (async () => {
    while (moving) {
      await repo.commit('updating: nothing', async () => undefined);
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  })();
  return async () => {
    moving = false;
    await mover;
  };
}
