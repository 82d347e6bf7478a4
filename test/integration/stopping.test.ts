// SPEC §7: Concourse stops a step with a signal to the started process only (SIGKILL 10 s later)
// and waits for EOF on stdout and stderr. The step must end within a second, leave no process
// behind, and never leave a lock claimed that nobody will release.
import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startGitDaemon, type GitDaemon } from '../helpers/git-daemon.js';
import { startHttpGit } from '../helpers/http-git.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { generateKey, startSshd, type Sshd } from '../helpers/sshd.js';
import { runScript } from '../helpers/run-script.js';
import {
  sleep,
  startSilentServer,
  startStoppable,
  stepFolder,
  stop,
  waitForProcess,
  type SilentServer,
  type StoppableRun,
} from '../helpers/stopping.js';
import { source } from '../helpers/source.js';
import { keepMoving } from '../helpers/steps.js';
import { eventually } from '../helpers/eventually.js';

let repo: LockRepo | undefined;
let daemon: GitDaemon | undefined;
let silent: SilentServer | undefined;
const runs: StoppableRun[] = [];
afterEach(async () => {
  for (const run of runs.splice(0)) {
    run.child.kill('SIGKILL');
    await run.cleanup();
  }
  await daemon?.stop();
  await silent?.close();
  await repo?.cleanup();
  repo = daemon = silent = undefined;
});

async function start(
  request: unknown,
  src: string,
  env?: Record<string, string>,
): Promise<StoppableRun> {
  const run = await startStoppable('out', request, [src], env);
  runs.push(run);
  return run;
}

/** Moves a lock between claimed/ and unclaimed/ from another clone. */
async function move(lockRepo: LockRepo, name: string, from: string, to: string): Promise<void> {
  await lockRepo.commit(`moving ${name}`, (work) =>
    rename(join(work, 'pool', from, name), join(work, 'pool', to, name)),
  );
}

describe('a waiting acquire stopped by SIGTERM', () => {
  it('exits 143 with both pipes at EOF within 1 s, leaves no process and commits nothing', async () => {
    repo = await createLockRepo({ pool: { claimed: ['lock-a'] } });
    const src = await stepFolder('unused');
    // Different instants within the 100 ms poll, so some land while git ls-remote runs.
    for (const delay of [0, 35, 70]) {
      const tip = await repo.tip();
      const run = await start({ source: source(repo.bare), params: { acquire: true } }, src);
      await run.waitForStderr(/waiting for lock/);
      await sleep(delay);
      const stopped = await stop(run, 'SIGTERM');
      expect(stopped.code).toBe(143);
      expect(stopped.stdout).toBe('');
      expect(stopped.exitAfterSignal).toBeLessThan(1000);
      expect(stopped.eofAfterSignal).toBeLessThan(1000);
      expect(stopped.stderr).toContain('received SIGTERM: stopping');
      expect(await run.leftovers()).toEqual([]);
      expect(await repo.tip()).toBe(tip);
    }
  });

  it.each([
    ['looking on a kept connection', false],
    ['fetching the tips it saw move on its kept connection', true],
  ])('over HTTP, %s, exits within 1 s all the same and claims nothing', async (_, moving) => {
    repo = await createLockRepo({ pool: { claimed: ['lock-a'] } });
    const http = await startHttpGit({ projectRoot: repo.root, username: 'u', password: 'p' });
    const tip = await repo.tip();
    const stopMoving = moving ? keepMoving(repo, 50) : async () => undefined;
    try {
      const run = await start(
        {
          source: source(http.url(repo.bare), { username: 'u', password: 'p' }),
          params: { acquire: true },
        },
        await stepFolder('unused'),
      );
      await run.waitForStderr(/waiting in line/);
      await sleep(400);
      const stopped = await stop(run, 'SIGTERM');
      expect(stopped.code).toBe(143);
      expect(stopped.eofAfterSignal).toBeLessThan(1000);
      expect(await run.leftovers()).toEqual([]);
      await stopMoving();
      expect(await repo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });
      if (!moving) expect(await repo.tip()).toBe(tip);
    } finally {
      await stopMoving();
      await http.stop();
    }
  });

  it('does not take the lock once it is freed afterwards', async () => {
    repo = await createLockRepo({ pool: { claimed: ['lock-a'] } });
    const run = await start(
      { source: source(repo.bare), params: { acquire: true } },
      await stepFolder('unused'),
    );
    await run.waitForStderr(/waiting for lock/);
    expect((await stop(run, 'SIGTERM')).code).toBe(143);
    await move(repo, 'lock-a', 'claimed', 'unclaimed');
    await sleep(5000);
    expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a'] });
    expect((await repo.subjects())[0]).toBe('moving lock-a');
    expect(await run.leftovers()).toEqual([]);
  });
});

