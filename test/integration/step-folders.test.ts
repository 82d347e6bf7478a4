// What a put reads from its step folders: regular files inside SRC, reached without a symlink,
// at most 1 MiB. Anything else is refused at once with one line naming the file, and nothing is
// committed (a symlinked `metadata` would otherwise publish whatever it points at).
import { execFile } from 'node:child_process';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLockRepo, type LockRepo } from '../helpers/lock-repo.js';
import { runScript } from '../helpers/run-script.js';
import { buildFolder, lockFile, refused, scratchDir, succeeded } from '../helpers/steps.js';

const exec = promisify(execFile);
const MiB = 1024 * 1024;

let repo: LockRepo;
let tip: string;

beforeAll(async () => {
  repo = await createLockRepo({ pool: { claimed: ['lock-c'], unclaimed: ['lock-a'] } });
  tip = await repo.tip();
});
afterAll(async () => repo?.cleanup());

function out(params: Record<string, unknown>, src: string) {
  return runScript(
    'out',
    { source: { uri: repo.bare, branch: repo.branch, pool: 'pool' }, params },
    { args: [src] },
  );
}

/** A file outside the build folder that no put may ever read. */
async function secretFile(): Promise<string> {
  const path = join(await scratchDir('pool-secret-'), 'secret');
  await writeFile(path, 'the-secret-value\n');
  return path;
}

describe('step folder files', () => {
  it('refuses a symlinked name file', async () => {
    const src = await buildFolder({ lock: {} });
    await writeFile(join(src, 'real-name'), 'lock-c\n');
    await symlink(join(src, 'real-name'), join(src, 'lock', 'name'));
    refused(
      await out({ release: 'lock' }, src),
      /^error reading release: lock\/name is a symbolic link: step folder files are read only as regular files$/m,
    );
    expect(await repo.tip()).toBe(tip);
  });

  it('refuses a symlinked metadata file, and never commits what it points at', async () => {
    const src = await buildFolder({ lock: { name: 'new-lock\n' } });
    await symlink(await secretFile(), join(src, 'lock', 'metadata'));
    for (const operation of ['add', 'add_claimed', 'update']) {
      const result = await out({ [operation]: 'lock' }, src);
      refused(result, `error reading ${operation}: lock/metadata is a symbolic link`);
      expect(result.stderr).not.toContain('the-secret-value');
    }
    expect(await repo.tip()).toBe(tip);
    expect(await lockFile(repo, 'pool/unclaimed/new-lock')).toBeUndefined();
  });

  it('refuses /dev/zero behind a symlink at once', async () => {
    const src = await buildFolder({ lock: { name: 'new-lock\n' } });
    await symlink('/dev/zero', join(src, 'lock', 'metadata'));
    const result = await out({ add: 'lock' }, src);
    refused(result, 'error reading add: lock/metadata is a symbolic link');
    expect(result.exitMs).toBeLessThan(5_000);
  });

  it('refuses a FIFO at once instead of waiting for a writer', async () => {
    const src = await buildFolder({ lock: { name: 'new-lock\n' } });
    await exec('mkfifo', [join(src, 'lock', 'metadata')]);
    const result = await out({ update: 'lock' }, src);
    refused(result, /^error reading update: lock\/metadata is a FIFO, not a regular file$/m);
    expect(result.exitMs).toBeLessThan(5_000);

    const named = await buildFolder({ held: {} });
    await exec('mkfifo', [join(named, 'held', 'name')]);
    refused(
      await out({ release: 'held' }, named),
      'error reading release: held/name is a FIFO, not a regular file',
    );
  });

  it('refuses a folder where the name file should be', async () => {
    const src = await buildFolder({ lock: {} });
    await mkdir(join(src, 'lock', 'name'));
    refused(
      await out({ remove: 'lock' }, src),
      'error reading remove: lock/name is a folder, not a regular file',
    );
  });

  it('refuses metadata over 1 MiB in one line, and takes exactly 1 MiB', async () => {
    const big = await buildFolder({
      lock: { name: 'big-lock\n', metadata: Buffer.alloc(2 * MiB, 'm') },
    });
    const result = await out({ add: 'lock' }, big);
    refused(
      result,
      /^error reading add: lock\/metadata is larger than 1 MiB \(the most a step file may hold\)$/m,
    );
    expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(await repo.tip()).toBe(tip);

    const exact = Buffer.alloc(MiB, 'e');
    const fits = await buildFolder({ lock: { name: 'big-lock\n', metadata: exact } });
    succeeded(await out({ add: 'lock' }, fits));
    expect((await lockFile(repo, 'pool/unclaimed/big-lock'))?.equals(exact)).toBe(true);
    tip = await repo.tip();
  });
});

describe('step folders', () => {
  it('refuses a step folder that is a symlink out of SRC', async () => {
    const outside = await scratchDir();
    await writeFile(join(outside, 'name'), 'lock-c\n');
    const src = await buildFolder();
    await symlink(outside, join(src, 'lock'));
    refused(
      await out({ release: 'lock' }, src),
      `invalid payload (release: step folder "lock" is outside the build's folder)`,
    );
  });

  it('refuses a step folder reached through a symlink inside SRC', async () => {
    const src = await buildFolder({ real: { name: 'lock-c\n' } });
    await symlink(join(src, 'real'), join(src, 'lock'));
    await mkdir(join(src, 'outer'));
    await symlink(src, join(src, 'outer', 'link'));
    for (const step of ['lock', 'outer/link/real']) {
      refused(
        await out({ release: step }, src),
        `invalid payload (release: step folder "${step}" is reached through a symbolic link: step folders are read only as folders)`,
      );
    }
    expect(await repo.tip()).toBe(tip);
  });

  it('still reads a nested step folder and a SRC that is itself a symlink', async () => {
    const src = await buildFolder({ 'outputs/lock': { name: 'lock-c\n' } });
    const linked = join(await scratchDir(), 'src');
    await symlink(src, linked);
    const result = await out({ release: 'outputs/lock' }, linked);
    succeeded(result);
    expect(result.stderr).not.toContain('error');
    tip = await repo.tip();
  });
});
