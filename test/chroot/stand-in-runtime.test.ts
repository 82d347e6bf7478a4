// The payload (`npm run package`, the image's /opt/resource) in the runtime the Dockerfile makes,
// short of the image: a Debian trixie root filesystem with Debian's nodejs, git and CA
// certificates, entered with chroot. Its git and libcurl are newer than this machine's and word
// their failures differently (an untrusted certificate above all), so the scripts run there over
// every transport. `npm run image` builds and checks the image itself.
import { mkdtemp } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { packageResource } from '../../scripts/package.mjs';
import { startGitDaemon } from '../helpers/git-daemon.js';
import { startHttpGit } from '../helpers/http-git.js';
import { runLockCycle } from '../helpers/lock-cycle.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { extractRootfs, type Rootfs } from '../helpers/rootfs.js';
import { runScript, startScript } from '../helpers/run-script.js';
import { generateKey, startSshd } from '../helpers/sshd.js';
import { stop } from '../helpers/stopping.js';
import { renamed, source } from '../helpers/source.js';

const INSTALLED = '/opt/resource';
const ENV = { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/root' };

let rootfs: Rootfs;
let repo: LockRepo | undefined;

beforeAll(async () => {
  rootfs = await extractRootfs(['nodejs', 'git', 'ca-certificates']);
  await packageResource({ outDir: join(rootfs.path, INSTALLED) });
}, 600_000);

afterAll(async () => {
  await rootfs?.remove();
});

afterEach(async () => {
  await repo?.cleanup();
  repo = undefined;
});

function inside(extra: { args?: string[] } = {}) {
  return { assets: INSTALLED, prefix: rootfs.prefix(repo ? [repo.root] : []), env: ENV, ...extra };
}

describe("the payload on Debian trixie's node and git", () => {
  it('has Debian node, git and CA certificates, and no OpenSSH client', () => {
    for (const file of ['usr/bin/node', 'usr/bin/git', 'etc/ssl/certs/ca-certificates.crt'])
      expect(existsSync(join(rootfs.path, file)), file).toBe(true);
    expect(existsSync(join(rootfs.path, 'usr/bin/ssh'))).toBe(false);
  });

  it('takes and gives back a lock over a local path', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    await runLockCycle(source(repo.bare), repo, inside());
  });

  it('takes and gives back a lock over git://', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    const daemon = await startGitDaemon(repo.root);
    try {
      await runLockCycle(source(daemon.url(repo.bare)), repo, inside());
    } finally {
      await daemon.stop();
    }
  });

  it('takes and gives back a lock over SSH, on channels of its own connection and through its own SSH program', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    const key = await generateKey(await mkdtemp(join(repo.root, 'keys-')), 'deploy', {
      type: 'ed25519',
    });
    const sshd = await startSshd([key.publicKey]);
    try {
      const uri = sshd.url(repo.bare);
      // Pinned: without it, every run warns that it accepted the host key unchecked.
      const pinned = { private_key: key.privateKey, known_hosts: sshd.knownHostsLine };
      await runLockCycle(source(uri, pinned), repo, inside());
      // Where git_config may send git elsewhere, git runs the resource's SSH program.
      await runLockCycle(source(uri, { ...pinned, ...renamed(uri) }), repo, inside());
    } finally {
      await sshd.stop();
    }
  });

  it('refuses a self-signed certificate in libcurl 8 GnuTLS words, with the hint', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    const https = await startHttpGit({
      projectRoot: repo.root,
      username: 'locksmith',
      password: 'secret',
      tls: true,
    });
    try {
      const credentials = { username: 'locksmith', password: 'secret' };
      const refused = await runScript(
        'check',
        { source: source(https.url(repo.bare), credentials) },
        inside(),
      );
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(
        /^error.*server verification failed: certificate signer not trusted.*\(set skip_ssl_verification: true to accept it\)\n$/,
      );
      const accepted = source(https.url(repo.bare), {
        ...credentials,
        skip_ssl_verification: true,
      });
      await runLockCycle(accepted, repo, inside());
    } finally {
      await https.stop();
    }
  });

  it.each(['a local path', 'SSH'])(
    'stops a put waiting for a lock over %s within 1 s of SIGTERM, taking nothing',
    async (transport) => {
      repo = await createLockRepo({ pool: { claimed: ['lock-a'] } });
      const before = await repo.tip();
      const build = await mkdtemp(join(repo.root, 'put-'));
      const key = await generateKey(await mkdtemp(join(repo.root, 'keys-')), 'deploy', {
        type: 'ed25519',
      });
      const sshd = transport === 'SSH' ? await startSshd([key.publicKey]) : undefined;
      try {
        const uri = sshd ? sshd.url(repo.bare) : repo.bare;
        const running = startScript(
          'out',
          {
            source: source(uri, { private_key: key.privateKey, known_hosts: sshd?.knownHostsLine }),
            params: { acquire: true },
          },
          inside({ args: [build] }),
        );
        await running.waitForStderr(/waiting for lock/);
        const stopped = await stop(running, 'SIGTERM');
        expect(stopped.code, stopped.stderr).toBe(143);
        expect(stopped.exitAfterSignal).toBeLessThan(1_000);
        expect(await repo.tip()).toBe(before);
        // It leaves the waiting line, or (when the stop's budget ran out first, as under heavy
        // load) says so and the puts behind it pass its entry once it is stale.
        const line = await git(repo.bare, 'for-each-ref', 'refs/pool-resource/');
        if (line !== '') {
          expect(stopped.stderr).toMatch(
            /could not take this put out of the waiting line .*: the puts behind it will, after /,
          );
        }
      } finally {
        await sshd?.stop();
      }
    },
  );
});
