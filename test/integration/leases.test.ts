// Leases (SPEC §10) over a real git daemon: the Lease-Expires trailer on claims, what `in`
// writes for fencing, the lease as progress and `pool status` show it, and the refusals of
// lease settings that make no sense.
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startGitDaemon, type GitDaemon } from '../helpers/git-daemon.js';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { runCommand } from '../helpers/run-command.js';
import { runScript } from '../helpers/run-script.js';
import { source as lockSource } from '../helpers/source.js';
import {
  buildFolder,
  otherClone,
  refused,
  scratchDir,
  succeeded,
  commitTrailers,
} from '../helpers/steps.js';

let repo: LockRepo;
let daemon: GitDaemon;
beforeEach(async () => {
  repo = await createLockRepo({ pool: { unclaimed: ['lock-a'], claimed: ['lock-c'] } });
  daemon = await startGitDaemon(repo.root);
});
afterEach(async () => {
  await daemon.stop();
  await repo.cleanup();
});

const source = (extra: Record<string, unknown> = {}) => lockSource(daemon.url(repo.bare), extra);

const trailers = (ref?: string) => commitTrailers(repo, ref);

async function put(params: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  const src = await buildFolder();
  return runCommand('out', { stdin: { source: source(extra), params }, args: [src] });
}

async function get(ref: string) {
  const dest = join(await scratchDir('pool-in-'), 'lock');
  const result = await runCommand('in', {
    stdin: { source: source(), version: { ref } },
    args: [dest],
  });
  return { result, dest };
}

/** A renewal as SPEC §10 writes it, made by another client: an empty commit, same token. */
function renewByHand(name: string, token: string, lease: string): Promise<string> {
  return repo.commit(
    `renewing: ${name}\n\nBuild URL: https://ci.example.com/builds/2\n\nClaim-Token: ${token}\nLease-Expires: ${lease}`,
    async () => undefined,
  );
}

describe('a claim with a lease', () => {
  it('records Lease-Expires: the claim time plus the source lease', async () => {
    const result = await put({ acquire: true }, { lease: '90m' });
    const { version } = succeeded(result) as { version: { ref: string } };
    const recorded = await trailers(version.ref);
    expect(Date.parse(recorded['Lease-Expires']!) - Date.parse(recorded['Claimed-At']!)).toBe(
      90 * 60_000,
    );
  });

  it('takes the params lease over the source lease, for claim as for acquire', async () => {
    const result = await put({ claim: 'lock-a', lease: '2h' }, { lease: '10m' });
    const { version } = succeeded(result) as { version: { ref: string } };
    const recorded = await trailers(version.ref);
    expect(Date.parse(recorded['Lease-Expires']!) - Date.parse(recorded['Claimed-At']!)).toBe(
      2 * 3_600_000,
    );
  });

  it('pool claim --lease records it too', async () => {
    const flags = ['--uri', daemon.url(repo.bare), '--branch', repo.branch, '--pool', 'pool'];
    const result = await runScript('pool', '', {
      args: ['claim', 'lock-a', '--lease', '30m', ...flags],
    });
    expect(result.code, result.stderr).toBe(0);
    const recorded = await trailers(await repo.tip());
    expect(Date.parse(recorded['Lease-Expires']!) - Date.parse(recorded['Claimed-At']!)).toBe(
      30 * 60_000,
    );
  });

  it('has no Lease-Expires without a lease, as before', async () => {
    const { version } = succeeded(await put({ acquire: true })) as { version: { ref: string } };
    expect(await trailers(version.ref)).not.toHaveProperty('Lease-Expires');
  });
});

describe('in', () => {
  it('writes claim_token and lease_expires beside name and metadata', async () => {
    const { version } = succeeded(await put({ acquire: true }, { lease: '1h' })) as {
      version: { ref: string };
    };
    const recorded = await trailers(version.ref);
    const { result, dest } = await get(version.ref);
    succeeded(result);
    expect(await readFile(join(dest, 'claim_token'), 'utf8')).toBe(`${recorded['Claim-Token']}\n`);
    expect(await readFile(join(dest, 'lease_expires'), 'utf8')).toBe(
      `${recorded['Lease-Expires']}\n`,
    );
  });

  it('writes the lease of the latest renewal of that claim', async () => {
    const { version } = succeeded(await put({ acquire: true }, { lease: '1h' })) as {
      version: { ref: string };
    };
    const token = (await trailers(version.ref))['Claim-Token']!;
    await renewByHand('lock-a', token, '2030-01-01T00:00:00Z');
    await renewByHand('lock-a', 'another-claims-token', '2031-01-01T00:00:00Z');
    const { result, dest } = await get(version.ref);
    succeeded(result);
    expect(await readFile(join(dest, 'lease_expires'), 'utf8')).toBe('2030-01-01T00:00:00Z\n');
  });

  it('writes claim_token but no lease_expires for a claim without a lease', async () => {
    const { version } = succeeded(await put({ acquire: true })) as { version: { ref: string } };
    const { result, dest } = await get(version.ref);
    succeeded(result);
    expect(await readFile(join(dest, 'claim_token'), 'utf8')).toMatch(/^[0-9a-f-]{36}\n$/);
    await expect(readFile(join(dest, 'lease_expires'))).rejects.toThrow(/ENOENT/);
  });
});

