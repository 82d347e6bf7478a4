// Property-based tests of the request parser: whatever arrives on stdin, it either returns a
// typed request or throws a ConfigurationError whose short lines name the field that is wrong.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConfigurationError } from '../../src/base/errors.js';
import { lockNameProblem } from '../../src/base/lock-name.js';
import {
  parseCheckRequest,
  parseInRequest,
  parseOutRequest,
  type Parsed,
} from '../../src/protocol/request.js';

const parsers = {
  check: parseCheckRequest,
  in: parseInRequest,
  out: parseOutRequest,
} as const;
type Script = keyof typeof parsers;
const SCRIPTS = Object.keys(parsers) as Script[];

const SOURCE = { uri: '/tmp/locks.git', branch: 'master', pool: 'pool' };
const VALID: Record<Script, Record<string, unknown>> = {
  check: { source: SOURCE },
  in: { source: SOURCE, version: { ref: 'abcdef0123' } },
  out: { source: SOURCE, params: { acquire: true } },
};

/** Runs a parser; returns the result or the ConfigurationError, and fails on anything else. */
async function attempt(
  script: Script,
  text: string,
): Promise<Parsed<unknown> | ConfigurationError> {
  try {
    return await parsers[script](text);
  } catch (error) {
    if (error instanceof ConfigurationError) return error;
    throw new Error(`${script} threw ${String(error)} for ${text.slice(0, 200)}`);
  }
}

function expectShortLines(error: ConfigurationError): void {
  expect(error.lines.length).toBeGreaterThan(0);
  expect(error.lines.length).toBeLessThanOrEqual(25);
  for (const line of error.lines) {
    expect(line).not.toContain('\n');
    expect(line.length).toBeLessThan(400);
    expect(line).toMatch(/^(invalid payload|warning)/);
    // zod's own wording for a missing key says nothing a user can act on.
    expect(line).not.toMatch(/nonoptional/);
  }
}

const anyJson = fc.jsonValue({ maxDepth: 4 });
/** Values a user might put in a field by mistake, weighted towards the tricky ones. */
const oddValue = fc.oneof(
  anyJson,
  fc.constantFrom('', ' ', '-x', '--all', '../x', 'a/b', '.hidden', '0', '-1s', 'NaN', '1e999h'),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.double(),
  fc.integer(),
);

describe('the request parser never crashes', () => {
  it.for(SCRIPTS)('%s: any text', async (script) => {
    await fc.assert(
      fc.asyncProperty(fc.string({ unit: 'binary', maxLength: 200 }), async (text) => {
        const result = await attempt(script, text);
        if (result instanceof ConfigurationError) expectShortLines(result);
      }),
      { numRuns: 500 },
    );
  });

  it.for(SCRIPTS)('%s: any JSON document', async (script) => {
    await fc.assert(
      fc.asyncProperty(anyJson, async (value) => {
        const result = await attempt(script, JSON.stringify(value));
        if (result instanceof ConfigurationError) expectShortLines(result);
      }),
      { numRuns: 500 },
    );
  });

  it.for(SCRIPTS)('%s: any JSON object with the right keys', async (script) => {
    const keys = ['source', 'version', 'params'];
    await fc.assert(
      fc.asyncProperty(fc.dictionary(fc.constantFrom(...keys), oddValue), async (value) => {
        const result = await attempt(script, JSON.stringify(value));
        if (result instanceof ConfigurationError) expectShortLines(result);
      }),
      { numRuns: 500 },
    );
  });
});

/** Top-level fields of `source`, and the word each one's message must contain. */
const SOURCE_FIELDS = [
  'uri',
  'branch',
  'pool',
  'private_key',
  'private_key_passphrase',
  'private_key_user',
  'forward_agent',
  'username',
  'password',
  'git_config',
  'retry_delay',
  'https_tunnel',
  'skip_ssl_verification',
  'known_hosts',
  'git_timeout',
];

describe('one broken field is named in the message', () => {
  it.for(SCRIPTS)('%s: a broken source field', async (script) => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...SOURCE_FIELDS), oddValue, async (field, value) => {
        const request = { ...VALID[script], source: { ...SOURCE, [field]: value } };
        const result = await attempt(script, JSON.stringify(request));
        if (!(result instanceof ConfigurationError)) return;
        expectShortLines(result);
        expect(result.message).toContain(field);
      }),
      { numRuns: 1000 },
    );
  });

  it('out: a broken params field', async () => {
    const fields = [
      'claim',
      'release',
      'add',
      'add_claimed',
      'remove',
      'update',
      'check',
      'check_unclaimed',
      'wait_timeout',
    ];
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...fields), oddValue, async (field, value) => {
        const params = field === 'wait_timeout' ? { acquire: true } : {};
        const request = { source: SOURCE, params: { ...params, [field]: value } };
        const result = await attempt('out', JSON.stringify(request));
        if (!(result instanceof ConfigurationError)) return;
        expectShortLines(result);
        expect(result.message).toContain(field);
      }),
      { numRuns: 1000 },
    );
  });

  it.for(['check', 'in'] as const)('%s: a broken version', async (script) => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          oddValue,
          oddValue.map((ref) => ({ ref })),
        ),
        async (version) => {
          const request = { ...VALID[script], version };
          const result = await attempt(script, JSON.stringify(request));
          if (!(result instanceof ConfigurationError)) return;
          expectShortLines(result);
          expect(result.message).toContain('version');
        },
      ),
      { numRuns: 1000 },
    );
  });
});

