// Bad input of every kind: exit 1, nothing on stdout, a short message naming the field, no stack
// trace, and a lock repository whose refs did not move. Run in-process (run-command.ts), except
// what only the process sees: the cap on the bytes read from stdin.
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLockRepo, git, type LockRepo } from '../helpers/lock-repo.js';
import { runCommand } from '../helpers/run-command.js';
import { runScript, tempDir } from '../helpers/run-script.js';
import { source } from '../helpers/source.js';

let repo: LockRepo;
/** Build folder with step folders for every kind of broken step. */
let src: string;
let outside: string;
let dest: string;

beforeAll(async () => {
  repo = await createLockRepo({ pool: { unclaimed: ['lock-a'], claimed: ['lock-b'] } });
  src = await tempDir();
  outside = await tempDir();
  dest = await tempDir();
  const step = async (name: string, files: Record<string, string>) => {
    await mkdir(join(src, name));
    for (const [file, content] of Object.entries(files))
      await writeFile(join(src, name, file), content);
  };
  await step('good', { name: 'lock-b\n', metadata: 'm\n' });
  await step('no-name', {});
  await step('empty-name', { name: '\n' });
  await step('blank-name', { name: '   \n' });
  await step('path-name', { name: '../x\n' });
  await step('nested-name', { name: 'a/b\n' });
  await step('dot-name', { name: '.hidden\n' });
  await step('control-name', { name: 'a\u0007b\n' });
  await step('long-name', { name: `${'n'.repeat(300)}\n` });
  await step('no-metadata', { name: 'new-lock\n' });
  await writeFile(join(outside, 'name'), 'lock-b\n');
  await symlink(outside, join(src, 'escape'));
  await writeFile(join(src, 'a-file'), 'not a folder');
});

afterAll(async () => repo?.cleanup());

async function refs(): Promise<string> {
  return git(repo.bare, 'for-each-ref', '--format=%(refname) %(objectname)');
}

/** Cases are listed before the repository exists: its path is filled in when a case runs. */
const LOCKS = '@LOCK_REPOSITORY@';

function requestText(request: unknown): string {
  if (typeof request === 'string') return request;
  return JSON.stringify(request).replaceAll(LOCKS, repo.bare);
}

type Script = 'check' | 'in' | 'out';

interface Case {
  name: string;
  script: Script;
  /** A string is sent as is; anything else as JSON. */
  request: unknown;
  /** What the message must mention (the field, or the reference's own words). */
  says: RegExp;
  /** Override the script's argument (SRC / DEST); `null` for none at all. */
  args?: string[] | null;
  /** Run as a process: what is refused is the reading of stdin itself. */
  spawned?: boolean;
}

const scripts: Script[] = ['check', 'in', 'out'];
/** A valid request for each script, to which one broken part is added. */
const base = (script: Script, extra: Record<string, unknown> = {}) =>
  script === 'check'
    ? { source: source(LOCKS), ...extra }
    : script === 'in'
      ? {
          source: source(LOCKS),
          version: { ref: 'a'.repeat(40) },
          ...extra,
        }
      : { source: source(LOCKS), params: { acquire: true }, ...extra };

const cases: Case[] = [];

// The envelope: stdin that is not a request at all.
for (const script of scripts) {
  cases.push(
    { name: 'empty stdin', script, request: '', says: /empty input/ },
    { name: 'whitespace stdin', script, request: ' \n\t', says: /empty input/ },
    { name: 'not JSON', script, request: 'acquire please', says: /not valid JSON/ },
    { name: 'truncated JSON', script, request: '{"source": {"uri": ', says: /not valid JSON/ },
    { name: 'a JSON array', script, request: '[]', says: /JSON object/ },
    { name: 'JSON null', script, request: 'null', says: /JSON object/ },
    { name: 'a JSON number', script, request: '42', says: /JSON object/ },
    { name: 'a JSON string', script, request: '"out"', says: /JSON object/ },
    { name: 'no source', script, request: {}, says: /missing uri/ },
    { name: 'source not an object', script, request: { source: 'x' }, says: /source/ },
  );
}