describe('the lease as people see it', () => {
  it('pool status shows "lease expires in" and "expired … ago", and lease_expires in --json', async () => {
    succeeded(await put({ acquire: true }, { lease: '12m' }));
    await otherClone(repo).release('lock-c');
    await repo.commit(
      'claiming: lock-c\n\nBuild URL: https://ci.example.com/builds/1\n\nClaim-Token: t-old\nClaimed-At: 2020-01-01T00:00:00Z\nLease-Expires: 2020-01-01T00:10:00Z',
      (work) => rename(join(work, 'pool/unclaimed/lock-c'), join(work, 'pool/claimed/lock-c')),
    );
    const flags = ['--uri', daemon.url(repo.bare), '--branch', repo.branch, '--pool', 'pool'];
    const table = await runScript('pool', '', { args: ['status', ...flags] });
    expect(table.code, table.stderr).toBe(0);
    const rows = table.stdout.split('\n');
    expect(rows[0]).toMatch(/\bLEASE\b/);
    for (const row of rows) expect([...row].length).toBeLessThanOrEqual(100);
    expect(rows.find((row) => row.startsWith('lock-a'))).toMatch(
      /lease expires in 1[12]m(\d+s)?\b/,
    );
    // Whole hours are shown without minutes ("60646h ago" in the first minute of an hour).
    expect(rows.find((row) => row.startsWith('lock-c'))).toMatch(/lease expired \d+h(\d+m)? ago/);
    const json = await runScript('pool', '', { args: ['status', '--json', ...flags] });
    const entries = JSON.parse(json.stdout) as { name: string; lease_expires?: string }[];
    expect(entries.find((entry) => entry.name === 'lock-c')?.lease_expires).toBe(
      '2020-01-01T00:10:00Z',
    );
  });

  it('a waiting put names the holder’s lease', async () => {
    succeeded(await put({ acquire: true }, { lease: '12m' }));
    const result = await put({ acquire: true, wait_timeout: '1s' });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /"lock-a" held by .* \(for [^)]*, lease expires in 1[12]m(\d+s)?\)/,
    );
  });
});

describe('lease settings that make no sense', () => {
  const cases: [string, Record<string, unknown>, Record<string, unknown>, string][] = [
    ['a zero lease', {}, { lease: '0s' }, 'invalid payload (lease must be more than zero)'],
    ['a negative lease', { lease: '-5m' }, {}, 'invalid payload (lease must be more than zero)'],
    [
      'a lease above the ceiling',
      {},
      { lease: '721h' },
      'invalid payload (lease is longer than 720h (30 days))',
    ],
    [
      'a negative lease_grace',
      { lease_grace: '-1s' },
      {},
      'invalid payload (lease_grace must be zero or more)',
    ],
    [
      'a lease that is not a duration',
      {},
      { lease: 'soon' },
      'invalid payload (lease: invalid duration "soon"',
    ],
  ];
  for (const [title, extra, params, line] of cases) {
    it(`refuses ${title} with one line, committing nothing`, async () => {
      const before = await repo.tip();
      const result = await put({ acquire: true, ...params }, extra);
      refused(result, line);
      expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
      expect(await repo.tip()).toBe(before);
    });
  }

  it('refuses a lease on an operation that takes no claim', async () => {
    const src = await buildFolder({ lock: { name: 'lock-c\n' } });
    const result = await runCommand('out', {
      stdin: { source: source(), params: { release: 'lock', lease: '1h' } },
      args: [src],
    });
    refused(result, 'invalid payload (lease applies to acquire, claim, renew, not to release)');
  });
});

/** A reclaim as SPEC §10 writes it, made by another client. */
function reclaimByHand(name: string, token: string, reason: string): Promise<string> {
  return repo.commit(
    `unclaiming: ${name}\n\nBuild URL: https://ci.example.com/builds/9\n\nReclaimed-Token: ${token}\nReclaim-Reason: ${reason}\nReclaimed-By: https://ci.example.com/builds/9`,
    (work) => rename(join(work, 'pool/claimed', name), join(work, 'pool/unclaimed', name)),
  );
}

