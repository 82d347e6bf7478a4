import { describe, expect, it } from 'vitest';
import { ConfigurationError } from '../../src/base/errors.js';
import { parseCheckRequest, parseInRequest, parseOutRequest } from '../../src/protocol/request.js';
import { ed25519KeyPair } from '../helpers/ssh2-keys.js';

// A real encrypted key and a real host key line: both are checked when the request is parsed.
const KEY = ed25519KeyPair({ passphrase: 'open sesame', cipher: 'aes256-ctr' });
const HOST_KEY = ed25519KeyPair();
const KNOWN_HOSTS = `[example.com]:2222 ${HOST_KEY.public}`;

const MINIMAL = { uri: 'git@example.com:locks.git', branch: 'master', pool: 'envs' };
const MISSING_OPERATION =
  'invalid payload (missing acquire, release, remove, claim, add, add_claimed, update, check, or check_unclaimed)';

/** The lines a refused request prints, in order. */
async function problems(
  parse: (text: string) => Promise<unknown>,
  request: unknown,
): Promise<readonly string[]> {
  const text = typeof request === 'string' ? request : JSON.stringify(request);
  try {
    await parse(text);
  } catch (error) {
    if (error instanceof ConfigurationError) return error.lines;
    throw error;
  }
  throw new Error('the request was accepted');
}

const out = (source: unknown, params: unknown = { acquire: true }) =>
  JSON.stringify({ source, params });

describe('unknown fields', () => {
  it('are named, with the field they were likely meant to be, when the request fails', async () => {
    expect(await problems(parseOutRequest, { source: MINIMAL, params: { aquire: true } })).toEqual([
      'invalid payload (missing acquire, release, remove, claim, add, add_claimed, update, check, or check_unclaimed)',
      'invalid payload (unknown params field "aquire" (did you mean "acquire"?))',
    ]);
  });

  it('are warnings with the same hint when the request is otherwise fine', async () => {
    const { warnings } = await parseCheckRequest(
      JSON.stringify({ source: { ...MINIMAL, retry_dealy: '1s' }, verison: {} }),
    );
    expect(warnings).toEqual([
      'warning: ignoring unknown source field "retry_dealy" (did you mean "retry_delay"?)',
      'warning: ignoring unknown request field "verison" (did you mean "version"?)',
    ]);
  });
});

