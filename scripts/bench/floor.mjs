// @ts-check
// The plain-git floor: what one claim costs with git alone, with git's defaults (wire protocol
// v2) and with the wire protocol v0 that the resource speaks over git:// (see wireProtocolVersion
// in src/git/environment.ts): the second is the fair floor for the resource's figures.
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { performance } from 'node:perf_hooks';
import { git } from './process.mjs';
import { BRANCH, POOL } from './repository.mjs';

export async function plainGitClaim(url, work, protocol = []) {
  const started = performance.now();
  await git(tmpdir(), ...protocol, 'clone', '--quiet', '--depth=1', '--branch', BRANCH, url, work);
  const names = (await git(work, 'ls-tree', '--name-only', 'HEAD', `${POOL}/unclaimed/`)).stdout
    .split('\n')
    .filter((path) => path && !path.endsWith('/.gitkeep'));
  const name = names[0].slice(`${POOL}/unclaimed/`.length);
  await git(work, 'mv', `${POOL}/unclaimed/${name}`, `${POOL}/claimed/${name}`);
  await git(work, 'commit', '--quiet', '-m', `claiming: ${name}`);
  await git(work, ...protocol, 'push', '--quiet', 'origin', `HEAD:refs/heads/${BRANCH}`);
  const ms = performance.now() - started;
  // Put it back (not measured).
  await git(work, 'mv', `${POOL}/claimed/${name}`, `${POOL}/unclaimed/${name}`);
  await git(work, 'commit', '--quiet', '-m', `unclaiming: ${name}`);
  await git(work, 'push', '--quiet', 'origin', `HEAD:refs/heads/${BRANCH}`);
  await rm(work, { recursive: true, force: true });
  return ms;
}
