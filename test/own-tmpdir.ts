// Vitest global setup: every test's scratch (step folders, lock repositories, and the homes of
// runs a test SIGKILLs, which cannot remove their own) goes to a folder of the test run's own,
// removed when it ends. The workers inherit TMPDIR, and so does every process they start.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export default function setup(): () => void {
  // Each project (vitest.config.ts) runs the setup again, in the process that ran it first.
  if (process.env.POOL_TESTS_TMPDIR) return () => undefined;
  const dir = mkdtempSync(join(tmpdir(), 'pool-tests-'));
  process.env.TMPDIR = process.env.POOL_TESTS_TMPDIR = dir;
  return () => rmSync(dir, { recursive: true, force: true });
}
