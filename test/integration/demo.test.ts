// `npm run demo` is the README's first command: it must do the whole job and leave nothing behind.
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';

const exec = promisify(execFile);
const DEMO = resolve(import.meta.dirname, '../../scripts/demo.mjs');

let scratch: string | undefined;
afterEach(async () => {
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

describe('npm run demo', () => {
  it('acquires, fetches, waits, releases and checks, then removes its folder', async () => {
    scratch = await mkdtemp(join(tmpdir(), 'pool-demo-test-'));
    const { stdout } = await exec(process.execPath, [DEMO], {
      env: { PATH: process.env.PATH, HOME: scratch, TMPDIR: scratch, NO_COLOR: '1' },
    });
    // The reference's key phrases, which the resource keeps, and the demo's own account.
    expect(stdout).toContain('acquiring lock on: environments');
    expect(stdout).toMatch(/acquired!/);
    expect(stdout).toContain('waiting for lock');
    expect(stdout).toContain('exit 1 (expected: it gave up)');
    expect(stdout).toMatch(/unclaimed staging-1, staging-2/);
    expect(stdout).toContain('Build URL: https://ci.example.com/teams/main/pipelines/deploy');
    expect(await readdir(scratch)).toEqual([]);
  });
});
