// A run's git commands share one SSH connection per server (what OpenSSH's ControlMaster gives),
// counted in a real OpenSSH sshd's own log: connections ("Accepted publickey") against commands
// ("Starting session"). A server that closes connections between commands costs a new one, not a
// failure, and a TMPDIR too long for a socket path still works, one connection per command.
import { mkdir, mkdtemp, readdir, readFile, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { createLockRepo, type LockRepo } from '../helpers/lock-repo.js';
import { runScript, startScript, tempDir, type RunningScript } from '../helpers/run-script.js';
import { generateKey, startSshd, type KeyPair, type Sshd } from '../helpers/sshd.js';

let keysDir: string;
let key: KeyPair;
let sshd: Sshd;
/** Closes every connection that has had no command for a second, as some servers do. */
let closingSshd: Sshd;

beforeAll(async () => {
  keysDir = await mkdtemp(join(tmpdir(), 'pool-keys-'));
  key = await generateKey(keysDir, 'client', { type: 'ed25519' });
  sshd = await startSshd([key.publicKey]);
  closingSshd = await startSshd([key.publicKey], ['UnusedConnectionTimeout 1']);
});

afterAll(async () => {
  await sshd?.stop();
  await closingSshd?.stop();
  await rm(keysDir, { recursive: true, force: true });
});

/** What the server saw from the moment this is called: connections and commands. */
function watchLog(server: Sshd) {
  const from = server.log().length;
  const since = () => server.log().slice(from);
  const count = (pattern: RegExp) => since().match(new RegExp(pattern, 'g'))?.length ?? 0;
  return {
    connections: () => count(/Accepted publickey for /),
    commands: () => count(/Starting session: command /),
  };
}

/** Every process below `pid`, from /proc. */
async function descendants(pid: number): Promise<number[]> {
  const parents = new Map<number, number>();
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    // The command name (in parentheses) may hold spaces; the parent PID is the second field after it.
    const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (parent) parents.set(Number(name), parent);
  }
  const below: number[] = [];
  const visit = (of: number) => {
    for (const [child, parent] of parents)
      if (parent === of) {
        below.push(child);
        visit(child);
      }
  };
  visit(pid);
  return below;
}

/** Releases lock-a by hand; the waiting put must then take it without a word about SSH. */
async function releaseAndExpectAcquired(repo: LockRepo, run: RunningScript) {
  await repo.commit('unclaiming: lock-a', (work) =>
    rename(join(work, 'pool', 'claimed', 'lock-a'), join(work, 'pool', 'unclaimed', 'lock-a')),
  );
  const result = await run.done;
  expect(result.stderr).toMatch(/acquired!/);
  expect(result.stderr).not.toMatch(/ssh:|error/i);
  expect(result.code).toBe(0);
  expect((await repo.state('pool')).claimed).toEqual(['lock-a']);
}

function request(server: Sshd, repo: LockRepo, retryDelay: string, extra = {}) {
  return {
    source: {
      uri: server.url(repo.bare),
      branch: repo.branch,
      pool: 'pool',
      private_key: key.privateKey,
      retry_delay: retryDelay,
      ...extra,
    },
    params: { acquire: true },
  };
}