describe('source', () => {
  it('parses every field of the source, already in the shapes the code uses', async () => {
    const { request, warnings } = await parseOutRequest(
      out({
        uri: 'ssh://git@example.com:2222/locks.git',
        branch: 'locks',
        pool: 'envs',
        private_key: KEY.private,
        private_key_passphrase: 'open sesame',
        private_key_user: 'deploy',
        forward_agent: true,
        username: 'robot',
        password: 'hunter22',
        git_config: [
          { name: 'user.name', value: 'Pool Bot' },
          { name: 'core.bigFileThreshold', value: 1048576 },
          { name: 'http.lowSpeedLimit', value: true },
        ],
        retry_delay: '1m30s',
        https_tunnel: {
          proxy_host: 'proxy.internal',
          proxy_port: 3128,
          proxy_user: 'me',
          proxy_password: 'proxy-secret',
        },
        skip_ssl_verification: true,
        known_hosts: KNOWN_HOSTS,
        git_timeout: '2m',
      }),
    );
    expect(warnings).toEqual([]);
    expect(request.source).toEqual({
      uri: 'ssh://git@example.com:2222/locks.git',
      branch: 'locks',
      pool: 'envs',
      privateKey: KEY.private,
      privateKeyPassphrase: 'open sesame',
      privateKeyUser: 'deploy',
      forwardAgent: true,
      username: 'robot',
      password: 'hunter22',
      gitConfig: [
        { name: 'user.name', value: 'Pool Bot' },
        { name: 'core.bigFileThreshold', value: '1048576' },
        { name: 'http.lowSpeedLimit', value: 'true' },
      ],
      retryDelayMs: 90_000,
      httpsTunnel: {
        proxyHost: 'proxy.internal',
        proxyPort: 3128,
        proxyUser: 'me',
        proxyPassword: 'proxy-secret',
      },
      skipSslVerification: true,
      knownHosts: KNOWN_HOSTS,
      gitTimeoutMs: 120_000,
      checkEvents: ['claimed', 'released', 'reclaimed', 'added', 'removed', 'updated'],
      checkLocks: undefined,
      leaseMs: undefined,
      leaseGraceMs: 300_000,
      reclaimExpired: false,
    });
  });

  it('defaults what is not given: 10s between polls, 5m per git command, no auth', async () => {
    const { request } = await parseOutRequest(out(MINIMAL));
    expect(request.source).toEqual({
      ...MINIMAL,
      privateKey: undefined,
      privateKeyPassphrase: undefined,
      privateKeyUser: undefined,
      forwardAgent: false,
      username: undefined,
      password: undefined,
      gitConfig: [],
      retryDelayMs: 10_000,
      httpsTunnel: undefined,
      skipSslVerification: false,
      knownHosts: undefined,
      gitTimeoutMs: 300_000,
      checkEvents: ['claimed', 'released', 'reclaimed', 'added', 'removed', 'updated'],
      checkLocks: undefined,
      leaseMs: undefined,
      leaseGraceMs: 300_000,
      reclaimExpired: false,
    });
  });

  it('treats null and empty optional fields as not given (YAML leaves them so)', async () => {
    const { request } = await parseOutRequest(
      out({
        ...MINIMAL,
        private_key: null,
        password: '',
        forward_agent: null,
        git_config: null,
        retry_delay: null,
        https_tunnel: null,
      }),
    );
    expect(request.source).toMatchObject({
      privateKey: undefined,
      password: undefined,
      forwardAgent: false,
      gitConfig: [],
      retryDelayMs: 10_000,
      httpsTunnel: undefined,
    });
  });

  it('takes the proxy port as a number or a string of digits', async () => {
    const { request } = await parseOutRequest(
      out({ ...MINIMAL, https_tunnel: { proxy_host: 'p', proxy_port: '8080' } }),
    );
    expect(request.source.httpsTunnel).toEqual({
      proxyHost: 'p',
      proxyPort: 8080,
      proxyUser: undefined,
      proxyPassword: undefined,
    });
  });

  it.each<[unknown, number]>([
    ['10s', 10_000],
    ['1m30s', 90_000],
    ['250ms', 250],
    ['1h', 3_600_000],
    ['1.5s', 1_500],
    ['0', 0],
    ['0s', 0],
    [100_000_000, 100],
    [10_000_000_000, 10_000],
    [1, 1],
    [0, 0],
  ])('retry_delay %j is %d ms', async (retryDelay, ms) => {
    const { request } = await parseOutRequest(out({ ...MINIMAL, retry_delay: retryDelay }));
    expect(request.source.retryDelayMs).toBe(ms);
  });

  it.each<[unknown, string]>([
    [
      '10',
      'invalid payload (retry_delay: invalid duration "10" (use Go syntax such as "10s", "1m30s", "250ms"))',
    ],
    [
      'ten seconds',
      'invalid payload (retry_delay: invalid duration "ten seconds" (use Go syntax such as "10s", "1m30s", "250ms"))',
    ],
    [1.5, 'invalid payload (retry_delay must be whole nanoseconds or a duration such as "10s")'],
    ['-1s', 'invalid payload (retry_delay must be zero or more)'],
    [-5, 'invalid payload (retry_delay must be zero or more)'],
    ['1000h', 'invalid payload (retry_delay is longer than 168h)'],
    // Whole, but past what a number holds exactly: too long all the same.
    [2 ** 53 + 2, 'invalid payload (retry_delay is longer than 168h)'],
    [true, 'invalid payload (retry_delay must be a duration such as "10s")'],
    [{ seconds: 10 }, 'invalid payload (retry_delay must be a duration such as "10s")'],
  ])('retry_delay %j is refused with one line naming it', async (retryDelay, line) => {
    expect(await problems(parseOutRequest, out({ ...MINIMAL, retry_delay: retryDelay }))).toEqual([
      line,
    ]);
  });

  it('refuses a zero git_timeout (it would fail every command)', async () => {
    expect(await problems(parseOutRequest, out({ ...MINIMAL, git_timeout: '0s' }))).toEqual([
      'invalid payload (git_timeout must be more than zero)',
    ]);
  });

  it.each([
    [{ branch: 'master', pool: 'envs' }, ['invalid payload (missing uri)']],
    [{ uri: 'u', pool: 'envs' }, ['invalid payload (missing branch)']],
    [{ uri: 'u', branch: 'master' }, ['invalid payload (missing pool)']],
    [
      { uri: '', branch: '', pool: '' },
      [
        'invalid payload (missing uri)',
        'invalid payload (missing branch)',
        'invalid payload (missing pool)',
      ],
    ],
    [{ uri: null, branch: 'master', pool: 'envs' }, ['invalid payload (missing uri)']],
    [
      {},
      [
        'invalid payload (missing uri)',
        'invalid payload (missing branch)',
        'invalid payload (missing pool)',
      ],
    ],
  ])('keeps the reference line for a missing required field: %j', async (source, lines) => {
    const version = { ref: 'abc123' };
    for (const [parse, request] of [
      [parseCheckRequest, { source, version }],
      [parseInRequest, { source, version }],
      [parseOutRequest, { source, params: { acquire: true } }],
    ] as const) {
      expect(await problems(parse, request)).toEqual(lines);
    }
  });

  it('reports all three reference lines when there is no source at all', async () => {
    expect(await problems(parseCheckRequest, {})).toEqual([
      'invalid payload (missing uri)',
      'invalid payload (missing branch)',
      'invalid payload (missing pool)',
    ]);
    expect(await problems(parseOutRequest, { source: null })).toEqual([
      'invalid payload (missing uri)',
      'invalid payload (missing branch)',
      'invalid payload (missing pool)',
      MISSING_OPERATION,
    ]);
  });

  it('names the field when a value has the wrong type', async () => {
    expect(
      await problems(
        parseOutRequest,
        out({
          uri: 42,
          branch: 'master',
          pool: 'envs',
          forward_agent: 'yes',
          skip_ssl_verification: 1,
          private_key: ['not', 'a', 'key'],
          git_config: { name: 'user.name', value: 'x' },
          https_tunnel: { proxy_host: 'p', proxy_port: 70000 },
        }),
      ),
    ).toEqual([
      'invalid payload (uri must be a string)',
      'invalid payload (private_key must be a string)',
      'invalid payload (forward_agent must be true or false)',
      'invalid payload (git_config must be a list of {name, value})',
      'invalid payload (https_tunnel.proxy_port must be a port number)',
      'invalid payload (skip_ssl_verification must be true or false)',
    ]);
    expect(await problems(parseOutRequest, out('git@example.com:locks.git'))).toEqual([
      'invalid payload (source must be an object)',
    ]);
  });

  it('refuses git_config entries without a name or a value', async () => {
    expect(
      await problems(parseOutRequest, out({ ...MINIMAL, git_config: [{ name: 'user.name' }] })),
    ).toEqual(['invalid payload (git_config entries need a string value)']);
    expect(
      await problems(parseOutRequest, out({ ...MINIMAL, git_config: [{ value: 'x' }] })),
    ).toEqual(['invalid payload (git_config entries need a string name)']);
  });

  it.each([
    ['a/b', 'invalid payload (pool "a/b" contains a path separator)'],
    ['..', 'invalid payload (pool ".." is not a name)'],
    ['.hidden', 'invalid payload (pool ".hidden" is a dotfile)'],
    ['-rf', 'invalid payload (pool "-rf" starts with "-")'],
    [':(glob)*', 'invalid payload (pool ":(glob)*" starts with ":")'],
    ['a\nb', 'invalid payload (pool "a\\x0ab" contains a control character)'],
  ])('refuses the pool %j before any git work', async (pool, line) => {
    expect(await problems(parseOutRequest, out({ ...MINIMAL, pool }))).toEqual([line]);
  });

  it.each(['-b', '--upload-pack=evil', 'a..b', 'a b', 'refs/heads/x.lock', 'x~1', 'x^', 'a:b'])(
    'refuses the branch %j',
    async (branch) => {
      expect(await problems(parseOutRequest, out({ ...MINIMAL, branch }))).toEqual([
        'invalid payload (branch is not a valid branch name)',
      ]);
    },
  );

  it.each(['master', 'locks/ci', 'release-1.2', 'feature_x'])(
    'accepts the branch %j',
    async (branch) => {
      expect((await parseOutRequest(out({ ...MINIMAL, branch }))).request.source.branch).toBe(
        branch,
      );
    },
  );

  it('accepts unknown fields with a warning naming each', async () => {
    const { request, warnings } = await parseOutRequest(
      out({ ...MINIMAL, paths: ['x'], tag_filter: 'v*' }, { acquire: true, timeout: '1m' }),
    );
    expect(request.operation).toEqual({ kind: 'acquire' });
    expect(warnings).toEqual([
      'warning: ignoring unknown source field "paths"',
      'warning: ignoring unknown source field "tag_filter"',
      'warning: ignoring unknown params field "timeout"',
    ]);
  });

  it('never repeats a secret in an error line', async () => {
    const lines = await problems(
      parseOutRequest,
      out({
        uri: 'https://robot:s3cr3t-token@example.com/locks.git',
        branch: 'master',
        pool: 'envs',
        password: 12345678,
        private_key_passphrase: { value: 'p4ssphrase' },
        retry_delay: 'p4ssphrase',
      }),
    );
    expect(lines.join('\n')).not.toMatch(/s3cr3t-token|12345678/);
    expect(lines).toContain('invalid payload (password must be a string)');
    expect(lines).toContain('invalid payload (private_key_passphrase must be a string)');
  });
});

