// Reclaiming expired leases (SPEC §10) over a real git daemon, with leases of a second or two:
// reap (the put and the pool command), renew, a waiting acquire that may reclaim, fencing after a
// real reclaim, and the claims that are never reclaimed.
import { readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startGitDaemon, type GitDaemon } from '../helpers/git-daemon.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { runCommand } from '../helpers/run-command.js';
import { runScript, startScript } from '../helpers/run-script.js';
import { source as lockSource } from '../helpers/source.js';
import { buildFolder, refused, scratchDir, succeeded, commitTrailers } from '../helpers/steps.js';

let repo: LockRepo;
let daemon: GitDaemon;
beforeEach(async () => {
  repo = await createLockRepo({
    pool: { unclaimed: ['lock-a', 'lock-b'], claimed: ['lock-ref'] },
  });
  // The bare repository records every update of the branch: one entry per push.
  await git(repo.bare, 'config', 'core.logAllRefUpdates', 'always');
  daemon = await startGitDaemon(repo.root);
});
afterEach(async () => {
  await daemon.stop();
  await repo.cleanup();
});

const BUILD_ENV = {
  BUILD_URL: 'https://ci.example.com/teams/main/pipelines/p/jobs/reaper/builds/7',
};

/** Leases of a second, and a second of grace: expired some 3 s after the claim at most. */
const SHORT = { lease: '1s', lease_grace: '1s' };

const source = (extra: Record<string, unknown> = {}) => lockSource(daemon.url(repo.bare), extra);

const trailers = (ref?: string) => commitTrailers(repo, ref);

async function put(params: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return runCommand('out', {
    stdin: { source: source(extra), params },
    args: [await buildFolder()],
    env: BUILD_ENV,
  });
}

/** Claims `name` with a put and gets it, as a job does; the build folder holds the step `lock`. */
async function claim(name: string, extra: Record<string, unknown> = SHORT) {
  const result = await put({ claim: name }, extra);
  const { version } = succeeded(result) as { version: { ref: string } };
  const src = await scratchDir('pool-build-');
  succeeded(
    await runCommand('in', {
      stdin: { source: source(extra), version },
      args: [join(src, 'lock')],
    }),
  );
  const recorded = await trailers(version.ref);
  return {
    src,
    ref: version.ref,
    token: recorded['Claim-Token']!,
    lease: recorded['Lease-Expires'],
  };
}

/** Sleeps until `lease` plus `graceMs` (and a little) has passed. */
async function pastLease(lease: string | undefined, graceMs = 1000) {
  const wait = Date.parse(lease!) + graceMs + 300 - Date.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
}

function reap(extra: Record<string, unknown> = SHORT) {
  return put({ reap: true }, extra);
}

/** `name` claimed with a short lease, left to expire and reaped: its holder, the reclaim and when. */
async function reclaimed(name: string) {
  const held = await claim(name);
  await pastLease(held.lease);
  succeeded(await reap());
  const reclaim = await repo.tip();
  return { held, reclaim, at: await commitTime(reclaim) };
}

async function pushes(): Promise<number> {
  const out = await git(repo.bare, 'reflog', 'show', '--format=%H', `refs/heads/${repo.branch}`);
  return out.split('\n').filter(Boolean).length;
}

