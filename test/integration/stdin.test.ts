// The request on stdin: read up to 1 MiB, and given up at once when the step is stopped while
// the writer still holds stdin open.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLockRepo, type LockRepo } from '../helpers/lock-repo.js';
import { ASSETS, runScript } from '../helpers/run-script.js';
import { scratchDir } from '../helpers/steps.js';

let repo: LockRepo;
beforeAll(async () => {
  repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
});
afterAll(async () => repo?.cleanup());

const MB = 1024 * 1024;

describe('stdin', () => {
  it.for(['check', 'in', 'out'])(
    '%s stops within 1 s on SIGTERM while its stdin is still open',
    async (script) => {
      const child = spawn(join(ASSETS, script), [await scratchDir()], {
        stdio: ['pipe', 'pipe', 'pipe'],
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/root' },
      });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
      child.stdin.on('error', () => undefined);
      const exited = new Promise<number | null>((resolve) =>
        child.on('exit', (code) => resolve(code)),
      );
      // Half a request, larger than the pipe's buffer, and the writer never closes stdin. Once
      // the script has drained the buffer it reads its request, so its signal handlers are in.
      if (child.stdin.write(`{"source": {"uri": "${'x'.repeat(256 * 1024)}`))
        throw new Error('the pipe took the whole write: make it larger');
      await new Promise((resolve) => child.stdin.once('drain', resolve));
      const sent = Date.now();
      child.kill('SIGTERM');
      const code = await Promise.race([
        exited,
        new Promise<'running'>((resolve) => setTimeout(resolve, 3_000, 'running')),
      ]);
      const took = Date.now() - sent;
      if (code === 'running') child.kill('SIGKILL');
      child.stdin.destroy();
      expect(code).toBe(143);
      expect(took).toBeLessThan(1_000);
      expect(stdout).toBe('');
      expect(stderr).toBe('received SIGTERM: stopping\n');
    },
  );

  it.for([
    ['out', 'usage: out SOURCE_DIRECTORY (the build folder holding the step folders)'],
    ['in', 'usage: in DESTINATION_DIRECTORY'],
  ])(
    '%s without its folder argument says its usage at once, before reading stdin',
    async ([script, usage]) => {
      // A person trying the script by hand: nothing typed yet, stdin open.
      const { code, stderr } = await runWithStdinOpen(script!, '');
      expect(code).toBe(1);
      expect(stderr).toBe(`${usage}\n`);
    },
  );

  it('takes a request of nearly 1 MiB (a long known_hosts, say)', async () => {
    const result = await runScript('check', {
      source: { uri: repo.bare, branch: repo.branch, pool: 'pool' },
      comment: 'x'.repeat(MB - 1024),
    });
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toHaveLength(1);
  });

  it('refuses a request over 1 MiB in one line, without waiting for the rest of it', async () => {
    // More than the cap, and stdin left open: the answer comes without its end.
    const { code, stderr } = await runWithStdinOpen(
      'check',
      `{"source": {}, "padding": "${'x'.repeat(MB)}`,
    );
    expect(code).toBe(1);
    expect(stderr).toBe('invalid payload (the request on stdin is larger than 1 MiB)\n');
  });
});

/**
 * Runs `script` without arguments, writes `input` and leaves stdin open: its exit code (or
 * 'running' if it has not exited within 5 s, when it is killed) and its stderr.
 */
async function runWithStdinOpen(script: string, input: string) {
  const child = spawn(join(ASSETS, script), [], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  child.stdin.on('error', () => undefined);
  if (input !== '') child.stdin.write(input);
  const code = await Promise.race([
    new Promise<number | null>((resolve) => child.on('exit', (exitCode) => resolve(exitCode))),
    new Promise<'running'>((resolve) => setTimeout(resolve, 5_000, 'running')),
  ]);
  if (code === 'running') child.kill('SIGKILL');
  child.stdin.destroy();
  return { code, stderr };
}
