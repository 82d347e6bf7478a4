// A put waiting on a git:// lock repository keeps one session: its first fetch opens it, its polls
// ask it whether the branch moved (HEAD, which upload-pack resolves afresh each time), and a commit
// seen is fetched on it by its id, not a connection each. Against a real git daemon on 127.0.0.1,
// and small fake servers for what git daemon does not do.
import { mkdtemp, rm } from 'node:fs/promises';

import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { daemonSession } from '../../src/git/daemon-session.js';
import { eventually } from '../helpers/eventually.js';
import { fakeDaemons } from '../helpers/fake-daemon.js';
import { servedLockRepo } from '../helpers/git-daemon.js';
import { git } from '../helpers/lock-repo.js';
import { sha256Repository } from '../helpers/looked-refs.js';

const served = servedLockRepo({ unclaimed: ['lock-a'] });

const fakes = fakeDaemons();
afterEach(() => fakes.closeAll());

/** The sessions git daemon served (a probe that only connects asks for none). */
const connections = () => (served.daemon.log().match(/Request upload-pack /g) ?? []).length;

function watch(uri: string, branch = 'master', signal = new AbortController().signal) {
  return daemonSession({ uri, branch, gitTimeoutMs: 60_000, gitConfig: [] }, signal)!;
}

/** git's environment for a command run on the session. */
const gitEnv = () =>
  Object.fromEntries(
    Object.entries(process.env).filter(
      (entry): entry is [string, string] => entry[1] !== undefined,
    ),
  );

const localRef = async (gitDir: string, ref: string) =>
  (await git(gitDir, 'rev-parse', ref)).trim();

const copies: string[] = [];
afterEach(async () => {
  for (const copy of copies.splice(0)) await rm(copy, { recursive: true, force: true });
});

/**
 * A put's copy (`initArgs` for its `git init`) whose first fetch of the branch went on a new kept
 * session of `bare`'s, as an acquire's does; `byId` fetches a commit on the session.
 */
async function firstFetch(bare: string, ...initArgs: string[]) {
  const local = await mkdtemp(join(tmpdir(), 'kept-session-'));
  copies.push(local);
  await git(local, 'init', '--quiet', '--bare', ...initArgs);
  const kept = watch(served.daemon.url(bare));
  const options = { env: gitEnv(), cwd: local, signal: new AbortController().signal };
  const before = connections();
  // Listing refs, as the put's first fetch does: on a fresh session, fresh answers.
  const first = await kept.fetch(
    ['fetch', '--no-tags', '--depth=1', 'fd::3', '+refs/heads/master:refs/tip'],
    options,
  );
  expect(first?.exitCode, first?.stderr.toString()).toBe(0);
  const byId = (id: string, ref = 'refs/tip') =>
    kept.fetch(['fetch', '--no-tags', 'fd::3', `+${id}:${ref}`], options);
  return { local, kept, options, before, byId };
}

const pkt = (text: string) =>
  `${(Buffer.byteLength(text) + 4).toString(16).padStart(4, '0')}${text}`;
const CAPABILITIES = `${pkt('version 2\n')}${pkt('ls-refs=unborn\n')}${pkt('fetch=shallow\n')}0000`;