describe('every stop signal and every waiting operation', () => {
  it.each([
    ['SIGINT', 130],
    ['SIGHUP', 129],
  ] as const)('a waiting acquire stopped by %s exits %d', async (signal, code) => {
    repo = await createLockRepo({ pool: { claimed: ['lock-a'] } });
    const run = await start(
      { source: source(repo.bare), params: { acquire: true } },
      await stepFolder('unused'),
    );
    await run.waitForStderr(/waiting for lock/);
    const stopped = await stop(run, signal);
    expect(stopped.code).toBe(code);
    expect(stopped.stdout).toBe('');
    expect(stopped.eofAfterSignal).toBeLessThan(1000);
    expect(stopped.stderr).toContain(`received ${signal}: stopping`);
    expect(await run.leftovers()).toEqual([]);
  });

  it.each([
    ['claim', 'lock-a', { claim: 'lock-a' }],
    ['update', 'lock-a', { update: 'step' }],
    ['check', 'lock-a', { check: 'step' }],
    ['check_unclaimed', 'lock-b', { check_unclaimed: 'step' }],
  ] as const)('a waiting %s stopped by SIGTERM exits 143', async (_operation, name, params) => {
    repo = await createLockRepo({ pool: { claimed: ['lock-a'], unclaimed: ['lock-b'] } });
    const tip = await repo.tip();
    const run = await start(
      { source: source(repo.bare), params },
      await stepFolder(name, '{"new":"metadata"}\n'),
    );
    await run.waitForStderr(/waiting for lock/);
    const stopped = await stop(run, 'SIGTERM');
    expect(stopped.code).toBe(143);
    expect(stopped.stdout).toBe('');
    expect(stopped.eofAfterSignal).toBeLessThan(1000);
    expect(await run.leftovers()).toEqual([]);
    expect(await repo.tip()).toBe(tip);
  });

  // helpers/held-load.mjs holds the program where a test knows it is: its import not answered yet
  // (LOAD: Node 20 runs the entry script's handlers meanwhile; Node 24 blocks the process until
  // the import is answered), or its code loaded and the process blocked just before main() (EVAL).
  // The signal comes there, and the program goes on 200 ms later.
  it.each([
    ['out', 'LOAD'],
    ['in', 'LOAD'],
    ['check', 'LOAD'],
    ['out', 'EVAL'],
  ] as const)(
    '%s stopped while its program loads (%s) exits 143, not killed by the signal, claiming nothing',
    async (script, moment) => {
      repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
      const tip = await repo.tip();
      const held = join(await stepFolder('unused'), 'held');
      const run = await startStoppable(
        script,
        { source: source(repo.bare), params: { acquire: true } },
        [await stepFolder('unused')],
        {
          NODE_OPTIONS: `--import ${join(import.meta.dirname, '../helpers/held-load.mjs')}`,
          [`HELD_${moment}_MARK`]: `${held}.mark`,
          [`HELD_${moment}_UNTIL`]: `${held}.go`,
        },
      );
      runs.push(run);
      await waitForFile(`${held}.mark`);
      run.child.kill('SIGTERM');
      await sleep(200);
      const released = Date.now();
      await writeFile(`${held}.go`, '');
      const stopped = await run.done;
      expect(stopped.signal).toBeNull();
      expect(stopped.code).toBe(143);
      expect(stopped.stdout).toBe('');
      expect(Date.now() - released).toBeLessThan(1000);
      expect(await repo.tip()).toBe(tip);
    },
  );

  it('a second signal exits at once, during the compensating release', async () => {
    const {
      run,
      repo: held,
      daemon: server,
    } = await acquireWhileServerHoldsPush(1, 'post-receive');
    // The compensating release needs the remote: put one there that never answers.
    const { port } = server;
    await server.stop();
    daemon = undefined;
    silent = await startSilentServer(port);
    run.child.kill('SIGTERM');
    await run.waitForStderr(/checking, to release it/);
    const stopped = await stop(run, 'SIGTERM');
    expect(stopped.code).toBe(143);
    expect(stopped.eofAfterSignal).toBeLessThan(1000);
    expect(stopped.stderr).toContain('received SIGTERM again: exiting now');
    // The claim is on the branch and nothing released it: the last words say which it is.
    const tip = await held.tip();
    expect(stopped.stderr).toContain(
      `exiting at once: "lock-a" in pool "pool" may still be claimed by commit ${tip} on refs/heads/master`,
    );
    await sleep(200);
    expect(await run.leftovers()).toEqual([]);
  });
  it('a second signal stops a push given time to finish, and exits at once', async () => {
    const { run } = await acquireWhileServerHoldsPush(5, 'pre-receive');
    run.child.kill('SIGTERM');
    await sleep(300);
    const stopped = await stop(run, 'SIGTERM');
    expect(stopped.code).toBe(143);
    expect(stopped.eofAfterSignal).toBeLessThan(1000);
    expect(await run.leftovers()).toEqual([]);
    // The server may still land the claim it is holding: the last words name it.
    expect(stopped.stderr).toMatch(
      /exiting at once: "lock-a" in pool "pool" may still be claimed by commit [0-9a-f]{40} on refs\/heads\/master of git:\/\/127\.0\.0\.1:\d+\/locks\.git; release it by hand if so/,
    );
  });
});