describe('reap', () => {
  it('reclaims an expired lock: one commit with the reclaim trailers, a line on stderr', async () => {
    const held = await claim('lock-a');
    await pastLease(held.lease);
    const result = await reap();
    const response = succeeded(result) as { version: { ref: string }; metadata: unknown };
    expect(await repo.state('pool')).toEqual({
      claimed: ['lock-ref'],
      unclaimed: ['lock-a', 'lock-b'],
    });
    const tip = await repo.tip();
    expect(response.version.ref).toBe(tip);
    expect(response.metadata).toEqual([
      { name: 'pool_name', value: 'pool' },
      { name: 'reclaimed', value: 'lock-a' },
    ]);
    expect((await git(repo.bare, 'log', '-1', '--format=%s', tip)).trim()).toBe(
      'unclaiming: lock-a',
    );
    expect(await trailers(tip)).toEqual({
      'Reclaimed-Token': held.token,
      'Reclaim-Reason': `lease expired at ${held.lease}`,
      'Reclaimed-By': BUILD_ENV.BUILD_URL,
    });
    expect(result.stderr).toContain(`reclaimed lock: lock-a (lease expired at ${held.lease}`);
  });

  it('reclaims nothing before the lease and its grace are over, and answers with the pool’s last commit', async () => {
    const held = await claim('lock-a', { lease: '1s', lease_grace: '1h' });
    await pastLease(held.lease);
    const result = await reap({ lease_grace: '1h' });
    const response = succeeded(result) as { version: { ref: string } };
    expect(response.version.ref).toBe(held.ref);
    expect(await repo.tip()).toBe(held.ref);
    expect((await repo.state('pool')).claimed).toContain('lock-a');
    expect(result.stderr).toContain('reaped! 0 expired locks reclaimed');
  });

  it('never reclaims a claim without a lease, nor one in the reference’s format, unless --older-than', async () => {
    succeeded(await put({ claim: 'lock-a' }));
    // lock-ref was claimed by the fixture's initial commit; this one as the reference writes it.
    await repo.commit('claiming: lock-b\n\nBuild URL: https://ci.example.com/builds/1', (work) =>
      rename(join(work, 'pool/unclaimed/lock-b'), join(work, 'pool/claimed/lock-b')),
    );
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const before = await repo.tip();
    succeeded(await reap({ lease_grace: '0s' }));
    expect(await repo.tip()).toBe(before);

    const flags = ['--uri', daemon.url(repo.bare), '--branch', repo.branch, '--pool', 'pool'];
    const older = await runScript('pool', '', {
      args: ['reap', '--older-than', '1s', '--by', 'ops@example', ...flags],
    });
    expect(older.code, older.stderr).toBe(0);
    expect(await repo.state('pool')).toEqual({
      claimed: [],
      unclaimed: ['lock-a', 'lock-b', 'lock-ref'],
    });
    const reasons = (
      await git(
        repo.bare,
        'log',
        '-3',
        '--format=%(trailers:key=Reclaim-Reason,valueonly)',
        repo.branch,
      )
    )
      .split('\n')
      .filter(Boolean);
    expect(reasons).toHaveLength(3);
    for (const reason of reasons) expect(reason).toMatch(/without a lease, older than 1s$/);
    expect(older.stderr.match(/^reclaimed lock: /gm)).toHaveLength(3);
  });

  it('pool reap --dry-run lists what it would reclaim and commits nothing', async () => {
    const held = await claim('lock-a');
    await pastLease(held.lease);
    const before = await repo.tip();
    const flags = ['--uri', daemon.url(repo.bare), '--branch', repo.branch, '--pool', 'pool'];
    const dry = await runScript('pool', '', {
      args: ['reap', '--dry-run', '--lease-grace', '1s', ...flags],
    });
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stderr).toContain(`would reclaim lock: lock-a (lease expired at ${held.lease}`);
    expect(await repo.tip()).toBe(before);
  });

  it('two reapers at once reclaim each lock once', async () => {
    const held = [await claim('lock-a'), await claim('lock-b')];
    await pastLease(held[1]!.lease);
    const request = { source: source(SHORT), params: { reap: true } };
    const reapers = await Promise.all(
      [1, 2].map(
        async () =>
          startScript('out', request, { args: [await buildFolder()], env: BUILD_ENV }).done,
      ),
    );
    for (const reaper of reapers) expect(reaper.code, reaper.stderr).toBe(0);
    const subjects = await repo.subjects();
    expect(subjects.filter((s) => s === 'unclaiming: lock-a')).toHaveLength(1);
    expect(subjects.filter((s) => s === 'unclaiming: lock-b')).toHaveLength(1);
    const lines = reapers.flatMap((r) => r.stderr.match(/^reclaimed lock: .*$/gm) ?? []);
    expect(lines).toHaveLength(2);
  });

  it('refuses another operation beside it with one line', async () => {
    const result = await put({ reap: true, acquire: true });
    refused(
      result,
      'invalid payload (reap reclaims every expired lock of the pool and takes no other operation: drop acquire)',
    );
    expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
  });
});