describe('the branch tip over git://', () => {
  it('one connection answers every question, and sees each push', async () => {
    const tips = watch(served.daemon.url(served.repo.bare));
    const before = connections();
    for (let i = 0; i < 3; i++) expect(await tips.tip()).toBe(await served.repo.tip());
    await served.repo.commit('unclaiming: nothing', async () => undefined);
    expect(await tips.tip()).toBe(await served.repo.tip());
    await served.repo.commit('unclaiming: nothing again', async () => undefined);
    expect(await tips.tip()).toBe(await served.repo.tip());
    expect(connections() - before).toBe(1);
    tips.close();
    expect(await tips.tip()).toBeUndefined();
  });

  it("a put's first fetch opens the session, and its fetches by id go on it", async () => {
    const { local, kept, options, before, byId } = await firstFetch(served.repo.bare);
    expect(await localRef(local, 'refs/tip')).toBe(await served.repo.tip());
    // Another list on it would be stale: that fetch makes a connection of its own.
    expect(await kept.fetch(['fetch', 'fd::3', '+refs/heads/master:refs/x'], options)).toBe(
      undefined,
    );
    for (let i = 0; i < 2; i++) {
      const pushed = await served.repo.commit(`unclaiming: nothing ${i}`, async () => undefined);
      expect(await kept.tip()).toBe(pushed);
      const fetched = await byId(pushed);
      expect(fetched?.exitCode, fetched?.stderr.toString()).toBe(0);
      expect(await localRef(local, 'refs/tip')).toBe(pushed);
    }
    // A commit the copy has: git asks nothing, and the session stays.
    expect((await byId(await served.repo.tip(), 'refs/again'))?.exitCode).toBe(0);
    expect(await kept.tip()).toBe(await served.repo.tip());
    expect(connections() - before).toBe(1);
    kept.close();
  });

  it('let go (a put far back in line), it ends at the server; the next question opens another', async () => {
    const ended = () => (served.daemon.log().match(/\] Disconnected/g) ?? []).length;
    const kept = watch(served.daemon.url(served.repo.bare));
    const before = { sessions: connections(), ended: ended() };
    expect(await kept.tip()).toBe(await served.repo.tip());
    kept.release();
    // git daemon's child for it exits: a connection git daemon no longer counts.
    expect(await eventually(() => ended() > before.ended, 2_000)).toBe(true);
    expect(await kept.tip()).toBe(await served.repo.tip());
    expect(connections() - before.sessions).toBe(2);
    // Let go is not lost: however often, the next question opens another (a put that steps back
    // and forth across the far-back mark keeps its watch).
    for (let i = 0; i < 4; i++) {
      kept.release();
      expect(await kept.tip()).toBe(await served.repo.tip());
    }
    expect(connections() - before.sessions).toBe(6);
    kept.close();
  });

  it('a sha256 repository: questions, and fetches by id, in its object format', async () => {
    const { bare, tip } = await sha256Repository(served.repo.root);
    const { local, kept, before, byId } = await firstFetch(bare, '--object-format=sha256');
    // Enough questions that Linux delays its ACKs (past a fresh connection's quick ones): the
    // answers then come in parts, each answered by a kick (PktSession.kick).
    for (let i = 0; i < 30; i++) expect(await kept.tip()).toBe(tip);
    const work = join(served.repo.root, 'sha256-work');
    await git(work, 'commit', '--quiet', '--allow-empty', '-m', 'unclaiming: nothing');
    await git(work, 'push', '--quiet', bare, 'HEAD:refs/heads/master');
    const moved = (await git(bare, 'rev-parse', 'master')).trim();
    expect(await kept.tip()).toBe(moved);
    const fetched = await byId(moved);
    expect(fetched?.exitCode, fetched?.stderr.toString()).toBe(0);
    expect(await localRef(local, 'refs/tip')).toBe(moved);
    // All on one session: nothing it was asked broke it.
    expect(await kept.tip()).toBe(moved);
    expect(connections() - before).toBe(1);
    kept.close();
  });

  it('a pool on a branch HEAD does not name: no answer, and no connection after the first', async () => {
    await git(served.repo.bare, 'branch', 'other', 'master');
    try {
      const tips = watch(served.daemon.url(served.repo.bare), 'other');
      const before = connections();
      expect(await tips.tip()).toBeUndefined();
      expect(await tips.tip()).toBeUndefined();
      expect(connections() - before).toBe(1);
    } finally {
      await git(served.repo.bare, 'branch', '-D', 'other');
    }
  });

  it('no watch for other URIs, nor where url.<base>.insteadOf may send git elsewhere', () => {
    const settings = { branch: 'master', gitTimeoutMs: 1_000, gitConfig: [] };
    const signal = new AbortController().signal;
    expect(daemonSession({ ...settings, uri: 'https://example.com/locks.git' }, signal)).toBe(
      undefined,
    );
    const rewrite = [{ name: 'url.git://elsewhere/.insteadOf', value: 'git://here/' }];
    expect(
      daemonSession({ ...settings, uri: 'git://here/locks.git', gitConfig: rewrite }, signal),
    ).toBeUndefined();
  });

  it('a stop ends a question the server never answers at once', async () => {
    const uri = await fakes.start(() => undefined);
    const stop = new AbortController();
    const tips = watch(uri, 'master', stop.signal);
    const asked = tips.tip();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const stoppedAt = Date.now();
    stop.abort();
    expect(await asked).toBeUndefined();
    expect(Date.now() - stoppedAt).toBeLessThan(100);
  });

  it('a session the server ends between questions is opened again, a few times at most', async () => {
    let sessions = 0;
    const id = 'a'.repeat(40);
    // Answers one question per connection, then hangs up.
    const uri = await fakes.start((socket) => {
      sessions++;
      let seen = '';
      socket.on('data', (chunk) => {
        seen += chunk.toString('latin1');
        if (seen.includes('\0version=2\0') && !seen.includes('CAPS')) {
          seen += 'CAPS';
          socket.write(CAPABILITIES);
        }
        if (seen.includes('ref-prefix HEAD')) {
          socket.end(`${pkt(`${id} HEAD symref-target:refs/heads/master\n`)}0000`);
          seen = 'CAPS';
        }
      });
    });
    const tips = watch(uri);
    for (let i = 0; i < 3; i++) {
      expect(await tips.tip()).toBe(id);
      // Let the hang-up arrive before the next question.
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(sessions).toBe(3);
    expect(await tips.tip()).toBeUndefined();
    expect(sessions).toBe(3);
  });

  it('a server that speaks only protocol v0: no answer, and no more connections', async () => {
    let sessions = 0;
    const uri = await fakes.start((socket) => {
      sessions++;
      socket.end(`${pkt(`${'b'.repeat(40)} HEAD\0multi_ack\n`)}0000`);
    });
    const tips = watch(uri);
    expect(await tips.tip()).toBeUndefined();
    expect(await tips.tip()).toBeUndefined();
    expect(sessions).toBe(1);
  });
});