describe('stdin', () => {
  it.each([
    ['', 'invalid payload (empty input: expected a JSON request on stdin)'],
    ['  \n', 'invalid payload (empty input: expected a JSON request on stdin)'],
    ['{"source": {"password": "hunter22"', 'invalid payload (stdin is not valid JSON)'],
    ['[1, 2]', 'invalid payload (expected a JSON object on stdin)'],
    ['"text"', 'invalid payload (expected a JSON object on stdin)'],
    ['null', 'invalid payload (expected a JSON object on stdin)'],
  ])('refuses %j with one line', async (text, line) => {
    for (const parse of [parseCheckRequest, parseInRequest, parseOutRequest]) {
      expect(await problems(parse, text)).toEqual([line]);
    }
  });
});

describe('check request', () => {
  it('takes an optional version', async () => {
    expect(
      (await parseCheckRequest(JSON.stringify({ source: MINIMAL }))).request.version,
    ).toBeUndefined();
    expect(
      (await parseCheckRequest(JSON.stringify({ source: MINIMAL, version: null }))).request.version,
    ).toBeUndefined();
    expect(
      (await parseCheckRequest(JSON.stringify({ source: MINIMAL, version: { ref: 'ABCdef0123' } })))
        .request.version,
    ).toBe('ABCdef0123');
  });

  it('takes a version that is not a commit id as no version, and never keeps it', async () => {
    for (const ref of ['bogus-ref', '--output=/tmp/x', 'HEAD~1', 'abc', '']) {
      const parsed = await parseCheckRequest(JSON.stringify({ source: MINIMAL, version: { ref } }));
      expect(parsed.request.version).toBeUndefined();
    }
    const { warnings } = await parseCheckRequest(
      JSON.stringify({ source: MINIMAL, version: { ref: 'bogus\u001b[2J-ref' } }),
    );
    expect(warnings).toEqual([
      'version.ref "bogus\\x1b[2J-ref" is not a commit id: answering with the latest commit that touched the pool',
    ]);
  });

  it('refuses a version that is not an object holding a string', async () => {
    expect(await problems(parseCheckRequest, { source: MINIMAL, version: 'abc123' })).toEqual([
      'invalid payload (version must be an object with a ref)',
    ]);
    expect(await problems(parseCheckRequest, { source: MINIMAL, version: { ref: 12 } })).toEqual([
      'invalid payload (version.ref must be a string)',
    ]);
  });

  it('takes check_events and check_locks, once each and in the order given', async () => {
    const { request, warnings } = await parseCheckRequest(
      JSON.stringify({
        source: {
          ...MINIMAL,
          check_events: ['released', 'reclaimed', 'released'],
          check_locks: ['env-*', 'db'],
        },
      }),
    );
    expect(warnings).toEqual([]);
    expect(request.source.checkEvents).toEqual(['released', 'reclaimed']);
    expect(request.source.checkLocks).toEqual(['env-*', 'db']);
  });

  it('reports a bad check_events beside every other problem, one line each', async () => {
    expect(
      await problems(parseCheckRequest, {
        source: { ...MINIMAL, branch: '', check_events: ['Released', 7], check_locks: 'x' },
      }),
    ).toEqual([
      'invalid payload (missing branch)',
      'invalid payload (check_events must be a list of events: claimed, released, reclaimed, added, removed, updated)',
      'invalid payload (check_locks must be a list of lock names or globs such as "env-*")',
    ]);
    expect(
      await problems(parseCheckRequest, { source: { ...MINIMAL, check_events: ['Released'] } }),
    ).toEqual([
      'invalid payload (check_events: unknown event "Released" (did you mean "released"?); the events are claimed, released, reclaimed, added, removed, updated)',
    ]);
  });
});