describe('SIGKILL', () => {
  it('closes both pipes within 1 s even while git hangs on a silent remote', async () => {
    silent = await startSilentServer();
    // Over HTTP a check's clone is git's, which starts at once (the run's relay answers it) and
    // hangs on the relay.
    const run = await startStoppable(
      'check',
      { source: source(`http://127.0.0.1:${silent.port}/locks.git`) },
      [],
    );
    runs.push(run);
    await waitForProcess(run, /git.* (fetch|clone)/);
    const killed = await stop(run, 'SIGKILL');
    expect(killed.signal).toBe('SIGKILL');
    expect(killed.eofAfterSignal).toBeLessThan(1000);
    // Nothing can stop them once we are SIGKILLed: git is orphaned, hanging. Clean up after us
    // (one may end on its own between the listing and the kill: ESRCH).
    for (const { pid } of await run.leftovers()) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
      }
    }
  });

  it('still lets both pipes reach EOF within 1 s, since no child holds them', async () => {
    repo = await createLockRepo({ pool: { claimed: ['lock-a'] } });
    const run = await start(
      { source: source(repo.bare), params: { acquire: true } },
      await stepFolder('unused'),
    );
    await run.waitForStderr(/waiting for lock/);
    await sleep(50);
    const killed = await stop(run, 'SIGKILL');
    expect(killed.signal).toBe('SIGKILL');
    expect(killed.stdout).toBe('');
    expect(killed.eofAfterSignal).toBeLessThan(1000);
  });
});