describe('renew', () => {
  it('extends the lease with an empty commit carrying the same token, answering with the claim', async () => {
    const held = await claim('lock-a');
    const result = await runCommand('out', {
      stdin: { source: source(SHORT), params: { renew: 'lock', lease: '1h' } },
      args: [held.src],
      env: BUILD_ENV,
    });
    const response = succeeded(result) as { version: { ref: string } };
    expect(response.version.ref).toBe(held.ref);
    const tip = await repo.tip();
    expect((await git(repo.bare, 'log', '-1', '--format=%s', tip)).trim()).toBe('renewing: lock-a');
    expect((await git(repo.bare, 'diff-tree', '--no-commit-id', '-r', tip)).trim()).toBe('');
    const renewal = await trailers(tip);
    expect(renewal['Claim-Token']).toBe(held.token);
    expect(Date.parse(renewal['Lease-Expires']!) - Date.now()).toBeGreaterThan(3_500_000);

    // The original lease runs out; the renewed one holds: nothing to reap.
    await pastLease(held.lease);
    succeeded(await reap());
    expect(await repo.tip()).toBe(tip);
    // check never reports it: it touches no file.
    const check = await runCommand('check', {
      stdin: { source: source(), version: { ref: held.ref } },
    });
    expect(JSON.parse(check.stdout)).toEqual([{ ref: held.ref }]);
    // The implicit get of the claim writes the renewed lease.
    const dest = join(await scratchDir('pool-in-'), 'lock');
    succeeded(
      await runCommand('in', {
        stdin: { source: source(), version: { ref: held.ref } },
        args: [dest],
      }),
    );
    expect(await readFile(join(dest, 'lease_expires'), 'utf8')).toBe(
      `${renewal['Lease-Expires']}\n`,
    );
  });

  it('refuses a lock that is not claimed with one line, committing nothing', async () => {
    const src = await buildFolder({ lock: { name: 'lock-b\n' } });
    const before = await repo.tip();
    const result = await runCommand('out', {
      stdin: { source: source(SHORT), params: { renew: 'lock' } },
      args: [src],
    });
    refused(
      result,
      'cannot renew lock "lock-b": it is not claimed in pool "pool" (it is unclaimed)',
    );
    expect(await repo.tip()).toBe(before);
  });

  it('refuses a renew without any lease', async () => {
    const result = await put({ renew: 'lock' });
    refused(result, 'invalid payload (renew needs a lease: set lease in params or in source)');
  });

  it('a reclaimed holder’s renew refuses, naming the reclaim', async () => {
    const { held, reclaim, at } = await reclaimed('lock-a');
    const result = await runCommand('out', {
      stdin: { source: source(SHORT), params: { renew: 'lock' } },
      args: [held.src],
    });
    refused(
      result,
      `lock lock-a is no longer held by this claim (reclaimed at ${at}: lease expired at ${held.lease})`,
    );
    expect(await repo.tip()).toBe(reclaim);
  });
});

describe('fencing after a reclaim', () => {
  it('the reclaimed holder’s release refuses with the exact line; the new holder keeps the lock', async () => {
    const { held, at } = await reclaimed('lock-a');
    const next = await claim('lock-a', { lease: '1h' });
    const result = await runCommand('out', {
      stdin: { source: source(), params: { release: 'lock' } },
      args: [held.src],
    });
    refused(
      result,
      `lock lock-a is no longer held by this claim (reclaimed at ${at}: lease expired at ${held.lease})`,
    );
    expect(result.stderr.trimEnd().split('\n').at(-1)).toBe(
      `error: lock lock-a is no longer held by this claim (reclaimed at ${at}: lease expired at ${held.lease})`,
    );
    expect(await repo.tip()).toBe(next.ref);
    expect((await repo.state('pool')).claimed).toContain('lock-a');
    // The new holder's own release goes through.
    succeeded(
      await runCommand('out', {
        stdin: { source: source(), params: { release: 'lock' } },
        args: [next.src],
      }),
    );
  });
});

