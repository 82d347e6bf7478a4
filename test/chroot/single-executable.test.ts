// The single executable (`npm run binary`) where a task image without Node would run it: a Debian
// root filesystem with git and CA certificates and no Node, entered with chroot. It takes and
// gives back locks through its links and its first argument, is its own SSH program, and stops
// within a second on SIGTERM with nothing left behind.
import { mkdtemp, readdir } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { basename, join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildBinary } from '../../scripts/binary.mjs';
import { processesWithTmpdir } from '../helpers/leftover-processes.js';
import { runLockCycle } from '../helpers/lock-cycle.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { extractRootfs, type Rootfs } from '../helpers/rootfs.js';
import { runScript, startScript } from '../helpers/run-script.js';
import { generateKey, startSshd } from '../helpers/sshd.js';
import { stop } from '../helpers/stopping.js';
import { renamed, source as lockSource } from '../helpers/source.js';

/** Where the executable and its links live inside the root filesystem. */
const INSTALLED = '/opt/resource';
/** What a task image has on PATH; no node anywhere. */
const ENV = { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/root' };

let rootfs: Rootfs;
let repo: LockRepo | undefined;

beforeAll(async () => {
  rootfs = await extractRootfs(['git', 'ca-certificates']);
  await buildBinary({ outDir: join(rootfs.path, INSTALLED) });
}, 600_000);

afterAll(async () => {
  await rootfs?.remove();
});

afterEach(async () => {
  await repo?.cleanup();
  repo = undefined;
});

/** Runs inside the root filesystem, where the lock repository's folder is at its own path. */
function inside(extra: { args?: string[]; env?: Record<string, string> } = {}) {
  return {
    assets: INSTALLED,
    prefix: rootfs.prefix(repo ? [repo.root] : []),
    ...extra,
    env: { ...ENV, ...extra.env },
  };
}

describe('the single executable in a root filesystem without Node', () => {
  it('has git and CA certificates to work with, and no node', () => {
    expect(existsSync(join(rootfs.path, 'usr/bin/git'))).toBe(true);
    expect(existsSync(join(rootfs.path, 'etc/ssl/certs/ca-certificates.crt'))).toBe(true);
    for (const dir of ['usr/local/bin', 'usr/bin', 'bin']) {
      expect(existsSync(join(rootfs.path, dir, 'node'))).toBe(false);
      expect(existsSync(join(rootfs.path, dir, 'nodejs'))).toBe(false);
    }
  });

  it('checks, acquires, fetches and releases a lock through its links', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    const source = lockSource(repo);
    await runLockCycle(source, repo, inside());
  });

  it('reaches an SSH lock repository as its own SSH program (no OpenSSH client inside)', async () => {
    expect(existsSync(join(rootfs.path, 'usr/bin/ssh'))).toBe(false);
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    const keys = await mkdtemp(join(repo.root, 'keys-'));
    const key = await generateKey(keys, 'deploy', { type: 'ed25519' });
    const sshd = await startSshd([key.publicKey]);
    try {
      const source = lockSource(sshd.url(repo.bare), {
        private_key: key.privateKey,
        // Pinned: without it, every run warns that it accepted the host key unchecked.
        known_hosts: sshd.knownHostsLine,
      });
      await runLockCycle(source, repo, inside());
      // One login for each run that reached the server: its git commands shared it.
      expect(sshd.log()).toMatch(/Accepted publickey/);
      // Where git_config may send git elsewhere, git runs its SSH program: the executable itself.
      await runLockCycle({ ...source, ...renamed(source.uri) }, repo, inside());
    } finally {
      await sshd.stop();
    }
  });

  it('takes the command as its first argument: pool claim, status and release', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    const flags = ['--uri', repo.bare, '--branch', repo.branch, '--pool', 'pool'];
    const pool = (...args: string[]) =>
      runScript('pool-resource', '', inside({ args: ['pool', ...args, ...flags] }));

    const claimed = await pool('claim', 'lock-a', '--by', 'deploy job');
    expect(claimed.stderr).toContain('claimed');
    expect(claimed.code).toBe(0);
    expect(await repo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });
    const status = await pool('status');
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(/lock-a\s+claimed\s+deploy job/);
    const released = await pool('release', 'lock-a');
    expect(released.code).toBe(0);
    expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a'] });

    const checked = await runScript(
      'pool-resource',
      { source: { uri: repo.bare, branch: repo.branch, pool: 'pool' } },
      inside({ args: ['check'] }),
    );
    expect(checked.code).toBe(0);
    expect(JSON.parse(checked.stdout)).toEqual([{ ref: await repo.tip() }]);

    const unknown = await runScript('pool-resource', '', inside({ args: ['acquire'] }));
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toBe(
      'usage: pool-resource check|in|out|pool [ARGUMENTS], or a link named check, in, out or pool to it\n',
    );
  });

  it('ends a put waiting for a lock within 1 s of SIGTERM, leaving nothing behind', async () => {
    repo = await createLockRepo({ pool: { claimed: ['lock-a'] } });
    const before = await repo.tip();
    const source = lockSource(repo);
    const build = await mkdtemp(join(repo.root, 'put-'));
    // The run's own TMPDIR inside the root filesystem marks every process it starts.
    const runTmp = await mkdtemp(join(rootfs.path, 'tmp', 'run-'));
    const tmpInside = `/tmp/${basename(runTmp)}`;
    const running = startScript(
      'out',
      { source, params: { acquire: true } },
      inside({ args: [build], env: { TMPDIR: tmpInside } }),
    );
    await running.waitForStderr(/waiting for lock/);

    const stopped = await stop(running, 'SIGTERM');
    expect(stopped.code, stopped.stderr).toBe(143);
    expect(stopped.exitAfterSignal).toBeLessThan(1_000);
    expect(stopped.stdout).toBe('');
    expect(await processesWithTmpdir(tmpInside)).toEqual([]);
    expect(await readdir(runTmp)).toEqual([]);
    expect(await repo.tip()).toBe(before);
    expect(await repo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });
    // Its place in the waiting line is gone too, or (when the stop's budget ran out first, as
    // under heavy load) it says so and the puts behind it pass the entry once it is stale.
    const line = await git(repo.bare, 'for-each-ref', 'refs/pool-resource/');
    if (line !== '') {
      expect(stopped.stderr).toMatch(
        /could not take this put out of the waiting line .*: the puts behind it will, after /,
      );
    }
  });
});