describe('a remote that accepts connections and never answers', () => {
  it.each(['git', 'http', 'ssh'])(
    'over %s://, SIGTERM ends the step within 1 s and stops git and its helpers',
    async (scheme) => {
      silent = await startSilentServer();
      const run = await start(
        {
          source: source(
            `${scheme}://${scheme === 'ssh' ? 'git@' : ''}127.0.0.1:${silent.port}/locks.git`,
          ),
          params: { acquire: true },
        },
        await stepFolder('unused'),
      );
      // Over git:// an acquire's first fetch opens the session it keeps (git/daemon-session.ts),
      // and over HTTP the run asks for it on the relay's connection (git/http-refs.ts): the run
      // waits for the server's first words before git starts. Over SSH git starts at once.
      if (scheme === 'ssh') await waitForProcess(run, /git.* (fetch|clone)/);
      else expect(await eventually(() => silent!.connections() > 0, 20_000)).toBe(true);
      const stopped = await stop(run, 'SIGTERM');
      expect(stopped.code).toBe(143);
      expect(stopped.stdout).toBe('');
      expect(stopped.exitAfterSignal).toBeLessThan(1000);
      expect(stopped.eofAfterSignal).toBeLessThan(1000);
      expect(await run.leftovers()).toEqual([]);
    },
  );

  it.each([
    ['check', {}, 'git'],
    ['in', { version: { ref: 'a'.repeat(40) } }, 'git'],
    ['in', { version: { ref: 'a'.repeat(40) } }, 'http'],
  ] as const)(
    '%s stopped by SIGTERM over %s:// ends within 1 s too',
    async (script, extra, scheme) => {
      silent = await startSilentServer();
      const dest = await stepFolder('unused');
      const run = await startStoppable(
        script,
        { source: source(`${scheme}://127.0.0.1:${silent.port}/locks.git`), ...extra },
        [dest],
      );
      runs.push(run);
      // Their first fetch opens a session too (git/daemon-session.ts), and `in` over HTTP asks for
      // it on the relay's connection itself: the run waits for the server's first words.
      expect(await eventually(() => silent!.connections() > 0, 20_000)).toBe(true);
      const stopped = await stop(run, 'SIGTERM');
      expect(stopped.code).toBe(143);
      expect(stopped.stdout).toBe('');
      expect(stopped.eofAfterSignal).toBeLessThan(1000);
      expect(await run.leftovers()).toEqual([]);
    },
  );

  it('without a signal, source.git_timeout ends the step with an error naming what timed out', async () => {
    silent = await startSilentServer();
    const run = await start(
      {
        source: source(`git://127.0.0.1:${silent.port}/locks.git`, { git_timeout: '500ms' }),
        params: { acquire: true },
      },
      await stepFolder('unused'),
    );
    const result = await run.done;
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(
      /^error: .*git (fetch|clone) timed out after 500ms \(source\.git_timeout\)$/m,
    );
    expect(await run.leftovers()).toEqual([]);
  });
});

describe('git stopped while it cleans up', () => {
  // git's handler for a stop signal cleans up (clone removes the half-made repository) and is
  // not safe to interrupt: a second, different signal in the middle of it can leave git waiting
  // forever on a lock the interrupted handler holds (src/git/child-processes.ts). A `git` first on
  // PATH stands in for `git clone` to see which signals arrive; every other git command is git's.
  it('hears one kind of signal only, so its handlers never interrupt each other', async () => {
    const { signals } = await stopDuringClone({ endsOnSignal: true });
    expect(signals.length).toBeGreaterThan(0);
    expect(new Set(signals).size, signals.join(', ')).toBe(1);
  });

  it('a git that never ends on the signal is killed: the step still ends within 1 s', async () => {
    const { stopped, signals } = await stopDuringClone({ endsOnSignal: false });
    expect(stopped.eofAfterSignal).toBeLessThan(1000);
    expect(signals).not.toEqual([]);
  });
});

/**
 * SIGTERM to a claim while its `git clone` is the stand-in below: it ends with nothing left. (An
 * acquire's first sync is a fetch into a new copy, for the waiting line; a claim still clones.)
 */
async function stopDuringClone(options: { endsOnSignal: boolean }) {
  repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
  const clone = await standInForClone(repo, options);
  const run = await start(
    { source: source(repo.bare), params: { claim: 'lock-a' } },
    await stepFolder('unused'),
    clone.env,
  );
  await waitForFile(clone.heard);
  const stopped = await stop(run, 'SIGTERM');
  expect(stopped.code).toBe(143);
  expect(await run.leftovers()).toEqual([]);
  expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a'] });
  return { stopped, signals: await clone.signals() };
}