describe('acquire with reclaim_expired', () => {
  it('waits, then takes the expired lock (reclaim and claim in one push) and nobody else’s', async () => {
    const expiring = await claim('lock-a');
    const kept = await claim('lock-b', { lease: '1h', lease_grace: '1s' });
    const before = await pushes();
    const started = Date.now();
    const result = await put({ acquire: true, reclaim_expired: true, wait_timeout: '20s' }, SHORT);
    const response = succeeded(result) as { version: { ref: string }; metadata: unknown };
    expect(Date.now()).toBeGreaterThan(Date.parse(expiring.lease!) + 1000);
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(response.metadata).toEqual([
      { name: 'lock_name', value: 'lock-a' },
      { name: 'pool_name', value: 'pool' },
    ]);
    const [claimSubject, reclaimSubject] = (
      await git(repo.bare, 'log', '-2', '--format=%s', repo.branch)
    )
      .split('\n')
      .filter(Boolean);
    expect([claimSubject, reclaimSubject]).toEqual(['claiming: lock-a', 'unclaiming: lock-a']);
    expect((await trailers(`${repo.branch}~1`))['Reclaimed-Token']).toBe(expiring.token);
    // The reclaim and the claim landed in one push.
    expect(await pushes()).toBe(before + 1);
    expect((await trailers(repo.branch))['Claim-Token']).not.toBe(kept.token);
    // lock-b (lease not over) and lock-ref (no lease) are untouched.
    const subjects = await repo.subjects();
    expect(subjects.filter((s) => s.endsWith('lock-b'))).toEqual(['claiming: lock-b']);
    expect(subjects.filter((s) => s.endsWith('lock-ref'))).toEqual([]);
  });

  it('with match, reclaims only an expired lock that matches', async () => {
    await claim('lock-a');
    const other = await claim('lock-b');
    await pastLease(other.lease);
    // Each seeded lock file is {"name": "<its name>"}.
    const result = await put(
      { acquire: true, reclaim_expired: true, match: { name: 'lock-b' } },
      SHORT,
    );
    const { metadata } = succeeded(result) as { metadata: { name: string; value: string }[] };
    expect(metadata[0]).toEqual({ name: 'lock_name', value: 'lock-b' });
    const subjects = await repo.subjects();
    expect(subjects.filter((s) => s === 'unclaiming: lock-a')).toEqual([]);
    expect(subjects.slice(0, 2)).toEqual(['claiming: lock-b', 'unclaiming: lock-b']);
  });

  it('without reclaim_expired an acquire keeps waiting past the lease', async () => {
    const expiring = await claim('lock-a');
    await claim('lock-b');
    await pastLease(expiring.lease);
    const result = await put({ acquire: true, wait_timeout: '1s' }, SHORT);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/timed out after 1s/);
    expect((await repo.state('pool')).claimed).toEqual(['lock-a', 'lock-b', 'lock-ref']);
  });
});

describe('pool release of a leased claim', () => {
  it('is refused while the lease runs, unless --force', async () => {
    await claim('lock-a', { lease: '1h' });
    const flags = ['--uri', daemon.url(repo.bare), '--branch', repo.branch, '--pool', 'pool'];
    const before = await repo.tip();
    const refusedRelease = await runScript('pool', '', { args: ['release', 'lock-a', ...flags] });
    expect(refusedRelease.code).toBe(1);
    expect(refusedRelease.stderr).toMatch(/under a lease until .*--force releases it anyway/);
    expect(await repo.tip()).toBe(before);
    const forced = await runScript('pool', '', {
      args: ['release', 'lock-a', '--force', ...flags],
    });
    expect(forced.code, forced.stderr).toBe(0);
    expect((await repo.state('pool')).unclaimed).toContain('lock-a');
  });
});

