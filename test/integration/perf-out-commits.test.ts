import { createHash } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { appendCommits, otherPoolCommits } from '../helpers/long-history.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { runScript, tempDir } from '../helpers/run-script.js';
import { source } from '../helpers/source.js';

let repo: LockRepo;
afterEach(async () => repo?.cleanup());

async function step(name: string, metadata?: Buffer | string): Promise<string> {
  const src = await tempDir();
  await mkdir(join(src, 'lock'));
  await writeFile(join(src, 'lock', 'name'), `${name}\n`);
  if (metadata !== undefined) await writeFile(join(src, 'lock', 'metadata'), metadata);
  return src;
}

async function put(params: Record<string, unknown>, src: string, pool = 'pool', extra = {}) {
  const result = await runScript(
    'out',
    { source: source(repo, { pool, ...extra }), params },
    { args: [src] },
  );
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as { version: { ref: string } };
}

describe('out writes its commits from the branch tip alone', () => {
  it('moves, adds, updates and removes locks with unusual names, byte for byte', async () => {
    const pool = 'the pool';
    const name = 'lock "one" é ü';
    repo = await createLockRepo({ [pool]: { unclaimed: [name] }, other: { unclaimed: ['x'] } });
    // A long history does not matter: only the tip is fetched.
    await appendCommits(repo.bare, repo.branch, otherPoolCommits('other', 'x', 500));

    const claimed = await put({ claim: name }, await tempDir(), pool);
    expect(claimed.version.ref).toBe(await repo.tip());
    expect(await repo.state(pool)).toEqual({ claimed: [name], unclaimed: [] });
    await put({ release: 'lock' }, await step(name), pool);
    expect(await repo.state(pool)).toEqual({ claimed: [], unclaimed: [name] });

    const bytes = Buffer.from([0, 0xff, 0x80, 10, 13, 10, 0]);
    await put({ add: 'lock' }, await step('second lock', bytes), pool);
    // Compared by object id: git's own hash of exactly these bytes.
    const stored = await git(
      repo.bare,
      'rev-parse',
      `${repo.branch}:${pool}/unclaimed/second lock`,
    );
    const expected = createHash('sha1')
      .update(`blob ${bytes.length}\0`)
      .update(bytes)
      .digest('hex');
    expect(stored.trim()).toBe(expected);

    const updated = await put({ update: 'lock' }, await step(name, 'new metadata\n'), pool);
    expect(updated.version.ref).toBe(await repo.tip());
    // Same metadata again: nothing to commit, the answer is the commit that wrote it.
    const same = await put({ update: 'lock' }, await step(name, 'new metadata\n'), pool);
    expect(same.version.ref).toBe(updated.version.ref);

    await put({ claim: name }, await tempDir(), pool);
    await put({ remove: 'lock' }, await step(name), pool);
    expect(await repo.state(pool)).toEqual({ claimed: [], unclaimed: ['second lock'] });
    expect((await repo.subjects()).slice(0, 6)).toEqual([
      `removing: ${name}`,
      `claiming: ${name}`,
      `updating: ${name}`,
      'adding unclaimed: second lock',
      `unclaiming: ${name}`,
      `claiming: ${name}`,
    ]);
  });

  it('commits as the git_config identity, with the message as written', async () => {
    repo = await createLockRepo({ pool: { unclaimed: ['a'] } });
    await put({ acquire: true }, await tempDir(), 'pool', {
      git_config: [
        { name: 'user.name', value: 'Pool Bot' },
        { name: 'user.email', value: 'pool-bot@example.test' },
      ],
    });
    const [author, committer, body] = (
      await git(repo.bare, 'log', '-1', '--format=%an <%ae>%x00%cn <%ce>%x00%B', repo.branch)
    ).split('\0');
    expect(author).toBe('Pool Bot <pool-bot@example.test>');
    expect(committer).toBe('Pool Bot <pool-bot@example.test>');
    expect(body).toMatch(/^claiming: a\n\nBuild URL: /);

    await put({ release: 'lock' }, await step('a'));
    const defaults = await git(repo.bare, 'log', '-1', '--format=%cn <%ce>', repo.branch);
    expect(defaults.trim()).toBe('CI Pool Resource <ci-pool@localhost>');
  });
});