/**
 * A `git` for the front of PATH: `git clone` is a node program that writes "started" and then
 * each signal it receives to the file `heard`, and waits; every other command is the real git.
 * It ends 100 ms after a signal (git cleaning up takes a moment), or never.
 */
async function standInForClone(lockRepo: LockRepo, { endsOnSignal }: { endsOnSignal: boolean }) {
  const bin = join(lockRepo.root, 'bin');
  const heard = join(lockRepo.root, 'heard');
  await mkdir(bin);
  await writeFile(
    join(bin, 'clone.mjs'),
    [
      "import { appendFileSync } from 'node:fs';",
      "for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'])",
      '  process.on(signal, () => {',
      `    appendFileSync('${heard}', signal + '\\n');`,
      endsOnSignal ? '    setTimeout(() => process.exit(130), 100);' : '',
      '  });',
      `appendFileSync('${heard}', 'started\\n');`,
      'setTimeout(() => undefined, 20_000);',
    ].join('\n'),
  );
  return {
    env: await gitStandIn(
      bin,
      `[ "$1" = clone ] && exec '${process.execPath}' '${join(bin, 'clone.mjs')}'`,
    ),
    heard,
    /** The signals it received, in order. */
    signals: async () => (await readFile(heard, 'utf8')).split('\n').filter(Boolean).slice(1),
  };
}

