// A Debian root filesystem for a test, from the tarball scripts/rootfs.mjs keeps in its cache
// (made with mmdebstrap when missing; .ci/run prepares the ones the tests use), extracted to a
// temporary folder and entered with chroot, as a task image would run a program. Each run gets
// its own mount namespace: /proc (Node reads /proc/self/exe) and the host folders it is given,
// at the same paths, vanish with it.
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);
const ROOTFS_SCRIPT = resolve(import.meta.dirname, '../../scripts/rootfs.mjs');

/**
 * Mounts /proc and each folder named up to `--`, then runs the rest as root $1's program with the
 * PATH it was given (this machine's PATH finds chroot and mount).
 */
const ENTER = `root=$1; shift; inside=$PATH; PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc "$root/proc" || exit 125
while [ "$1" != -- ]; do mkdir -p "$root$1" && mount --bind "$1" "$root$1" || exit 125; shift; done
shift; chroot=$(command -v chroot); PATH=$inside; exec "$chroot" "$root" "$@"`;

export interface Rootfs {
  /** The extracted root folder on this machine. */
  path: string;
  /** A RunOptions prefix that starts a program inside, with `binds` visible at the same paths. */
  prefix(binds?: string[]): string[];
  remove(): Promise<void>;
}

export async function extractRootfs(packages: string[]): Promise<Rootfs> {
  const { stdout } = await exec(process.execPath, [ROOTFS_SCRIPT, ...packages], {
    maxBuffer: 1024 * 1024,
  });
  const path = await mkdtemp(join(tmpdir(), 'pool-rootfs-'));
  await exec('tar', ['-C', path, '-xf', stdout.trim()]);
  return {
    path,
    prefix: (binds = []) => [
      'unshare',
      '--mount',
      '--propagation',
      'private',
      '--',
      '/bin/sh',
      '-c',
      ENTER,
      'enter',
      path,
      ...binds,
      '--',
    ],
    remove: () => rm(path, { recursive: true, force: true }),
  };
}
