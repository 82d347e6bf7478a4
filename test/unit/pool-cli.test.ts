import { describe, expect, it } from 'vitest';
import { parsePoolArguments } from '../../src/commands/pool/arguments.js';
import { statusEntries, statusTable } from '../../src/commands/pool/status.js';

describe('parsePoolArguments', () => {
  it('maps source flags and the command options, in any order', () => {
    const invocation = parsePoolArguments([
      '--uri',
      'git@host:locks.git',
      'claim',
      '--branch',
      'main',
      'env-a',
      '--pool',
      'envs',
      '--git-config',
      'user.name=Ops',
      '--git-config',
      'http.lowSpeedTime=5',
      '--wait-timeout',
      '5m',
      '--by',
      'ops@desk',
    ]);
    expect(invocation).toMatchObject({
      kind: 'claim',
      name: 'env-a',
      by: 'ops@desk',
      waitTimeout: '5m',
      source: {
        uri: 'git@host:locks.git',
        branch: 'main',
        pool: 'envs',
        gitConfig: ['user.name=Ops', 'http.lowSpeedTime=5'],
      },
    });
  });

  it('collects repeated --lock for init', () => {
    expect(parsePoolArguments(['init', '--lock', 'a', '--lock', 'b'])).toMatchObject({
      kind: 'init',
      locks: ['a', 'b'],
    });
  });

  it('collects --match for acquire, a key given twice matching any of its values', () => {
    expect(
      parsePoolArguments([
        'acquire',
        '--match',
        'region=eu',
        '--match',
        'size=large',
        '--match',
        'size=xlarge',
        '--match',
        'net.zone=a=b',
        '--match-name',
        'env-*',
      ]),
    ).toMatchObject({
      kind: 'acquire',
      match: new Map([
        ['region', ['eu']],
        ['size', ['large', 'xlarge']],
        ['net.zone', ['a=b']],
      ]),
      matchName: 'env-*',
    });
    expect(parsePoolArguments(['acquire'])).toMatchObject({ match: undefined });
  });

  it('help in every form', () => {
    for (const args of [['--help'], ['-h'], ['help'], ['claim', '--help'], ['help', 'claim']]) {
      expect(parsePoolArguments(args).kind).toBe('help');
    }
  });

  const refused: [string[], string][] = [
    [['init', '--lock', 'a', '--lock', 'a'], 'error: --lock names the same lock twice'],
    [
      ['status', 'extra'],
      'error: pool status takes no arguments, got "extra" (see pool status --help)',
    ],
    [
      ['remove', 'a', '--wait-timeout', '1s'],
      'error: pool remove does not take --wait-timeout (see pool remove --help)',
    ],
    [['claim', 'a\u0007'], 'error: lock name "a\\x07" contains a control character'],
    [
      ['acquire', '--match', 'region'],
      'error: --match needs KEY=VALUE (KEY dotted for nested maps), got "region"',
    ],
    [
      ['acquire', '--match', 'region='],
      'error: --match needs KEY=VALUE (KEY dotted for nested maps), got "region="',
    ],
    [
      ['acquire', '--match', 'net.=eu'],
      'error: --match needs KEY=VALUE (KEY dotted for nested maps), got "net.=eu"',
    ],
    [['acquire', '--match-name', ''], 'error: --match-name needs a glob, such as "eu-*"'],
    [['acquire', '--count', '0'], 'error: --count needs a whole number from 1 to 100, got "0"'],
    [['acquire', '--count', '2.5'], 'error: --count needs a whole number from 1 to 100, got "2.5"'],
    [['acquire', '--count', '101'], 'error: --count needs a whole number from 1 to 100, got "101"'],
    [
      ['claim', 'a', '--count', '2'],
      'error: pool claim does not take --count (see pool claim --help)',
    ],
    [
      ['acquire', 'env-a'],
      'error: pool acquire takes no arguments, got "env-a" (see pool acquire --help)',
    ],
    [
      ['claim', 'a', '--match', 'region=eu'],
      'error: pool claim does not take --match (see pool claim --help)',
    ],
  ];
  for (const [args, line] of refused) {
    it(`refuses ${JSON.stringify(args)}`, () => {
      expect(() => parsePoolArguments(args)).toThrow(line);
    });
  }
});

describe('status output', () => {
  const records = [
    { name: 'a', state: 'unclaimed' as const, by: 'x', since: new Date('2026-01-01T00:00:00Z') },
    {
      name: 'build-box',
      state: 'claimed' as const,
      by: 'https://ci/builds/1',
      since: new Date('2026-01-01T10:00:00Z'),
    },
    { name: 'c', state: 'claimed' as const },
  ];

  it('JSON: holder fields only for claimed locks, null when unknown', () => {
    expect(statusEntries(records)).toEqual([
      {
        name: 'a',
        state: 'unclaimed',
        holder: null,
        claimed_by: null,
        claimed_at: null,
        since: '2026-01-01T00:00:00Z',
      },
      {
        name: 'build-box',
        state: 'claimed',
        holder: 'build #1',
        claimed_by: 'https://ci/builds/1',
        claimed_at: '2026-01-01T10:00:00Z',
        since: '2026-01-01T10:00:00Z',
      },
      {
        name: 'c',
        state: 'claimed',
        holder: null,
        claimed_by: null,
        claimed_at: null,
        since: null,
      },
    ]);
  });

  it('table: aligned columns, "-" for no holder, "?" for unknown', () => {
    const now = Date.parse('2026-01-01T12:30:00Z');
    expect(statusTable(statusEntries(records), now)).toBe(
      [
        'LOCK       STATE      HOLDER    SINCE                 FOR',
        'a          unclaimed  -         2026-01-01T00:00:00Z  12h30m',
        'build-box  claimed    build #1  2026-01-01T10:00:00Z  2h30m',
        'c          claimed    ?         ?                     ?',
        '',
      ].join('\n'),
    );
    expect(statusTable(statusEntries(records), now, true)).toContain(
      'build-box  claimed    https://ci/builds/1  2026-01-01T10:00:00Z  2h30m',
    );
  });

  it('table: the short holder from a Concourse build URL; rows fit 100 columns', () => {
    const url =
      'https://ci.example.com/teams/platform/pipelines/deploy-production-eu/jobs/integration-tests-with-a-long-name/builds/1234';
    const long = [
      {
        name: 'a-lock-with-a-name-much-longer-than-the-column',
        state: 'claimed' as const,
        by: url,
        since: new Date('2026-01-01T10:00:00Z'),
      },
    ];
    const now = Date.parse('2026-01-01T12:30:00Z');
    const entries = statusEntries(long);
    expect(entries[0]).toMatchObject({
      holder: 'platform/deploy-production-eu/integration-tests-with-a-long-name #1234',
      claimed_by: url,
    });
    const lines = statusTable(entries, now).trimEnd().split('\n');
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(100);
    expect(lines[1]).toMatch(
      /^a-lock-with-a-name-much… {2}claimed {2}platform\/deploy-production-eu\/\S*… {2}2026-01-01T10:00:00Z {2}2h30m$/,
    );
    const wide = statusTable(entries, now, true);
    expect(wide).toContain(url);
    expect(wide).toContain('a-lock-with-a-name-much-longer-than-the-column');
  });
});