describe('a signal after the claim reached the remote', () => {
  it('releases every lock of a set taken at once, in one push', async () => {
    const { run, repo: held } = await acquireWhileServerHoldsPush(1, 'post-receive', 3);
    expect((await held.state('pool')).claimed).toEqual(['lock-a', 'lock-b', 'lock-c']);
    const claimTip = await held.tip();
    const stopped = await stop(run, 'SIGTERM');
    expect(stopped.code).toBe(143);
    expect(stopped.exitAfterSignal).toBeLessThan(3000);
    expect(stopped.stderr).toMatch(
      /released "lock-.", "lock-.", "lock-.": this run no longer holds them/,
    );
    expect(await held.state('pool')).toEqual({
      claimed: [],
      unclaimed: ['lock-a', 'lock-b', 'lock-c'],
    });
    // Three release commits straight after the three claims.
    const subjects = (await held.subjects()).slice(0, 6);
    expect(subjects.slice(0, 3).every((subject) => subject.startsWith('unclaiming: '))).toBe(true);
    expect(subjects.slice(3).every((subject) => subject.startsWith('claiming: '))).toBe(true);
    expect(await git(held.bare, 'rev-parse', 'master~3')).toBe(`${claimTip}\n`);
    expect(await run.leftovers()).toEqual([]);
  });

  it('pushes the matching release before exiting', async () => {
    // The claim is on the remote; our push has not returned yet.
    const { run, repo: held } = await acquireWhileServerHoldsPush(1, 'post-receive');
    expect(await held.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });
    const stopped = await stop(run, 'SIGTERM');
    expect(stopped.code).toBe(143);
    expect(stopped.stdout).toBe('');
    expect(stopped.exitAfterSignal).toBeLessThan(3000);
    expect(stopped.stderr).toContain('released "lock-a"');
    expect(await held.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a'] });
    expect((await held.subjects()).slice(0, 2)).toEqual(['unclaiming: lock-a', 'claiming: lock-a']);
    expect(await git(held.bare, 'log', '-1', '--format=%b', 'master')).toContain(
      'Released because the put that claimed it was aborted.',
    );
    expect(await run.leftovers()).toEqual([]);
  });

  it('lets a push the server is still processing finish, then releases what it claimed', async () => {
    // The server takes its time before moving the branch, as busy hosted servers do; a client
    // that hangs up meanwhile does not stop it.
    const { run, repo: held } = await acquireWhileServerHoldsPush(1, 'pre-receive');
    const stopped = await stop(run, 'SIGTERM');
    expect(stopped.code).toBe(143);
    expect(stopped.stdout).toBe('');
    expect(stopped.exitAfterSignal).toBeLessThan(4000);
    // The release lands once the server's hook lets the held push finish.
    const released = async () => (await held.state('pool')).claimed.length === 0;
    await eventually(released, 10_000);
    expect(await held.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a'] });
    expect((await held.subjects()).slice(0, 2)).toEqual(['unclaiming: lock-a', 'claiming: lock-a']);
    expect(await run.leftovers()).toEqual([]);
  });

  it('over SSH too: a claim pushed just after the stop still gets its connection, and is released', async () => {
    // The run's shared SSH connection carries the push that the stop lets finish: closing the
    // run's connections at the stop would leave that claim unanswered, looked for in vain.
    const held = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    repo = held;
    const key = await generateKey(held.root, 'client', { type: 'ed25519' });
    const sshd: Sshd = await startSshd([key.publicKey]);
    try {
      const slowPush = await standInBeforePush(held);
      const run = await start(
        {
          source: source(sshd.url(held.bare), { private_key: key.privateKey }),
          params: { acquire: true },
        },
        await stepFolder('unused'),
        slowPush.env,
      );
      await waitForFile(slowPush.marker);
      const stopped = await stop(run, 'SIGTERM');
      expect(stopped.code).toBe(143);
      expect(stopped.stderr).toContain('released "lock-a"');
      expect(stopped.stderr).not.toMatch(/by hand/);
      expect(stopped.exitAfterSignal).toBeLessThan(4000);
      expect(await held.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a'] });
      expect(await run.leftovers()).toEqual([]);
    } finally {
      await sshd.stop();
    }
  });

  it('says which lock and ref are left claimed when the remote is down', async () => {
    // Longer than the grace a push under way gets after the signal: it is cut off, unanswered.
    const {
      run,
      repo: held,
      daemon: server,
    } = await acquireWhileServerHoldsPush(6, 'post-receive');
    const claim = await held.tip();
    await server.stop();
    daemon = undefined;
    const stopped = await stop(run, 'SIGTERM');
    expect(stopped.code).toBe(143);
    expect(stopped.exitAfterSignal).toBeLessThan(6000);
    expect(stopped.stderr).toContain(
      `error releasing abandoned lock: "lock-a" in pool "pool" may still be claimed by commit ${claim} on refs/heads/master of git://127.0.0.1:`,
    );
    expect(await held.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });
    expect(await run.leftovers()).toEqual([]);
  });
});

describe('a signal after the claim landed, while other puts keep the branch moving', () => {
  it('releases and exits within 1.5 s', async () => {
    const held = await createLockRepo({ pool: { unclaimed: ['lock-a', 'lock-b'] } });
    repo = held;
    const server = await startGitDaemon(held.root);
    daemon = server;
    const url = server.url(held.bare);
    // The server answers the claim of the put to stop 0.3 s after its branch moved: the stop
    // comes in between.
    const marker = join(held.root, 'claim-landed');
    const hook = join(held.bare, 'hooks', 'post-receive');
    await writeFile(
      hook,
      [
        '#!/bin/sh',
        'while read old new ref; do',
        `  if git log -1 --format=%B "$new" | grep -q 'builds/stopped' && [ ! -e '${marker}' ]; then`,
        `    : > '${marker}'; sleep 0.3`,
        '  fi',
        'done',
      ].join('\n'),
    );
    await chmod(hook, 0o755);
    // Six puts take and give back the two locks over and over, waiting in line in between.
    let busy = true;
    const worker = async (index: number) => {
      const env = { BUILD_URL: `https://ci/builds/worker-${index}` };
      while (busy) {
        const acquired = await runScript(
          'out',
          { source: source(url), params: { acquire: true, wait_timeout: '20s' } },
          { args: [await stepFolder('unused')], env },
        );
        if (acquired.code !== 0) continue;
        const name = (
          JSON.parse(acquired.stdout) as { metadata: { name: string; value: string }[] }
        ).metadata.find((item) => item.name === 'lock_name')!.value;
        await sleep(100);
        await runScript(
          'out',
          { source: source(url), params: { release: 'step' } },
          { args: [await stepFolder(name)], env },
        );
      }
    };
    const workers = [0, 1, 2, 3, 4, 5].map(worker);
    try {
      await sleep(1_000);
      const run = await start(
        { source: source(url), params: { acquire: true } },
        await stepFolder('unused'),
        { BUILD_URL: 'https://ci/builds/stopped' },
      );
      await waitForFile(marker, 60_000);
      const stopped = await stop(run, 'SIGTERM');
      expect(stopped.code).toBe(143);
      expect(stopped.stderr).toMatch(/released "lock-[ab]": this run no longer holds it/);
      process.stderr.write(
        `stopped after its claim landed, under contention: exited ${stopped.exitAfterSignal} ms after the signal\n`,
      );
      expect(stopped.exitAfterSignal).toBeLessThan(1_500);
    } finally {
      busy = false;
      await Promise.all(workers);
    }
    expect(await held.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a', 'lock-b'] });
  }, 120_000);
});

/**
 * An acquire over git daemon whose claiming push the server holds for `seconds`, returned once
 * the hold began: in pre-receive the branch has not moved yet; in post-receive it has, and the
 * put has not heard back.
 */
async function acquireWhileServerHoldsPush(
  seconds: number,
  hook: 'pre-receive' | 'post-receive',
  /** Several locks at once: the pool holds `count` locks, all taken in one push. */
  count = 1,
): Promise<{ run: StoppableRun; repo: LockRepo; daemon: GitDaemon }> {
  const locks = ['lock-a', 'lock-b', 'lock-c'].slice(0, count);
  const held = await createLockRepo({ pool: { unclaimed: locks } });
  repo = held;
  const server = await startGitDaemon(held.root);
  daemon = server;
  const marker = await holdPush(held, hook, seconds);
  const params = count === 1 ? { acquire: true } : { acquire: true, count };
  const run = await start(
    { source: source(server.url(held.bare)), params },
    await stepFolder('unused'),
  );
  await waitForFile(marker);
  return { run, repo: held, daemon: server };
}

/**
 * A `git` for the front of PATH that, before the first `git push` to a branch, creates `marker`
 * and sleeps half a second, then runs git's own: a stop sent meanwhile lands between the put's
 * decision to push its claim and the push itself.
 */
async function standInBeforePush(
  lockRepo: LockRepo,
): Promise<{ env: Record<string, string>; marker: string }> {
  const bin = join(lockRepo.root, 'push-bin');
  const marker = join(lockRepo.root, 'push-starting');
  await mkdir(bin);
  const env = await gitStandIn(
    bin,
    `if [ "$1" = push ] && [ ! -e '${marker}' ]; then : > '${marker}'; sleep 0.5; fi`,
  );
  return { env, marker };
}

/**
 * Writes `bin/git`, a shell script that runs `first` (a line that may exec something else) and
 * then the real git, found with `which` as the package test does; returns the PATH putting it
 * first.
 */
async function gitStandIn(bin: string, first: string): Promise<Record<string, string>> {
  const realGit = execFileSync('which', ['git'], { encoding: 'utf8' }).trim();
  await writeFile(join(bin, 'git'), ['#!/bin/sh', first, `exec '${realGit}' "$@"`].join('\n'));
  await chmod(join(bin, 'git'), 0o755);
  return { PATH: `${bin}:${process.env.PATH ?? ''}` };
}

/** A server hook holding the first push for `seconds`; the returned file appears when it starts. */
async function holdPush(lockRepo: LockRepo, name: string, seconds: number): Promise<string> {
  const marker = join(lockRepo.root, 'push-held');
  const hook = join(lockRepo.bare, 'hooks', name);
  await rm(marker, { force: true });
  await writeFile(
    hook,
    `#!/bin/sh\nif [ ! -e '${marker}' ]; then : > '${marker}'; sleep ${seconds}; fi\n`,
  );
  await chmod(hook, 0o755);
  return marker;
}

async function waitForFile(path: string, timeoutMs = 20_000): Promise<void> {
  for (const started = Date.now(); !existsSync(path); await sleep(10)) {
    if (Date.now() - started > timeoutMs) throw new Error(`${path} never appeared`);
  }
}
