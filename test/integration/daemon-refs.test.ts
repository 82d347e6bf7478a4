// A put waiting on a git:// lock repository looks at the refs without git: one connection to git
// daemon per look, as git's ls-remote, asking protocol v2's ls-refs for the branch and the line
// only. Against a real git daemon on 127.0.0.1.

import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { daemonRefsFor, daemonTarget } from '../../src/git/daemon-refs.js';
import { fakeDaemons } from '../helpers/fake-daemon.js';
import { startGitDaemon, type GitDaemon } from '../helpers/git-daemon.js';
import { createLockRepo, type LockRepo } from '../helpers/lock-repo.js';
import { LINE_ENTRY, LOOKED, sha256Repository, withHostedRefs } from '../helpers/looked-refs.js';

let repo: LockRepo;
let daemon: GitDaemon;
let lineTip: string;

beforeAll(async () => {
  repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
  // A hosted repository advertises a pair of refs per pull request.
  lineTip = await withHostedRefs(repo, 300);
  daemon = await startGitDaemon(repo.root);
});

afterAll(async () => {
  await daemon?.stop();
  await repo?.cleanup();
});

const fakes = fakeDaemons();
afterEach(() => fakes.closeAll());

const looks = (uri: string, signal = new AbortController().signal) =>
  daemonRefsFor({ uri, gitTimeoutMs: 60_000 }, signal)!;

/** The connections git daemon saw that asked for protocol v2 (git itself asks v0 over git://). */
const v2Sessions = () => daemon.log().match(/"protocol": version=2/g)?.length ?? 0;

describe('git:// looks', () => {
  it('ask only the branch and the line, one connection each, and see every change', async () => {
    const refs = looks(daemon.url(repo.bare));
    const expected = async () => [
      { id: await repo.tip(), ref: 'refs/heads/master' },
      { id: lineTip, ref: LINE_ENTRY },
    ];
    const before = v2Sessions();
    // Protocol v2's answers are not filtered here: a pull request's ref would show.
    for (let i = 0; i < 3; i++) expect(await refs.listRefs(LOOKED)).toEqual(await expected());
    await repo.commit('unclaiming: nothing', async () => undefined);
    expect(await refs.listRefs(LOOKED)).toEqual(await expected());
    expect(refs.usable).toBe(true);
    expect(v2Sessions() - before).toBe(4);
  });

  it('a sha256 repository: the first look learns its object format and asks again in it', async () => {
    const { bare, tip } = await sha256Repository(repo.root);
    const refs = looks(daemon.url(bare));
    for (let i = 0; i < 3; i++)
      expect(await refs.listRefs(LOOKED)).toEqual([{ id: tip, ref: 'refs/heads/master' }]);
    expect(refs.usable).toBe(true);
  });

  it('a repository that is not there: the looks end for the run, and git is asked', async () => {
    const refs = looks(daemon.url(join(repo.root, 'missing.git')));
    await expect(refs.listRefs(LOOKED)).rejects.toThrow();
    expect(refs.usable).toBe(false);
  });

  it('a server that speaks only v0: its advertisement, filtered here', async () => {
    // What git daemon before protocol v2 answers: the advertisement, whatever was asked.
    const tip = await repo.tip();
    const advertisement = [
      `${tip} refs/heads/master\0multi_ack\n`,
      `${tip} refs/pull/1/head\n`,
      `${lineTip} ${LOOKED[1]}1-1000-abc\n`,
    ].map((line) => `${(Buffer.byteLength(line) + 4).toString(16).padStart(4, '0')}${line}`);
    const uri = await fakes.start((socket) => socket.end(`${advertisement.join('')}0000`));
    const refs = looks(uri);
    for (let i = 0; i < 2; i++)
      expect(await refs.listRefs(LOOKED)).toEqual([
        { id: tip, ref: 'refs/heads/master' },
        { id: lineTip, ref: LINE_ENTRY },
      ]);
  });

  it('a stop ends a look in flight at once', async () => {
    const uri = await fakes.start(() => undefined);
    const run = new AbortController();
    const refs = looks(uri, run.signal);
    const look = refs.listRefs(LOOKED);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const stopped = Date.now();
    run.abort();
    await expect(look).rejects.toThrow(/cancelled/);
    expect(Date.now() - stopped).toBeLessThan(500);
    expect(refs.usable).toBe(false);
  });

  it('an answer that never ends is cut at 16 MiB', async () => {
    const block = Buffer.alloc(64 * 1024, 'y');
    const uri = await fakes.start((socket) => {
      const write = () => {
        while (!socket.destroyed && socket.write(block));
        if (!socket.destroyed) socket.once('drain', write);
      };
      socket.on('error', () => undefined);
      write();
    });
    const refs = looks(uri);
    await expect(refs.listRefs(LOOKED)).rejects.toThrow(/the answer is over 16777216 bytes/);
    expect(refs.usable).toBe(false);
  });

  it('reads the URI as git does', () => {
    expect(daemonTarget('git://host/srv/locks.git')).toEqual({
      host: 'host',
      port: 9418,
      hostHeader: 'host',
      path: '/srv/locks.git',
    });
    expect(daemonTarget('git://[::1]:1234/~me/locks.git')).toEqual({
      host: '::1',
      port: 1234,
      hostHeader: '[::1]:1234',
      path: '/~me/locks.git',
    });
    for (const uri of [
      'ssh://host/locks.git',
      'https://host/locks.git',
      'git://host',
      'git://host:0/x',
      'git://host:99999/x',
    ])
      expect(daemonTarget(uri)).toBeUndefined();
  });
});
