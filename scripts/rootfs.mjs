#!/usr/bin/env node
// A Debian root filesystem made with mmdebstrap from the packages given, as a tarball kept in a
// cache folder outside the repository (made again only when missing, or with --refresh). The
// image's stand-in base (scripts/image.mjs) and the tests that run the payload or the single
// executable under chroot start from one; .ci/run prepares those so CI does not wait for them.
//
//   node scripts/rootfs.mjs [--suite trixie] [--refresh] PACKAGE...   prints the tarball's path
//
// The mirror is DEBIAN_MIRROR, else the first Debian archive in /etc/apt/sources.list*, else
// deb.debian.org. The cache is POOL_RESOURCE_CACHE, else /var/cache/pool-resource for root and
// ~/.cache/pool-resource for others. Variant `apt`: Debian's essential packages and apt, so
// libc, libstdc++ and a shell are there as on any Debian image.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

export const DEFAULT_SUITE = 'trixie';

export function cacheFolder(env = process.env) {
  if (env.POOL_RESOURCE_CACHE) return resolve(env.POOL_RESOURCE_CACHE);
  return process.getuid?.() === 0
    ? '/var/cache/pool-resource'
    : join(homedir(), '.cache', 'pool-resource');
}

/** The Debian archive apt uses on this machine (deb822 `URIs:` or one-line `deb` entries). */
export function debianMirror(env = process.env) {
  if (env.DEBIAN_MIRROR) return env.DEBIAN_MIRROR;
  const files = ['/etc/apt/sources.list'];
  const dir = '/etc/apt/sources.list.d';
  if (existsSync(dir)) files.push(...readdirSync(dir).map((name) => join(dir, name)));
  for (const file of files) {
    if (!existsSync(file)) continue;
    const text = readFileSync(file, 'utf8');
    for (const match of text.matchAll(/^(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s+)?)(\S+)/gm)) {
      const uri = match[1].replace(/\/+$/, '');
      if (/\/debian$/.test(uri)) return uri;
    }
  }
  return 'http://deb.debian.org/debian';
}

export function rootfsPath(packages, suite = DEFAULT_SUITE, env = process.env) {
  const name = [suite, ...[...packages].sort()].join('-').replace(/[^a-zA-Z0-9.+-]/g, '_');
  return join(cacheFolder(env), `rootfs-${name}.tar`);
}

function run(command, args) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0
        ? resolvePromise()
        : reject(new Error(`${command} ${args.join(' ')} exited with ${code}`)),
    );
  });
}

/**
 * The tarball of a root filesystem holding `packages` (made now when not cached).
 * @param {{ packages: string[], suite?: string, refresh?: boolean }} options
 */
export async function debianRootfs({ packages, suite = DEFAULT_SUITE, refresh = false }) {
  const tarball = rootfsPath(packages, suite);
  if (existsSync(tarball) && !refresh) return tarball;
  await mkdir(cacheFolder(), { recursive: true });
  const partial = `${tarball}.partial-${process.pid}.tar`;
  try {
    await run('mmdebstrap', [
      '--quiet',
      '--variant=apt',
      `--include=${packages.join(',')}`,
      suite,
      partial,
      debianMirror(),
    ]);
    await rename(partial, tarball);
  } finally {
    await rm(partial, { force: true });
  }
  return tarball;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const { values, positionals } = parseArgs({
    options: { suite: { type: 'string', default: DEFAULT_SUITE }, refresh: { type: 'boolean' } },
    allowPositionals: true,
  });
  if (positionals.length === 0) {
    process.stderr.write('usage: node scripts/rootfs.mjs [--suite S] [--refresh] PACKAGE...\n');
    process.exit(2);
  }
  const started = Date.now();
  const tarball = await debianRootfs({
    packages: positionals,
    suite: values.suite,
    refresh: values.refresh,
  });
  process.stderr.write(`rootfs: ${tarball} (${((Date.now() - started) / 1000).toFixed(1)} s)\n`);
  process.stdout.write(`${tarball}\n`);
}
