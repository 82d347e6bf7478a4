// The puts that left the waiting line with their claims, read from the commits between two tips
// (repo/line-claims.ts), in a real repository.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { claimsBetween, lineTokenOf } from '../../src/repo/line-claims.js';

const dir = mkdtempSync(join(tmpdir(), 'line-claims-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const env = {
  ...process.env,
  GIT_AUTHOR_NAME: 't',
  GIT_AUTHOR_EMAIL: 't@example.com',
  GIT_COMMITTER_NAME: 't',
  GIT_COMMITTER_EMAIL: 't@example.com',
};
const git = (args: string[]) => execFileSync('git', args, { cwd: dir, env, encoding: 'utf8' });
const run = async (args: string[]) => git(args);

/** A commit with this message on the current branch; its id. */
function commit(message: string): string {
  git(['commit', '--quiet', '--allow-empty', '-m', message]);
  return git(['rev-parse', 'HEAD']).trim();
}

git(['init', '--quiet', '-b', 'master']);
const base = commit('claiming: lock-a\n\nBuild URL: x\n\nClaim-Token: 0A1B-before');
const claimed =
  'claiming: lock-b\n\nBuild URL: x\n\nClaim-Token: 7F3C9E2A-11D4-4B8E-9C0F-5A6B7C8D9E0F';
commit(claimed);
commit('unclaiming: lock-a\n\nBuild URL: x\n');
commit(
  'claiming: lock-a\n\nBuild URL: x\n\nClaim-Token: abc-123\nClaimed-At: 2026-12-03T08:00:00Z',
);
const tip = commit('updating: lock-c\n\nBuild URL: x\n');

describe('claimsBetween', () => {
  it('names the line token of each claim after the first tip, up to the second', async () => {
    expect(await claimsBetween(run, base, tip)).toEqual(
      new Set(['7f3c9e2a11d44b8e9c0f5a6b7c8d9e0f', 'abc123']),
    );
  });

  it('names none between a tip and itself, and none without a first tip', async () => {
    expect(await claimsBetween(run, tip, tip)).toEqual(new Set());
    expect(await claimsBetween(run, undefined, tip)).toEqual(new Set());
  });

  it('is undefined for a first tip the copy does not have', async () => {
    expect(await claimsBetween(run, 'f'.repeat(40), tip)).toBeUndefined();
  });

  it('makes the token the line knows a put by', () => {
    expect(lineTokenOf('7F3C9E2A-11D4-4B8E')).toBe('7f3c9e2a11d44b8e');
  });
});
