// The user-visible round trip every transport must support: check, put acquire, get of the
// version it returned, put release; with each script's output kept for secret checks.
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';
import { git, type LockRepo } from './lock-repo.js';
import { runScript, type RunOptions, type ScriptResult } from './run-script.js';

export interface CycleOptions extends RunOptions {
  /** Every script's result is appended here (to grep for secrets afterwards). */
  outputs?: ScriptResult[];
}

/** Expects `repo` to hold pool `pool` with exactly one unclaimed lock, `lock-a`. */
export async function runLockCycle(
  source: Record<string, unknown>,
  repo: LockRepo,
  options: CycleOptions = {},
): Promise<void> {
  const keep = (result: ScriptResult) => {
    options.outputs?.push(result);
    return result;
  };
  const checked = keep(await runScript('check', { source }, options));
  expect(checked.stderr).toBe('');
  expect(checked.code).toBe(0);
  expect(JSON.parse(checked.stdout)).toEqual([{ ref: await repo.tip() }]);

  // Step folders live in the repository's fixture folder, removed with it.
  const tempDir = () => mkdtemp(join(repo.root, 'step-'));
  const src = await tempDir();
  const acquired = keep(
    await runScript('out', { source, params: { acquire: true } }, { ...options, args: [src] }),
  );
  expect(acquired.code, acquired.stderr).toBe(0);
  const version = JSON.parse(acquired.stdout).version;
  expect(version).toEqual({ ref: await repo.tip() });
  expect(await repo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });

  const dest = await tempDir();
  const fetched = keep(await runScript('in', { source, version }, { ...options, args: [dest] }));
  expect(fetched.code, fetched.stderr).toBe(0);
  expect(JSON.parse(fetched.stdout).version).toEqual(version);

  const step = await tempDir();
  await mkdir(join(step, 'lock'));
  await writeFile(join(step, 'lock', 'name'), 'lock-a\n');
  const released = keep(
    await runScript('out', { source, params: { release: 'lock' } }, { ...options, args: [step] }),
  );
  expect(released.code, released.stderr).toBe(0);
  expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a'] });
  expect((await repo.subjects()).slice(0, 2)).toEqual(['unclaiming: lock-a', 'claiming: lock-a']);
}

/** Every commit's message and identities on the repository, as one text (to grep for secrets). */
export async function commitText(repo: LockRepo): Promise<ScriptResult> {
  const log = await git(repo.bare, 'log', '--all', '--format=%an <%ae> %cn <%ce>%n%B');
  return { code: 0, signal: null, stdout: log, stderr: '', exitMs: 0, eofMs: 0 };
}

/** Asserts no byte of any output contains any of the secrets (or a line of a multi-line one). */
export function expectNoSecrets(outputs: ScriptResult[], secrets: string[]): void {
  const text = outputs.map((result) => `${result.stdout}\n${result.stderr}`).join('\n');
  for (const secret of secrets) {
    const pieces = [secret, ...secret.split('\n').filter((line) => line.trim().length >= 8)];
    for (const piece of pieces)
      expect(text.includes(piece.trim()), `output shows a secret`).toBe(false);
  }
}

/** A refused run: exit 1, nothing on stdout, and exactly one line on stderr saying why. */
export function expectOneLineFailure(result: ScriptResult, pattern: RegExp): void {
  expect(result.code).toBe(1);
  expect(result.stdout).toBe('');
  const lines = result.stderr.trimEnd().split('\n');
  expect(lines, result.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(pattern);
}