// source fields, each broken on its own, for every script.
const badSources: [string, Record<string, unknown>, RegExp][] = [
  ['uri of the wrong type', { uri: 5 }, /uri/],
  ['missing branch', { branch: undefined }, /missing branch/],
  ['empty pool', { pool: '' }, /missing pool/],
  ['branch as a list', { branch: [] }, /branch/],
  ['uri that is an option', { uri: '--upload-pack=touch /tmp/pwned' }, /uri/],
  ['uri with a newline', { uri: `${'/tmp'}\n/x` }, /uri/],
  ['branch that is an option', { branch: '-x' }, /branch/],
  ['branch with ..', { branch: 'a..b' }, /branch/],
  ['pool ../x', { pool: '../x' }, /pool/],
  ['pool a/b', { pool: 'a/b' }, /pool/],
  ['pool absolute', { pool: '/etc' }, /pool/],
  ['pool dotfile', { pool: '.git' }, /pool/],
  ['pool ..', { pool: '..' }, /pool/],
  ['pool with a control character', { pool: 'po\u0001ol' }, /pool/],
  ['pool that is an option', { pool: '-p' }, /pool/],
  ['pool with pathspec magic', { pool: ':(glob)*' }, /pool/],
  ['retry_delay unknown unit', { retry_delay: '10 parsecs' }, /retry_delay/],
  ['retry_delay negative', { retry_delay: '-1s' }, /retry_delay/],
  ['retry_delay absurd', { retry_delay: '100000h' }, /retry_delay/],
  ['retry_delay fractional nanos', { retry_delay: 1.5 }, /retry_delay/],
  ['retry_delay huge number', { retry_delay: 1e300 }, /retry_delay/],
  ['retry_delay a boolean', { retry_delay: true }, /retry_delay/],
  ['git_timeout zero', { git_timeout: '0s' }, /git_timeout/],
  ['git_config not a list', { git_config: 'user.name=x' }, /git_config/],
  ['git_config entry without name', { git_config: [{ value: 'x' }] }, /git_config/],
  [
    'https_tunnel port out of range',
    { https_tunnel: { proxy_host: 'h', proxy_port: '99999' } },
    /proxy_port/,
  ],
  ['https_tunnel without host', { https_tunnel: { proxy_port: 8080 } }, /proxy_host/],
  ['forward_agent a string', { forward_agent: 'yes' }, /forward_agent/],
  ['private_key a number', { private_key: 12 }, /private_key/],
  ['match not a map', { match: 'region=eu' }, /\(match must be a map of KEY: VALUE/],
  ['match_name a number', { match_name: 5 }, /\(match_name must be a glob on lock names/],
];
for (const script of scripts) {
  for (const [name, change, says] of badSources) {
    cases.push({
      name,
      script,
      request: { ...base(script), source: { ...source(LOCKS), ...change } },
      says,
    });
  }
}

// out: params.
const outCases: [string, unknown, RegExp, string[]?][] = [
  ['no params', undefined, /missing acquire, release, remove, claim/],
  ['params a list', [], /params/],
  ['acquire false only', { acquire: false }, /missing acquire/],
  ['acquire a string', { acquire: 'yes' }, /acquire/],
  ['two operations', { acquire: true, release: 'good' }, /more than one operation/],
  ['three operations', { claim: 'lock-a', add: 'good', remove: 'good' }, /more than one operation/],
  ['claim ../x', { claim: '../x' }, /claim.*path separator/],
  ['claim a/b', { claim: 'a/b' }, /claim.*path separator/],
  ['claim a\\b', { claim: 'a\\b' }, /claim.*path separator/],
  ['claim a dotfile', { claim: '.gitkeep' }, /claim.*dotfile/],
  ['claim ..', { claim: '..' }, /claim/],
  // An empty value counts as absent, as in the reference: its line names every operation.
  ['claim empty', { claim: '' }, /missing acquire, release, remove, claim/],
  ['claim with a newline', { claim: 'a\nb' }, /claim.*control/],
  ['claim with NUL', { claim: 'a\u0000b' }, /claim.*control/],
  ['claim with DEL', { claim: 'a\u007fb' }, /claim.*control/],
  ['claim longer than 255 bytes', { claim: 'é'.repeat(200) }, /claim.*255 bytes/],
  ['claim a number', { claim: 7 }, /claim/],
  ['release empty', { release: '' }, /missing acquire, release/],
  ['release a number', { release: 1 }, /release/],
  ['release with NUL', { release: 'a\u0000b' }, /release/],
  ['wait_timeout unknown', { acquire: true, wait_timeout: 'a while' }, /wait_timeout/],
  ['wait_timeout negative', { acquire: true, wait_timeout: '-5s' }, /wait_timeout/],
  ['wait_timeout zero', { acquire: true, wait_timeout: 0 }, /wait_timeout/],
  ['wait_timeout absurd', { acquire: true, wait_timeout: '9999999h' }, /wait_timeout/],
  ['step ../outside', { release: '../outside' }, /release.*outside/],
  ['step absolute', { release: '/etc' }, /release.*outside/],
  ['step symlink out of SRC', { release: 'escape' }, /release.*outside/],
  ['step missing', { release: 'not-there' }, /release.*does not exist/],
  ['step that is a file', { remove: 'a-file' }, /remove.*does not exist/],
  ['step without name', { release: 'no-name' }, /release.*"name"/],
  ['step with empty name', { remove: 'empty-name' }, /remove.*empty/],
  ['step with blank name', { check: 'blank-name' }, /check.*empty/],
  ['step name ../x', { release: 'path-name' }, /release.*lock name/],
  ['step name a/b', { add: 'nested-name' }, /add.*lock name/],
  ['step name dotfile', { update: 'dot-name' }, /update.*dotfile/],
  [
    'step name with a control character',
    { check_unclaimed: 'control-name' },
    /check_unclaimed.*control/,
  ],
  ['step name too long', { add_claimed: 'long-name' }, /add_claimed.*255/],
  ['add without metadata', { add: 'no-metadata' }, /add.*metadata/],
  ['match a list', { acquire: true, match: ['region'] }, /\(match must be a map of KEY: VALUE/],
  ['match value a map', { acquire: true, match: { net: {} } }, /\(match\.net must be a string/],
  ['match empty list', { acquire: true, match: { size: [] } }, /\(match\.size is an empty list/],
  ['match key ".x"', { acquire: true, match: { '.x': 'a' } }, /\(match: "\.x" is not a key/],
  ['match_name empty', { acquire: true, match_name: '' }, /\(match_name must not be empty/],
  [
    'match with release',
    { release: 'good', match: { region: 'eu' } },
    /\(match chooses the lock of an acquire; release names its lock\)/,
  ],
  [
    'match_name with claim',
    { claim: 'lock-a', match_name: 'lock-*' },
    /\(match_name chooses the lock of an acquire; claim names its lock\)/,
  ],
];
for (const [name, params, says] of outCases) {
  cases.push({
    name,
    script: 'out',
    request: { source: source(LOCKS), params },
    says,
  });
}
cases.push({
  name: 'no SRC argument',
  script: 'out',
  request: { source: source(LOCKS), params: { acquire: true } },
  says: /usage: out/,
  args: null,
});

// in: versions that are not commit ids never reach git as options.
const inVersions: [string, unknown, RegExp][] = [
  ['no version', undefined, /missing version/],
  ['version a string', 'abc', /version/],
  ['version without ref', {}, /version.ref/],
  ['ref an option', { ref: '-x' }, /version.ref.*commit id/],
  ['ref --output', { ref: '--output=/tmp/pwned' }, /version.ref.*commit id/],
  ['ref HEAD', { ref: 'HEAD' }, /version.ref.*commit id/],
  ['ref with a revision suffix', { ref: 'abcd~1' }, /version.ref.*commit id/],
  ['ref a range', { ref: 'abcd..ef01' }, /version.ref.*commit id/],
  ['ref a number', { ref: 1234 }, /version.ref/],
  ['ref too long', { ref: 'a'.repeat(65) }, /version.ref/],
  ['ref not on the branch', { ref: 'deadbeefdeadbeefdeadbeefdeadbeefdeadbeef' }, /version/],
];
for (const [name, version, says] of inVersions) {
  cases.push({
    name,
    script: 'in',
    request: { source: source(LOCKS), version },
    says,
  });
}
cases.push(
  {
    name: 'depth zero',
    script: 'in',
    request: base('in', { params: { depth: 0 } }),
    says: /params.depth/,
  },
  {
    name: 'depth a string',
    script: 'in',
    request: base('in', { params: { depth: '1' } }),
    says: /params.depth/,
  },
  {
    name: 'no DEST argument',
    script: 'in',
    request: base('in'),
    says: /usage: in/,
    args: null,
  },
);
cases.push(
  {
    // check takes such a ref as an unknown version (check.test.ts); in refuses it.
    name: 'ref an option',
    script: 'in',
    request: { source: source(LOCKS), version: { ref: '--all' } },
    says: /version.ref/,
  },
  {
    name: 'version a list',
    script: 'check',
    request: { source: source(LOCKS), version: ['x'] },
    says: /version/,
  },
);

// Very large requests: up to the 1 MiB a request may hold, and past it; a few short lines out.
const MB = 1024 * 1024;
const NEARLY_MB = MB - 64 * 1024;
cases.push(
  {
    name: 'nearly 1 MiB lock name',
    script: 'out',
    request: {
      source: source(LOCKS),
      params: { claim: 'x'.repeat(NEARLY_MB) },
    },
    says: /claim.*255 bytes/,
  },
  {
    name: 'nearly 1 MiB duration',
    script: 'out',
    request: {
      source: source(LOCKS),
      params: { acquire: true, wait_timeout: '9'.repeat(NEARLY_MB) },
    },
    says: /wait_timeout/,
  },
  {
    name: 'nearly 1 MiB pool name',
    script: 'check',
    request: { source: source(LOCKS, { pool: `.${'p'.repeat(NEARLY_MB)}` }) },
    says: /pool/,
  },
  {
    name: 'nearly 1 MiB of garbage',
    script: 'in',
    request: `{"source": ${'['.repeat(NEARLY_MB)}`,
    says: /not valid JSON/,
  },
  ...scripts.map((script) => ({
    name: '5 MB request',
    script,
    request: base(script, { padding: 'x'.repeat(5 * MB) }),
    says: /^invalid payload \(the request on stdin is larger than 1 MiB\)$/m,
    spawned: true,
  })),
  {
    name: 'deeply nested JSON',
    script: 'check',
    request: `{"source": ${'['.repeat(200_000)}${']'.repeat(200_000)}}`,
    says: /source/,
  },
  {
    name: '50,000 broken git_config entries',
    script: 'out',
    request: {
      source: source(LOCKS, {
        git_config: Array.from({ length: 50_000 }, (_, i) => ({ name: i })),
      }),
      params: { acquire: true },
    },
    says: /git_config/,
  },
  {
    name: '40,000 unknown fields next to a bad one',
    script: 'out',
    request: {
      source: {
        ...source(LOCKS, { pool: '../x' }),
        ...Object.fromEntries(Array.from({ length: 40_000 }, (_, i) => [`extra_${i}`, i])),
      },
      params: { acquire: true },
    },
    says: /pool/,
  },
);

// A misspelled field is named with the field it was meant to be, even when the request fails.
cases.push(
  {
    name: 'a misspelled operation',
    script: 'out',
    request: { source: source(LOCKS), params: { aquire: true } },
    says: /^invalid payload \(missing acquire, release.*\n+invalid payload \(unknown params field "aquire" \(did you mean "acquire"\?\)\)$/m,
  },
  {
    name: 'a misspelled source field next to a missing one',
    script: 'check',
    request: { source: { ...source(LOCKS), branch: undefined, retry_dealy: '1s' } },
    says: /^invalid payload \(unknown source field "retry_dealy" \(did you mean "retry_delay"\?\)\)$/m,
  },
  {
    name: 'a misspelled top-level key',
    script: 'out',
    request: { source: source(LOCKS), parms: { acquire: true } },
    says: /^invalid payload \(unknown request field "parms" \(did you mean "params"\?\)\)$/m,
  },
);

describe.concurrent('bad input', () => {
  it.for(cases.map((c) => ({ ...c, title: `${c.script}: ${c.name}` })))(
    '$title',
    async (c, ctx) => {
      const before = await refs();
      const args = c.args === null ? [] : (c.args ?? [c.script === 'out' ? src : dest]);
      const result = c.spawned
        ? await runScript(c.script, requestText(c.request), { args })
        : await runCommand(c.script, { stdin: requestText(c.request), args });
      ctx.expect(result.code, result.stderr).toBe(1);
      ctx.expect(result.stdout).toBe('');
      const lines = result.stderr.trimEnd().split('\n');
      ctx.expect(result.stderr).toMatch(c.says);
      // Short: a few lines, none of them long, however big the request.
      ctx.expect(lines.length).toBeLessThanOrEqual(25);
      for (const line of lines) ctx.expect(line.length).toBeLessThan(400);
      // No stack trace, no internals.
      ctx.expect(result.stderr).not.toMatch(/^\s+at /m);
      ctx
        .expect(result.stderr)
        .not.toMatch(/node:internal|\.js:\d+|Error:|ZodError|expected nonoptional/);
      ctx.expect(await refs()).toBe(before);
    },
  );
});

describe('bad input leaves the lock repository as it was', () => {
  it('has still exactly the seeded commit and locks', async () => {
    expect(await repo.subjects()).toEqual(['initial pools']);
    expect(await repo.state('pool')).toEqual({ claimed: ['lock-b'], unclaimed: ['lock-a'] });
  });
});