describe('in request', () => {
  it('takes the version and an optional depth', async () => {
    const ref = 'a'.repeat(40);
    expect(
      (await parseInRequest(JSON.stringify({ source: MINIMAL, version: { ref } }))).request,
    ).toEqual({
      source: expect.objectContaining(MINIMAL),
      version: ref,
      depth: undefined,
    });
    expect(
      (
        await parseInRequest(
          JSON.stringify({ source: MINIMAL, version: { ref }, params: { depth: 1 } }),
        )
      ).request.depth,
    ).toBe(1);
  });

  it('reports every problem at once', async () => {
    expect(
      await problems(parseInRequest, {
        source: { uri: 'u', pool: 'p' },
        version: { ref: 'HEAD~1' },
        params: { depth: 0 },
      }),
    ).toEqual([
      'invalid payload (missing branch)',
      'invalid payload (version.ref must be a commit id)',
      'invalid payload (params.depth must be a positive whole number)',
    ]);
  });

  it('refuses a request without a version', async () => {
    expect(await problems(parseInRequest, { source: MINIMAL })).toEqual([
      'invalid payload (missing version)',
    ]);
  });

  it.each([0, -1, 1.5, '1'])('refuses depth %j', async (depth) => {
    expect(
      await problems(parseInRequest, {
        source: MINIMAL,
        version: { ref: 'abcd' },
        params: { depth },
      }),
    ).toEqual(['invalid payload (params.depth must be a positive whole number)']);
  });

  it('warns about unknown params', async () => {
    expect(
      (
        await parseInRequest(
          JSON.stringify({
            source: MINIMAL,
            version: { ref: 'abcd' },
            params: { skip_download: true },
          }),
        )
      ).warnings,
    ).toEqual(['warning: ignoring unknown params field "skip_download"']);
  });
});