describe('leases on several locks at once', () => {
  it('renew of a set’s folder renews every lock in one push; one released and claimed again fences the set’s release', async () => {
    const taken = succeeded(await put({ acquire: true, count: 2 }, SHORT)) as {
      version: { ref: string };
    };
    const src = await scratchDir('pool-build-');
    succeeded(
      await runCommand('in', {
        stdin: { source: source(SHORT), version: taken.version },
        args: [join(src, 'lock')],
      }),
    );
    const lease = await readFile(join(src, 'lock', 'lease_expires'), 'utf8');
    expect(lease).toMatch(/^\d{4}-.*Z\n$/);
    const before = await pushes();
    const renewed = succeeded(
      await runCommand('out', {
        stdin: { source: source(SHORT), params: { renew: 'lock', lease: '1h' } },
        args: [src],
      }),
    ) as { version: { ref: string } };
    expect(renewed.version.ref).toBe(taken.version.ref);
    expect(await pushes()).toBe(before + 1);
    expect((await repo.subjects()).slice(0, 2).sort()).toEqual([
      'renewing: lock-a',
      'renewing: lock-b',
    ]);

    // Both leases now run an hour, past the claim's own: nothing to reap. A person reclaims one
    // by hand.
    await pastLease(lease.trim());
    const flags = ['--uri', daemon.url(repo.bare), '--branch', repo.branch, '--pool', 'pool'];
    succeeded(await reap());
    expect((await repo.state('pool')).claimed).toEqual(['lock-a', 'lock-b', 'lock-ref']);
    const forced = await runScript('pool', '', {
      args: ['release', 'lock-b', '--force', ...flags],
    });
    expect(forced.code, forced.stderr).toBe(0);
    succeeded(await put({ claim: 'lock-b' }));
    const tip = await repo.tip();
    const result = await runCommand('out', {
      stdin: { source: source(), params: { release: 'lock' } },
      args: [src],
    });
    refused(result, /^error: lock lock-b is no longer held by this claim \(claimed since .* by /m);
    expect(await repo.tip()).toBe(tip);
  });

  it('an acquire of two with reclaim_expired takes the unclaimed one and reclaims one expired', async () => {
    const expiring = await claim('lock-a');
    await pastLease(expiring.lease);
    const result = await put({ acquire: true, count: 2, reclaim_expired: true }, SHORT);
    succeeded(result);
    const subjects = (await repo.subjects()).slice(0, 3);
    expect(subjects[2]).toBe('unclaiming: lock-a');
    expect(subjects.slice(0, 2).sort()).toEqual(['claiming: lock-a', 'claiming: lock-b']);
    expect((await repo.state('pool')).claimed).toEqual(['lock-a', 'lock-b', 'lock-ref']);
  });
});

/** When `ref` was committed, as the fencing line says it (RFC 3339 UTC, to the second). */
async function commitTime(ref: string): Promise<string> {
  const seconds = Number((await git(repo.bare, 'log', '-1', '--format=%at', ref)).trim());
  return new Date(seconds * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** Renews the claim `held` got for `lease`; the Lease-Expires the renewal recorded. */
async function renewFor(held: { src: string }, lease: string): Promise<string> {
  succeeded(
    await runCommand('out', {
      stdin: { source: source(SHORT), params: { renew: 'lock', lease } },
      args: [held.src],
    }),
  );
  return (await trailers())['Lease-Expires']!;
}

describe('leases as other readers see them', () => {
  it('check with check_events [reclaimed] reports the reap’s commit, and never a renewal', async () => {
    const held = await claim('lock-a');
    const renewal = await renewFor(held, '1s');
    await pastLease(renewal);
    const reaped = succeeded(await reap()) as { version: { ref: string } };
    const check = await runCommand('check', {
      stdin: { source: source({ check_events: ['reclaimed'] }), version: { ref: held.ref } },
    });
    expect(JSON.parse(check.stdout)).toEqual([{ ref: reaped.version.ref }]);
  });

  it('pool report --json gives a holder’s lease as last renewed', async () => {
    const held = await claim('lock-a');
    const renewal = await renewFor(held, '2h');
    const flags = ['--uri', daemon.url(repo.bare), '--branch', repo.branch, '--pool', 'pool'];
    const report = await runScript('pool', '', { args: ['report', '--json', ...flags] });
    expect(report.code, report.stderr).toBe(0);
    const figures = JSON.parse(report.stdout) as {
      locks: { name: string; lease_expires?: string }[];
    };
    expect(figures.locks.find((lock) => lock.name === 'lock-a')?.lease_expires).toBe(renewal);
  });
});
