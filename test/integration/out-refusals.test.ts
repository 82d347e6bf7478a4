// Every put that cannot succeed is refused at once: exit 1, one clear line, nothing committed.
// In-process (run-command.ts): nothing here depends on the process.
import { chmod, mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { runCommand } from '../helpers/run-command.js';
import { buildFolder, refused, scratchDir } from '../helpers/steps.js';
import { source } from '../helpers/source.js';

let repo: LockRepo;
let tip: string;

beforeAll(async () => {
  repo = await createLockRepo({
    pool: { claimed: ['lock-c'], unclaimed: ['lock-a'] },
    'other-pool': { claimed: ['lock-x'] },
  });
  // A pool with claimed/ but no unclaimed/ folder.
  await repo.commit('half a pool', async (work) => {
    await mkdir(join(work, 'half', 'claimed'), { recursive: true });
    await writeFile(join(work, 'half', 'claimed', '.gitkeep'), '');
  });
  tip = await repo.tip();
});
afterAll(async () => repo.cleanup());

// Nothing any refusal does may reach the remote.
beforeEach(() => async () => {
  expect(await repo.tip()).toBe(tip);
  expect((await git(repo.bare, 'for-each-ref', '--format=%(refname)')).trim()).toBe(
    'refs/heads/master',
  );
});

async function out(
  params: Record<string, unknown>,
  options: { src?: string; source?: Record<string, unknown> } = {},
) {
  return runCommand('out', {
    stdin: { source: source(repo, options.source), params },
    args: [options.src ?? (await buildFolder())],
  });
}

describe('out refuses at once, committing nothing', () => {
  it('a pool folder that does not exist on the branch, naming the pools that do', async () => {
    const result = await out({ acquire: true }, { source: { pool: 'nope' } });
    // "half" has no unclaimed/ folder: not a pool.
    refused(
      result,
      'pool "nope" does not exist on branch "master" (expected folders nope/claimed/ and nope/unclaimed/); pools on the branch: "other-pool", "pool"; create it with: pool init --uri URI --branch master --pool nope --lock NAME',
    );
  });

  it('a pool without its unclaimed/ folder', async () => {
    const result = await out({ claim: 'lock-a' }, { source: { pool: 'half' } });
    refused(result, 'pool "half" does not exist on branch "master"');
  });

  it('a branch that does not exist', async () => {
    const result = await out({ acquire: true }, { source: { branch: 'no-such-branch' } });
    refused(result, `branch "no-such-branch" does not exist in ${repo.bare}`);
    // Refused, not retried as if the network had failed.
    expect(result.stderr).not.toContain('trying again');
  });

  it('a step folder that is missing', async () => {
    refused(
      await out({ release: 'missing-step' }),
      'invalid payload (release: step folder "missing-step" does not exist)',
    );
  });

  it.each([['../outside'], ['/etc'], ['a/../../outside']])(
    'a step folder outside the build folder: %j',
    async (step) => {
      refused(
        await out({ release: step }),
        `invalid payload (release: step folder "${step}" is outside the build's folder)`,
      );
    },
  );

  it('a step folder that is a symlink leading outside the build folder', async () => {
    const outside = await scratchDir();
    await writeFile(join(outside, 'name'), 'lock-c');
    const src = await buildFolder();
    await symlink(outside, join(src, 'sneaky'));
    refused(
      await out({ release: 'sneaky' }, { src }),
      `invalid payload (release: step folder "sneaky" is outside the build's folder)`,
    );
  });

  it('a step folder without a name file', async () => {
    const src = await buildFolder({ held: { metadata: '{}' } });
    refused(
      await out({ release: 'held' }, { src }),
      'error reading release: the step folder has no "name" file',
    );
  });

  it.each([[''], ['\n'], ['  \n\n']])('an empty name file: %j', async (name) => {
    const src = await buildFolder({ held: { name } });
    refused(
      await out({ remove: 'held' }, { src }),
      'error reading remove: the "name" file is empty',
    );
  });

  it('a name file naming something that is not a lock name', async () => {
    const src = await buildFolder({ held: { name: '../../README.md' } });
    refused(
      await out({ release: 'held' }, { src }),
      'error reading release: lock name "../../README.md" contains a path separator',
    );
  });

  it('a name file that is not UTF-8 text', async () => {
    const src = await buildFolder();
    await mkdir(join(src, 'held'));
    await writeFile(join(src, 'held', 'name'), Buffer.from([0x78, 0xff, 0x0a]));
    await writeFile(join(src, 'held', 'metadata'), '');
    refused(
      await out({ add: 'held' }, { src }),
      'error reading add: lock name "x\ufffd" is not UTF-8 text',
    );
  });

  it('releasing a lock that is unclaimed', async () => {
    const src = await buildFolder({ held: { name: 'lock-a' } });
    refused(
      await out({ release: 'held' }, { src }),
      'cannot release lock "lock-a": it is not claimed in pool "pool" (it is unclaimed)',
    );
  });

  it('releasing a lock that exists nowhere (or only in another pool)', async () => {
    const src = await buildFolder({ held: { name: 'lock-x' } });
    refused(
      await out({ release: 'held' }, { src }),
      'cannot release lock "lock-x": it does not exist in pool "pool"',
    );
  });

  it('removing a lock that is unclaimed', async () => {
    const src = await buildFolder({ held: { name: 'lock-a' } });
    refused(
      await out({ remove: 'held' }, { src }),
      'cannot remove lock "lock-a": it is not claimed in pool "pool" (it is unclaimed)',
    );
  });

  it.each([
    ['add', 'lock-a', 'unclaimed'],
    ['add', 'lock-c', 'claimed'],
    ['add_claimed', 'lock-a', 'unclaimed'],
    ['add_claimed', 'lock-c', 'claimed'],
  ])('%s of a name that exists (%s)', async (operation, name, state) => {
    const src = await buildFolder({ new: { name, metadata: '{}' } });
    refused(
      await out({ [operation]: 'new' }, { src }),
      `lock "${name}" already exists in pool "pool" (${state})`,
    );
  });

  it('adding without a metadata file', async () => {
    const src = await buildFolder({ new: { name: 'lock-new' } });
    refused(await out({ add: 'new' }, { src }), 'error reading add: new/metadata does not exist');
  });

  it.each(['check', 'check_unclaimed'])('%s of a lock that exists nowhere', async (operation) => {
    const src = await buildFolder({ want: { name: 'lock-nowhere' } });
    refused(
      await out({ [operation]: 'want' }, { src }),
      'lock "lock-nowhere" does not exist in pool "pool"',
    );
  });

  it('two operations in one put', async () => {
    const src = await buildFolder({ held: { name: 'lock-c' } });
    refused(
      await out({ acquire: true, release: 'held' }, { src }),
      'invalid payload (params has more than one operation: acquire, release; a put does exactly one)',
    );
  });

  it('a put without an operation, with the reference line', async () => {
    const result = await out({});
    refused(
      result,
      'invalid payload (missing acquire, release, remove, claim, add, add_claimed, update, check, or check_unclaimed)',
    );
  });

  it('a request missing its source fields, with every reference line at once', async () => {
    const result = await runCommand('out', {
      stdin: { source: { retry_delay: '1s' }, params: { acquire: true } },
      args: [await buildFolder()],
    });
    refused(result, 'invalid payload (missing uri)');
    expect(result.stderr).toBe(
      'invalid payload (missing uri)\ninvalid payload (missing branch)\ninvalid payload (missing pool)\n',
    );
  });

  it('input that is not JSON, without echoing it', async () => {
    const result = await runCommand('out', {
      stdin: '{"source": {"password": "hunter22"',
      args: [await buildFolder()],
    });
    refused(result, 'invalid payload (stdin is not valid JSON)');
    expect(result.stderr).not.toContain('hunter22');
  });
});

describe('a lock repository that refuses pushes', () => {
  it('fails at once with the remote’s reason instead of retrying for ever', async () => {
    const guarded = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    try {
      const hook = join(guarded.bare, 'hooks', 'pre-receive');
      await writeFile(
        hook,
        '#!/bin/sh\necho "GH006: Protected branch update failed" >&2\necho "  see the rules" >&2\nexit 1\n',
      );
      await chmod(hook, 0o755);
      const before = await guarded.tip();
      const result = await runCommand('out', {
        stdin: {
          source: { uri: guarded.bare, branch: 'master', pool: 'pool' },
          params: { acquire: true },
        },
        args: [await buildFolder()],
      });
      refused(
        result,
        'error: the lock repository refused the push to branch "master": pre-receive hook declined (remote: GH006: Protected branch update failed; see the rules)',
      );
      expect(result.stderr).not.toContain('trying again');
      expect(await guarded.tip()).toBe(before);
    } finally {
      await guarded.cleanup();
    }
  });
});

describe('a pool holding a file whose name is not UTF-8 text', () => {
  it('is never acquired: the other locks are, every time', async () => {
    const odd = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    try {
      await odd.commit('a lock named in Latin-1', async (work) => {
        const folder = Buffer.from(join(work, 'pool', 'unclaimed') + '/');
        await writeFile(Buffer.concat([folder, Buffer.from([0x63, 0x61, 0x66, 0xe9])]), 'm');
      });
      const start = await odd.tip();
      // Eight acquires from the same tip: a random pick among two would take the odd one in
      // eight tries all but once in 256.
      for (let i = 0; i < 8; i++) {
        await git(odd.bare, 'update-ref', 'refs/heads/master', start);
        const result = await runCommand('out', {
          stdin: {
            source: { uri: odd.bare, branch: 'master', pool: 'pool', retry_delay: '100ms' },
            params: { acquire: true, wait_timeout: '5s' },
          },
          args: [await buildFolder()],
        });
        expect(result.code, result.stderr).toBe(0);
        expect(JSON.parse(result.stdout).metadata).toContainEqual({
          name: 'lock_name',
          value: 'lock-a',
        });
      }
    } finally {
      await odd.cleanup();
    }
  });
});