describe('out request', () => {
  it.each<[Record<string, unknown>, unknown]>([
    [{ acquire: true }, { kind: 'acquire' }],
    [{ claim: 'lock-a' }, { kind: 'claim', name: 'lock-a' }],
    [{ release: 'lock-step' }, { kind: 'release', step: 'lock-step' }],
    [{ add: 'new' }, { kind: 'add', step: 'new' }],
    [{ add_claimed: 'new' }, { kind: 'add_claimed', step: 'new' }],
    [{ remove: 'old' }, { kind: 'remove', step: 'old' }],
    [{ update: 'meta' }, { kind: 'update', step: 'meta' }],
    [{ check: 'lock-step' }, { kind: 'check', step: 'lock-step' }],
    [{ check_unclaimed: 'lock-step' }, { kind: 'check_unclaimed', step: 'lock-step' }],
    [
      { acquire: false, release: 'lock-step' },
      { kind: 'release', step: 'lock-step' },
    ],
    [
      { release: 'lock-step', claim: '', add: null },
      { kind: 'release', step: 'lock-step' },
    ],
  ])('params %j are one operation', async (params, operation) => {
    expect((await parseOutRequest(out(MINIMAL, params))).request.operation).toEqual(operation);
  });

  it.each([{}, { acquire: false }, { release: '' }, { claim: null }])(
    'keeps the reference line when no operation is given: %j',
    async (params) => {
      expect(await problems(parseOutRequest, out(MINIMAL, params))).toEqual([MISSING_OPERATION]);
    },
  );

  it('keeps the reference line when params are missing entirely', async () => {
    expect(await problems(parseOutRequest, { source: MINIMAL })).toEqual([MISSING_OPERATION]);
  });

  it('refuses two operations in one put', async () => {
    expect(
      await problems(parseOutRequest, out(MINIMAL, { acquire: true, release: 'lock-step' })),
    ).toEqual([
      'invalid payload (params has more than one operation: acquire, release; a put does exactly one)',
    ]);
  });

  it('reports every problem at once, source first', async () => {
    expect(
      await problems(parseOutRequest, {
        source: { pool: 'envs', retry_delay: 'soon' },
        params: { wait_timeout: '0s' },
      }),
    ).toEqual([
      'invalid payload (missing uri)',
      'invalid payload (missing branch)',
      'invalid payload (retry_delay: invalid duration "soon" (use Go syntax such as "10s", "1m30s", "250ms"))',
      'invalid payload (wait_timeout must be more than zero)',
    ]);
    expect(
      await problems(parseOutRequest, { source: { uri: 'u', pool: 'p' }, params: {} }),
    ).toEqual(['invalid payload (missing branch)', MISSING_OPERATION]);
  });

  it.each([
    ['../etc', 'invalid payload (claim: lock name "../etc" contains a path separator)'],
    ['.secret', 'invalid payload (claim: lock name ".secret" is a dotfile)'],
    ['a\u0000b', 'invalid payload (claim: lock name "a\\x00b" contains a control character)'],
    ['x'.repeat(256), 'invalid payload (claim: lock name is longer than 255 bytes)'],
  ])('refuses claiming the unsafe name %j', async (name, line) => {
    expect(await problems(parseOutRequest, out(MINIMAL, { claim: name }))).toEqual([line]);
  });

  it.each([
    [{ acquire: 'yes' }, 'invalid payload (acquire must be true or false)'],
    [{ claim: 7 }, 'invalid payload (claim must be a lock name or a list of them)'],
    [{ release: true }, 'invalid payload (release must be the name of a step folder)'],
    [{ add: ['a'] }, 'invalid payload (add must be the name of a step folder)'],
    [{ update: 'a\u0000b' }, 'invalid payload (update: step folder contains a NUL character)'],
  ])('names the param with the wrong type: %j', async (params, line) => {
    expect(await problems(parseOutRequest, out(MINIMAL, params))).toEqual([line]);
  });

  it('takes count with acquire, and a list of names for claim', async () => {
    expect(
      (await parseOutRequest(out(MINIMAL, { acquire: true, count: 3 }))).request.operation,
    ).toEqual({ kind: 'acquire', count: 3 });
    expect((await parseOutRequest(out(MINIMAL, { claim: ['a', 'b'] }))).request.operation).toEqual({
      kind: 'claim',
      name: 'a',
      names: ['a', 'b'],
    });
    // A list of one is a claim of that lock, as the reference's claim is.
    expect((await parseOutRequest(out(MINIMAL, { claim: ['a'] }))).request.operation).toEqual({
      kind: 'claim',
      name: 'a',
    });
  });

  it.each([
    [{ acquire: true, count: 0 }, 'invalid payload (count must be a whole number from 1 to 100)'],
    [{ acquire: true, count: 1.5 }, 'invalid payload (count must be a whole number from 1 to 100)'],
    [{ acquire: true, count: '2' }, 'invalid payload (count must be a whole number from 1 to 100)'],
    [{ acquire: true, count: 101 }, 'invalid payload (count must be a whole number from 1 to 100)'],
    [{ claim: 'a', count: 2 }, 'invalid payload (count goes with acquire: true only)'],
    [{ claim: [] }, 'invalid payload (claim must not be an empty list)'],
    [{ claim: ['a', 'a'] }, 'invalid payload (claim lists "a" more than once)'],
    [
      { claim: ['a', '../b'] },
      'invalid payload (claim: lock name "../b" contains a path separator)',
    ],
    [{ claim: ['a', 7] }, 'invalid payload (claim must be a lock name or a list of them)'],
  ])('refuses a bad count or claim list: %j', async (params, line) => {
    expect(await problems(parseOutRequest, out(MINIMAL, params))).toEqual([line]);
  });

  it('refuses params that are not an object', async () => {
    expect(await problems(parseOutRequest, out(MINIMAL, ['acquire']))).toEqual([
      'invalid payload (params must be an object)',
    ]);
  });

  it('parses wait_timeout as a Go duration', async () => {
    expect(
      (await parseOutRequest(out(MINIMAL, { acquire: true, wait_timeout: '2m' }))).request
        .waitTimeoutMs,
    ).toBe(120_000);
    expect((await parseOutRequest(out(MINIMAL))).request.waitTimeoutMs).toBeUndefined();
  });
});