describe('what the parser accepts is safe to use', () => {
  it('a claimed name is accepted exactly when it is a safe lock name', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ unit: 'binary', maxLength: 300 }), async (name) => {
        const result = await attempt(
          'out',
          JSON.stringify({ source: SOURCE, params: { claim: name } }),
        );
        if (result instanceof ConfigurationError) {
          expectShortLines(result);
          expect(result.message).toContain('claim');
          expect(name === '' || lockNameProblem(name) !== undefined).toBe(true);
        } else {
          expect(lockNameProblem(name)).toBeUndefined();
          expect((result.request as { operation: unknown }).operation).toEqual({
            kind: 'claim',
            name,
          });
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('an accepted put holds exactly one operation', async () => {
    const ops = fc.record(
      {
        acquire: fc.boolean(),
        claim: fc.constantFrom('lock-a', ''),
        release: fc.constantFrom('step', ''),
        add: fc.constant('step'),
        remove: fc.constant('step'),
        update: fc.constant('step'),
        check: fc.constant('step'),
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(ops, async (params) => {
        const given = Object.entries(params).filter(([key, value]) =>
          key === 'acquire' ? value === true : value !== '',
        );
        const result = await attempt('out', JSON.stringify({ source: SOURCE, params }));
        if (given.length === 1) {
          expect(result).not.toBeInstanceOf(ConfigurationError);
          const { operation } = (result as Parsed<{ operation: { kind: string } }>).request;
          expect(operation.kind).toBe(given[0]![0]);
        } else {
          expect(result).toBeInstanceOf(ConfigurationError);
          expect((result as ConfigurationError).message).toMatch(
            given.length === 0 ? /missing acquire/ : /more than one operation/,
          );
        }
      }),
      { numRuns: 500 },
    );
  });

  it('accepted durations are whole milliseconds between zero and a week', async () => {
    const duration = fc.oneof(
      oddValue,
      fc
        .tuple(fc.nat(200), fc.nat(59), fc.nat(59), fc.nat(999))
        .map(([h, m, s, ms]) => `${h}h${m}m${s}s${ms}ms`),
      fc.bigInt({ min: -(10n ** 20n), max: 10n ** 20n }).map(Number),
    );
    await fc.assert(
      fc.asyncProperty(duration, async (retry_delay) => {
        const result = await attempt(
          'out',
          JSON.stringify({ ...VALID.out, source: { ...SOURCE, retry_delay } }),
        );
        if (result instanceof ConfigurationError) {
          expect(result.message).toContain('retry_delay');
          return;
        }
        const { retryDelayMs } = (result as Parsed<{ source: { retryDelayMs: number } }>).request
          .source;
        expect(Number.isSafeInteger(retryDelayMs)).toBe(true);
        expect(retryDelayMs).toBeGreaterThanOrEqual(0);
        expect(retryDelayMs).toBeLessThanOrEqual(7 * 24 * 3600_000);
        if (typeof retry_delay === 'string') {
          const parts = /^(\d+)h(\d+)m(\d+)s(\d+)ms$/.exec(retry_delay);
          if (parts) {
            const [h, m, s, ms] = parts.slice(1).map(Number) as [number, number, number, number];
            expect(retryDelayMs).toBe(((h * 60 + m) * 60 + s) * 1000 + ms);
          }
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('an accepted proxy port is a port number', async () => {
    const port = fc.oneof(
      oddValue,
      fc.integer({ min: -10, max: 100_000 }).map(String),
      fc.integer(),
    );
    await fc.assert(
      fc.asyncProperty(port, async (proxy_port) => {
        const https_tunnel = { proxy_host: '127.0.0.1', proxy_port };
        const result = await attempt(
          'out',
          JSON.stringify({ ...VALID.out, source: { ...SOURCE, https_tunnel } }),
        );
        if (result instanceof ConfigurationError) {
          expect(result.message).toContain('https_tunnel.proxy_port');
          return;
        }
        const tunnel = (result as Parsed<{ source: { httpsTunnel: { proxyPort: number } } }>)
          .request.source.httpsTunnel;
        expect(Number.isInteger(tunnel.proxyPort)).toBe(true);
        expect(tunnel.proxyPort).toBeGreaterThanOrEqual(1);
        expect(tunnel.proxyPort).toBeLessThanOrEqual(65535);
      }),
      { numRuns: 1000 },
    );
  });

  it('an accepted version is a commit id', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.string({ maxLength: 70 }), fc.stringMatching(/^[0-9a-f]{1,70}$/)),
        async (ref) => {
          const result = await attempt('in', JSON.stringify({ ...VALID.in, version: { ref } }));
          if (result instanceof ConfigurationError) {
            expect(result.message).toContain('version');
            return;
          }
          expect(ref).toMatch(/^[0-9a-fA-F]{4,64}$/);
        },
      ),
      { numRuns: 1000 },
    );
  });
});
