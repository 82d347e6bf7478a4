// The pushes the run makes itself on receive-pack's connection to git daemon (git/own-push.ts):
// what the server answers reaches the put as git's push would have told it, a branch moved under
// the push is a lost race, and a push the run would not make as git does is left to git with
// nothing sent.
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { daemonRequest, daemonTarget } from '../../src/git/daemon-refs.js';
import { readAdvertisement } from '../../src/git/daemon-push.js';
import { ownPush, ownPushUpdates, type Advertised } from '../../src/git/own-push.js';
import { objectId, type PackedObject } from '../../src/git/pack-objects.js';
import { classifyPush } from '../../src/git/push-outcome.js';
import { servedLockRepo } from '../helpers/git-daemon.js';
import { git } from '../helpers/lock-repo.js';
import { runCommand } from '../helpers/run-command.js';
import { source } from '../helpers/source.js';
import { buildFolder, otherClone, protectBranch, refused, HOOK_REFUSAL } from '../helpers/steps.js';

const served = servedLockRepo({ unclaimed: ['lock-a', 'lock-b'] }, true);

/** A receive-pack connection to the repository, its advertisement read as a push reads it. */
async function advertised(): Promise<Advertised> {
  const target = daemonTarget(served.url)!;
  const socket = connect({ host: target.host, port: target.port });
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(daemonRequest('git-receive-pack', target));
  return (await readAdvertisement(socket, new AbortController().signal))!;
}

/** A commit on `parent` with its tree, as the run builds one: its object. */
async function commitOn(parent: string, message: string): Promise<PackedObject> {
  const tree = await git(served.repo.bare, 'rev-parse', `${parent}^{tree}`);
  const text =
    `tree ${tree.trim()}\nparent ${parent}\n` +
    `author A <a@example.com> 1796400000 +0000\ncommitter A <a@example.com> 1796400000 +0000\n\n${message}\n`;
  const data = Buffer.from(text);
  return { id: objectId('commit', data), type: 'commit', data };
}

const signal = new AbortController().signal;
const push = (...refspecs: string[]) => ['push', '--porcelain', '--', 'fd::3', ...refspecs];

describe('a push the run makes itself over git://', () => {
  it('lands a commit it sends, as git would have said', async () => {
    const tip = (await served.repo.tip()).trim();
    const commit = await commitOn(tip, 'pushed by the run');
    const result = await ownPush(
      push(`${commit.id}:refs/heads/master`),
      await advertised(),
      [commit],
      signal,
    );
    expect(result?.exitCode).toBe(0);
    expect(classifyPush(result!.stdout.toString(), 'refs/heads/master')).toBe('pushed');
    expect((await served.repo.tip()).trim()).toBe(commit.id);
    await git(served.repo.bare, 'fsck', '--strict', '--no-dangling');
  });

  it('is a lost race where the branch moved after the advertisement', async () => {
    const tip = (await served.repo.tip()).trim();
    const commit = await commitOn(tip, 'made on the old tip');
    const connection = await advertised();
    await otherClone(served.repo).claim('lock-b');
    const moved = (await served.repo.tip()).trim();
    const result = await ownPush(
      push(`${commit.id}:refs/heads/master`),
      connection,
      [commit],
      signal,
    );
    expect(result?.exitCode).toBe(1);
    expect(classifyPush(result!.stdout.toString(), 'refs/heads/master')).toBe('rejected');
    expect((await served.repo.tip()).trim()).toBe(moved);
  });

  it('creates and deletes a line entry at a commit the server has, sending no object', async () => {
    const tip = (await served.repo.tip()).trim();
    const entry = 'refs/pool-resource/waiting/master/pool/1-100-entry';
    const created = await ownPush(push(`+${tip}:${entry}`), await advertised(), [], signal);
    expect(created?.stdout.toString()).toContain(`*\t${tip}:${entry}\t[new reference]`);
    expect((await git(served.repo.bare, 'rev-parse', entry)).trim()).toBe(tip);
    const deleted = await ownPush(push(`:${entry}`), await advertised(), [], signal);
    expect(classifyPush(deleted!.stdout.toString(), entry)).toBe('pushed');
    expect(await git(served.repo.bare, 'for-each-ref', 'refs/pool-resource')).toBe('');
  });

  it('quotes what the hook that refused it said, as git does', async () => {
    await protectBranch(served.repo);
    const result = await runCommand('out', {
      stdin: { source: source(served.repo, { uri: served.url }), params: { acquire: true } },
      args: [await buildFolder()],
    });
    refused(result, `${HOOK_REFUSAL} (remote: branch master is protected)`);
  });
});

describe('a push the run leaves to git', () => {
  const tip = 'a'.repeat(40);
  const refs = new Map([['refs/heads/master', tip]]);
  const commit: PackedObject = {
    id: 'c'.repeat(40),
    type: 'commit',
    data: Buffer.from(`tree ${'e'.repeat(40)}\nparent ${tip}\n\nclaiming: lock-a\n`),
  };

  it.each([
    ['a commit neither sent nor advertised', push(`${'d'.repeat(40)}:refs/heads/master`)],
    ['a ref already where it goes', push(`${tip}:refs/heads/master`)],
    ['a deletion of a ref not there', push(':refs/pool-resource/waiting/gone')],
    ['a refspec naming a ref, not an id', push('HEAD:refs/heads/master')],
    [
      'another option',
      ['push', '--porcelain', '--force', '--', 'fd::3', `${commit.id}:refs/heads/master`],
    ],
  ])('%s', (_, args) => {
    expect(ownPushUpdates(args, refs, [commit])).toBeUndefined();
  });

  it('makes a fast-forward through the commits sent', () => {
    const moved = new Map([['refs/heads/master', 'b'.repeat(40)]]);
    expect(ownPushUpdates(push(`${commit.id}:refs/heads/master`), refs, [commit])).toBeDefined();
    expect(ownPushUpdates(push(`${commit.id}:refs/heads/master`), moved, [commit])).toBeUndefined();
  });
});