/** Claims lock-a with a put and gets it, as a job does: the folder a later put releases from. */
async function claimAndGet(lease = '1h') {
  const { version } = succeeded(await put({ acquire: true }, { lease })) as {
    version: { ref: string };
  };
  const src = await scratchDir('pool-build-');
  const fetched = await runCommand('in', {
    stdin: { source: source(), version },
    args: [join(src, 'lock')],
  });
  succeeded(fetched);
  const token = (await readFile(join(src, 'lock', 'claim_token'), 'utf8')).trim();
  return { src, token, claim: version.ref };
}

function putFrom(src: string, params: Record<string, unknown>) {
  return runCommand('out', { stdin: { source: source(), params }, args: [src] });
}

describe('fencing', () => {
  it('a reclaimed holder’s release refuses with the reclaim, and the new holder keeps the lock', async () => {
    const { src, token } = await claimAndGet();
    await reclaimByHand('lock-a', token, 'lease expired at 2026-01-01T00:00:00Z');
    const reclaimedAt = (await git(repo.bare, 'log', '-1', '--format=%at', repo.branch)).trim();
    const taken = succeeded(await put({ acquire: true })) as { version: { ref: string } };
    const before = await repo.tip();
    const result = await putFrom(src, { release: 'lock' });
    const at = new Date(Number(reclaimedAt) * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
    refused(
      result,
      `lock lock-a is no longer held by this claim (reclaimed at ${at}: lease expired at 2026-01-01T00:00:00Z)`,
    );
    expect(await repo.tip()).toBe(before);
    expect(taken.version.ref).toBe(before);
    expect((await repo.state('pool')).claimed).toContain('lock-a');
  });

  it('a release after the lock was released and claimed again names the new claim', async () => {
    const { src } = await claimAndGet();
    await otherClone(repo).release('lock-a');
    succeeded(await put({ acquire: true }, { lease: '1h' }));
    const claimedAt = (await trailers(repo.branch))['Claimed-At'];
    const before = await repo.tip();
    refused(
      await putFrom(src, { release: 'lock' }),
      `lock lock-a is no longer held by this claim (claimed since ${claimedAt} by CI Pool Resource <ci-pool@localhost>)`,
    );
    expect(await repo.tip()).toBe(before);
  });

  it('an update from such a folder fails at once instead of waiting for the new holder', async () => {
    const { src } = await claimAndGet();
    await writeFile(join(src, 'lock', 'metadata'), 'new\n');
    await otherClone(repo).release('lock-a');
    succeeded(await put({ acquire: true }));
    const started = Date.now();
    refused(await putFrom(src, { update: 'lock' }), /lock lock-a is no longer held by this claim/);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('the holder’s own release costs the fetch and the push, even after other commits', async () => {
    const { src } = await claimAndGet();
    // Others keep the branch moving: the claim is a few commits back from the tip.
    for (let i = 0; i < 5; i++) await repo.commit(`unrelated ${i}`, async () => undefined);
    const connections = () => daemon.log().match(/Connection from/g)?.length ?? 0;
    const before = connections();
    succeeded(await putFrom(src, { release: 'lock' }));
    expect(connections() - before).toBe(2);
    expect((await repo.state('pool')).unclaimed).toContain('lock-a');
  });

  it('a claim further back than the commits fetched with the tip is still found, and fenced', async () => {
    const { src, token } = await claimAndGet();
    for (let i = 0; i < 20; i++) await repo.commit(`unrelated ${i}`, async () => undefined);
    await reclaimByHand('lock-a', token, 'lease expired at 2026-01-01T00:00:00Z');
    succeeded(await put({ acquire: true }));
    for (let i = 0; i < 20; i++) await repo.commit(`more ${i}`, async () => undefined);
    const before = await repo.tip();
    refused(
      await putFrom(src, { release: 'lock' }),
      /lock lock-a is no longer held by this claim \(reclaimed at /,
    );
    expect(await repo.tip()).toBe(before);
  });

  it('the holder’s own release goes through, and a folder without claim_token acts as the reference’s', async () => {
    const { src } = await claimAndGet();
    succeeded(await putFrom(src, { release: 'lock' }));
    expect((await repo.state('pool')).unclaimed).toContain('lock-a');
    // The reference's `in` writes no claim_token: its folder releases whoever holds the lock.
    succeeded(await put({ acquire: true }));
    await rm(join(src, 'lock', 'claim_token'));
    succeeded(await putFrom(src, { release: 'lock' }));
    expect((await repo.state('pool')).unclaimed).toContain('lock-a');
  });
});