describe('one SSH connection per run', () => {
  it("a put's fetch, push and every poll while it waits share one connection", async () => {
    const repo = await createLockRepo({ pool: { claimed: ['lock-a'] } });
    try {
      const seen = watchLog(sshd);
      const run = startScript('out', request(sshd, repo, '200ms'), { args: [await tempDir()] });
      await run.waitForStderr(/waiting for lock/);
      // The first fetch, then polls of the branch tip.
      expect(await eventually(() => seen.commands() >= 4, 10_000)).toBe(true);
      await releaseAndExpectAcquired(repo, run);
      expect(seen.commands()).toBeGreaterThanOrEqual(5);
      expect(seen.connections()).toBe(1);
    } finally {
      await repo.cleanup();
    }
  });

  it('a server that closes idle connections costs a new connection, not a failure', async () => {
    const repo = await createLockRepo({ pool: { claimed: ['lock-a'] } });
    try {
      const seen = watchLog(closingSshd);
      // Polls 2 s apart (first in line: a fifth of retry_delay), the server closes after 1–1.5 s
      // without a command.
      const run = startScript('out', request(closingSshd, repo, '10s'), {
        args: [await tempDir()],
      });
      await run.waitForStderr(/waiting for lock/);
      // Each poll after the first few finds its connection closed by the server.
      expect(await eventually(() => seen.connections() >= 3, 20_000)).toBe(true);
      await releaseAndExpectAcquired(repo, run);
    } finally {
      await repo.cleanup();
    }
  });

  it('a connection that stops answering (a dropped NAT entry, say) is replaced within half of git_timeout', async () => {
    const repo = await createLockRepo({ pool: { claimed: ['lock-a'] } });
    const frozen: number[] = [];
    try {
      const seen = watchLog(sshd);
      const run = startScript('out', request(sshd, repo, '300ms', { git_timeout: '4s' }), {
        args: [await tempDir()],
      });
      await run.waitForStderr(/waiting for lock/);
      expect(await eventually(() => seen.commands() >= 2, 10_000)).toBe(true);
      // Freeze the server's side of the run's connection: it stays open and says nothing.
      for (const pid of await descendants(sshd.pid)) {
        process.kill(pid, 'SIGSTOP');
        frozen.push(pid);
      }
      const commands = seen.commands();
      expect(
        await eventually(() => seen.connections() >= 2 && seen.commands() > commands, 10_000),
      ).toBe(true);
      await releaseAndExpectAcquired(repo, run);
    } finally {
      for (const pid of frozen) process.kill(pid, 'SIGKILL');
      await repo.cleanup();
    }
  });

  it('a TMPDIR too long for a socket path: every command connects on its own, and works', async () => {
    const repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    // Unix socket paths end at 107 bytes on Linux.
    const deep = join(await mkdtemp(join(tmpdir(), 'pool-long-')), 'x'.repeat(100));
    await mkdir(deep);
    try {
      const seen = watchLog(sshd);
      const step = await tempDir();
      const result = await runScript('out', request(sshd, repo, '200ms'), {
        args: [step],
        tmpdir: deep,
      });
      expect(result.stderr).toMatch(/acquired!/);
      expect(result.code).toBe(0);
      expect(seen.connections()).toBe(seen.commands());
      expect(seen.commands()).toBeGreaterThanOrEqual(2);
      expect((await repo.state('pool')).claimed).toEqual(['lock-a']);
    } finally {
      await repo.cleanup();
      await rm(join(deep, '..'), { recursive: true, force: true });
    }
  });

  it('a TMPDIR too long for a socket path: a put SIGKILLed while it waits leaves no key on disk', async () => {
    const repo = await createLockRepo({ pool: { claimed: ['lock-a'] } });
    const deep = join(await mkdtemp(join(tmpdir(), 'pool-long-')), 'x'.repeat(100));
    await mkdir(deep);
    try {
      const run = startScript('out', request(sshd, repo, '200ms'), {
        args: [await tempDir()],
        tmpdir: deep,
      });
      await run.waitForStderr(/waiting for lock/);
      // Nothing can clean up after SIGKILL: what the run wrote to disk stays there.
      run.child.kill('SIGKILL');
      await run.done;
      const keyLine = key.privateKey.split('\n')[1]!;
      const files = (await readdir(deep, { recursive: true, withFileTypes: true })).filter(
        (entry) => entry.isFile(),
      );
      for (const file of files) {
        const text = await readFile(join(file.parentPath, file.name), 'utf8');
        expect(text, join(file.parentPath, file.name)).not.toContain(keyLine);
      }
    } finally {
      await repo.cleanup();
      await rm(join(deep, '..'), { recursive: true, force: true });
    }
  });
});