describe('match and match_name', () => {
  const acquire = async (source: Record<string, unknown>, params: Record<string, unknown>) =>
    (await parseOutRequest(out({ ...MINIMAL, ...source }, { acquire: true, ...params }))).request
      .operation;

  it('become the acquire filter, every value a string as the lock file is compared', async () => {
    expect(
      await acquire(
        {},
        { match: { region: 'eu', size: [2, 'xlarge'], gpu: true, 'net.zone': 'a' } },
      ),
    ).toEqual({
      kind: 'acquire',
      filter: {
        match: new Map([
          ['region', ['eu']],
          ['size', ['2', 'xlarge']],
          ['gpu', ['true']],
          ['net.zone', ['a']],
        ]),
      },
    });
    expect(await acquire({}, { match_name: 'eu-*' })).toEqual({
      kind: 'acquire',
      filter: { matchName: 'eu-*' },
    });
  });

  it('come from the source as the default, each replaced by its params field, never merged', async () => {
    const source = { match: { region: 'eu', size: 'large' }, match_name: 'env-*' };
    expect(await acquire(source, {})).toEqual({
      kind: 'acquire',
      filter: {
        match: new Map([
          ['region', ['eu']],
          ['size', ['large']],
        ]),
        matchName: 'env-*',
      },
    });
    expect(await acquire(source, { match: { region: 'us' } })).toEqual({
      kind: 'acquire',
      filter: { match: new Map([['region', ['us']]]), matchName: 'env-*' },
    });
    expect(await acquire(source, { match: {}, match_name: 'db-?' })).toEqual({
      kind: 'acquire',
      filter: { matchName: 'db-?' },
    });
    expect(await acquire({ match: { region: 'eu' } }, { match: {} })).toEqual({
      kind: 'acquire',
    });
    expect(await acquire({}, { match: null, match_name: null })).toEqual({ kind: 'acquire' });
  });

  it('are the source default of acquires only: another operation ignores them', async () => {
    const { request } = await parseOutRequest(
      out({ ...MINIMAL, match: { region: 'eu' } }, { claim: 'lock-a' }),
    );
    expect(request.operation).toEqual({ kind: 'claim', name: 'lock-a' });
  });

  it.each<[string, Record<string, unknown>, Record<string, unknown>, string]>([
    [
      'match not a map',
      {},
      { acquire: true, match: ['region=eu'] },
      'invalid payload (match must be a map of KEY: VALUE, such as {region: eu})',
    ],
    [
      'match a string',
      {},
      { acquire: true, match: 'region: eu' },
      'invalid payload (match must be a map of KEY: VALUE, such as {region: eu})',
    ],
    [
      'a value that is a map',
      {},
      { acquire: true, match: { net: { region: 'eu' } } },
      'invalid payload (match.net must be a string, number or boolean, or a list of them)',
    ],
    [
      'a list holding a map',
      {},
      { acquire: true, match: { size: ['large', { x: 1 }] } },
      'invalid payload (match.size must be a string, number or boolean, or a list of them)',
    ],
    [
      'a null value',
      {},
      { acquire: true, match: { region: null } },
      'invalid payload (match.region must be a string, number or boolean, or a list of them)',
    ],
    [
      'an empty list',
      {},
      { acquire: true, match: { size: [] } },
      'invalid payload (match.size is an empty list: no lock would match it)',
    ],
    [
      'a key with an empty part',
      {},
      { acquire: true, match: { 'net..region': 'eu' } },
      'invalid payload (match: "net..region" is not a key (a name, or names joined by dots for nested maps))',
    ],
    [
      'match_name empty',
      {},
      { acquire: true, match_name: '' },
      'invalid payload (match_name must not be empty: a glob on lock names, such as "eu-*")',
    ],
    [
      'match_name a list',
      {},
      { acquire: true, match_name: ['eu-*'] },
      'invalid payload (match_name must be a glob on lock names, such as "eu-*")',
    ],
    [
      'a bad source default',
      { match: { region: {} } },
      { acquire: true },
      'invalid payload (match.region must be a string, number or boolean, or a list of them)',
    ],
    [
      'match with release',
      {},
      { release: 'env', match: { region: 'eu' } },
      'invalid payload (match chooses the lock of an acquire; release names its lock)',
    ],
    [
      'both with claim',
      {},
      { claim: 'a', match: { region: 'eu' }, match_name: 'a*' },
      'invalid payload (match and match_name choose the lock of an acquire; claim names its lock)',
    ],
  ])('refuse %s in one line naming the field', async (_title, source, params, line) => {
    expect(await problems(parseOutRequest, out({ ...MINIMAL, ...source }, params))).toEqual([line]);
  });

  it('are suggested for a misspelled field', async () => {
    const { warnings } = await parseOutRequest(
      out({ ...MINIMAL, mach: { region: 'eu' } }, { acquire: true, match_nmae: 'eu-*' }),
    );
    expect(warnings).toEqual([
      'warning: ignoring unknown source field "mach" (did you mean "match"?)',
      'warning: ignoring unknown params field "match_nmae" (did you mean "match_name"?)',
    ]);
  });
});

describe('lease settings (SPEC §10)', () => {
  it('takes lease from params over source, lease_grace and reclaim_expired from source or params', async () => {
    const { request } = await parseOutRequest(
      out(
        { ...MINIMAL, lease: '1h', lease_grace: '30s', reclaim_expired: true },
        { acquire: true, lease: '2h' },
      ),
    );
    expect(request.leaseMs).toBe(7_200_000);
    expect(request.source.leaseMs).toBe(3_600_000);
    expect(request.source.leaseGraceMs).toBe(30_000);
    expect(request.reclaimExpired).toBe(true);
    const plain = (await parseOutRequest(out(MINIMAL))).request;
    expect([plain.leaseMs, plain.source.leaseGraceMs, plain.reclaimExpired]).toEqual([
      undefined,
      300_000,
      false,
    ]);
    const overridden = await parseOutRequest(
      out({ ...MINIMAL, reclaim_expired: true }, { acquire: true, reclaim_expired: false }),
    );
    expect(overridden.request.reclaimExpired).toBe(false);
  });

  it.each<[Record<string, unknown>, Record<string, unknown>, string]>([
    [{ lease: '0s' }, {}, 'invalid payload (lease must be more than zero)'],
    [
      { lease: 5 },
      {},
      'invalid payload (lease must be a duration such as "30m", not a bare number (5 would be nanoseconds))',
    ],
    [
      { lease_grace: 300 },
      {},
      'invalid payload (lease_grace must be a duration such as "30m", not a bare number (300 would be nanoseconds))',
    ],
    [
      {},
      { lease: 3600 },
      'invalid payload (lease must be a duration such as "30m", not a bare number (3600 would be nanoseconds))',
    ],
    [{}, { lease: '-1m' }, 'invalid payload (lease must be more than zero)'],
    [{ lease: '720h1s' }, {}, 'invalid payload (lease is longer than 720h (30 days))'],
    [{ lease_grace: '-1s' }, {}, 'invalid payload (lease_grace must be zero or more)'],
    [{ lease_grace: '800h' }, {}, 'invalid payload (lease_grace is longer than 720h (30 days))'],
    [{ reclaim_expired: 'yes' }, {}, 'invalid payload (reclaim_expired must be true or false)'],
  ])('refuses source %j params %j with one line', async (source, params, line) => {
    expect(
      await problems(parseOutRequest, out({ ...MINIMAL, ...source }, { acquire: true, ...params })),
    ).toEqual([line]);
  });

  it('accepts a lease of exactly 30 days, and zero grace', async () => {
    const { request } = await parseOutRequest(
      out({ ...MINIMAL, lease: '720h', lease_grace: '0s' }),
    );
    expect([request.leaseMs, request.source.leaseGraceMs]).toEqual([720 * 3_600_000, 0]);
  });

  it.each<[Record<string, unknown>, unknown]>([
    [
      { renew: 'lock', lease: '1h' },
      { kind: 'renew', step: 'lock' },
    ],
    [{ reap: true }, { kind: 'reap' }],
  ])('params %j are one operation', async (params, operation) => {
    expect((await parseOutRequest(out(MINIMAL, params))).request.operation).toEqual(operation);
  });

  it.each<[Record<string, unknown>, Record<string, unknown>, string]>([
    [
      {},
      { renew: 'lock' },
      'invalid payload (renew needs a lease: set lease in params or in source)',
    ],
    [
      {},
      { reap: true, acquire: true },
      'invalid payload (reap reclaims every expired lock of the pool and takes no other operation: drop acquire)',
    ],
    [
      {},
      { release: 'lock', lease: '1h' },
      'invalid payload (lease applies to acquire, claim, renew, not to release)',
    ],
    [
      {},
      { claim: 'a', reclaim_expired: true },
      'invalid payload (reclaim_expired applies to acquire, not to claim)',
    ],
    [{}, { reap: 'yes' }, 'invalid payload (reap must be true or false)'],
  ])('refuses source %j params %j with one line', async (source, params, line) => {
    expect(await problems(parseOutRequest, out({ ...MINIMAL, ...source }, params))).toEqual([line]);
  });
});
