// Turns the JSON on stdin into typed, fully defaulted requests for check, in and out (one place,
// so the three scripts validate alike and report every problem at once).
import * as z from 'zod';
import { ConfigurationError } from '../base/errors.js';
import { nanosToMs, parseGoDuration } from '../base/duration.js';
import { lockNameProblem, poolNameProblem, printable } from '../base/lock-name.js';
import { gitConfigKeyProblem } from './git-config-keys.js';
import { suggestField } from './field-suggestion.js';
import { decodeUserinfo, displayUri, uriCredentials } from '../base/logger.js';
import { parseKnownHosts } from '../transport/known-hosts.js';
import type { HttpsTunnel } from '../transport/ssh-config.js';

const DEFAULT_RETRY_DELAY_MS = 10_000;
const DEFAULT_GIT_TIMEOUT_MS = 5 * 60_000;
/** Anything longer is almost certainly a unit mistake ("10" meaning seconds, read as hours). */
const MAX_DURATION_MS = 7 * 24 * 3600_000;
/** No real duration is longer ("1h2m3s4ms5us6ns" is 15); longer text is not worth quoting back. */
const MAX_DURATION_CHARS = 64;

export interface GitConfigEntry {
  name: string;
  value: string;
}

export interface Source {
  uri: string;
  branch: string;
  pool: string;
  privateKey?: string;
  privateKeyPassphrase?: string;
  privateKeyUser?: string;
  forwardAgent: boolean;
  username?: string;
  password?: string;
  gitConfig: GitConfigEntry[];
  retryDelayMs: number;
  httpsTunnel?: HttpsTunnel;
  skipSslVerification: boolean;
  knownHosts?: string;
  gitTimeoutMs: number;
}

export type StepOperationKind =
  'release' | 'add' | 'add_claimed' | 'remove' | 'update' | 'check' | 'check_unclaimed';

export type OutOperation =
  { kind: 'acquire' } | { kind: 'claim'; name: string } | { kind: StepOperationKind; step: string };

export interface CheckRequest {
  source: Source;
  version?: string;
}

export interface InRequest {
  source: Source;
  version: string;
  depth?: number;
}

export interface OutRequest {
  source: Source;
  operation: OutOperation;
  waitTimeoutMs?: number;
}

export interface Parsed<T> {
  request: T;
  warnings: string[];
}

const OPERATION_KEYS = [
  'acquire',
  'release',
  'remove',
  'claim',
  'add',
  'add_claimed',
  'update',
  'check',
  'check_unclaimed',
] as const;

/**
 * The keys of a request, whichever script reads it: Concourse sends each script the ones it
 * needs, and one script's key in another's request (a `version` in a put) is no mistake.
 */
const ENVELOPE_KEYS = ['source', 'version', 'params'];

const MISSING_OPERATION =
  'invalid payload (missing acquire, release, remove, claim, add, add_claimed, update, check, or check_unclaimed)';

function duration(field: string, { allowZero }: { allowZero: boolean }) {
  return z
    .union([z.string(), z.number()], {
      error: `invalid payload (${field} must be a duration such as "10s")`,
    })
    .transform((value, ctx) => {
      if (typeof value === 'string' && value.length > MAX_DURATION_CHARS) {
        ctx.addIssue({
          code: 'custom',
          message: `invalid payload (${field} must be a duration such as "10s")`,
        });
        return z.NEVER;
      }
      let ms: number;
      if (typeof value === 'number') {
        if (!Number.isSafeInteger(value)) {
          ctx.addIssue({
            code: 'custom',
            message: `invalid payload (${field} must be whole nanoseconds or a duration such as "10s")`,
          });
          return z.NEVER;
        }
        // Checked before converting: a few negative nanoseconds round to -0, which passes `< 0`.
        ms = value < 0 ? -1 : nanosToMs(value);
      } else {
        const parsed = parseGoDuration(value);
        if ('error' in parsed) {
          ctx.addIssue({
            code: 'custom',
            message: `invalid payload (${field}: ${printable(parsed.error)})`,
          });
          return z.NEVER;
        }
        ms = parsed.ms;
      }
      if (ms < 0 || (!allowZero && ms === 0)) {
        ctx.addIssue({
          code: 'custom',
          message: `invalid payload (${field} must be ${allowZero ? 'zero or more' : 'more than zero'})`,
        });
        return z.NEVER;
      }
      if (ms > MAX_DURATION_MS) {
        ctx.addIssue({ code: 'custom', message: `invalid payload (${field} is longer than 168h)` });
        return z.NEVER;
      }
      return ms;
    });
}

function requiredString(field: string) {
  return z
    .string({
      error: (issue) =>
        issue.input === undefined || issue.input === null
          ? `invalid payload (missing ${field})`
          : `invalid payload (${field} must be a string)`,
    })
    .min(1, `invalid payload (missing ${field})`);
}

function optionalString(field: string) {
  return z
    .string({ error: `invalid payload (${field} must be a string)` })
    .nullish()
    .transform((value) => (value === '' || value === null ? undefined : value));
}

function optionalBoolean(field: string) {
  return z
    .boolean({ error: `invalid payload (${field} must be true or false)` })
    .nullish()
    .transform((value) => value ?? false);
}

const PROXY_PORT_PROBLEM = 'invalid payload (https_tunnel.proxy_port must be a port number)';

const SOURCE_SHAPE = {
  // The URI is never quoted back: it may carry credentials.
  uri: requiredString('uri').superRefine((uri, ctx) => {
    // git would read a leading "-" as an option (`git remote add origin -x`).
    if (uri.startsWith('-'))
      ctx.addIssue({ code: 'custom', message: 'invalid payload (uri must not start with "-")' });
    // eslint-disable-next-line no-control-regex
    else if (/[\u0000-\u001f\u007f]/.test(uri))
      ctx.addIssue({
        code: 'custom',
        message: 'invalid payload (uri contains a control character)',
      });
  }),
  branch: requiredString('branch').refine((branch) => isSafeBranch(branch), {
    message: 'invalid payload (branch is not a valid branch name)',
  }),
  pool: requiredString('pool').superRefine((pool, ctx) => {
    // An empty pool already reads "missing pool".
    const problem = pool === '' ? undefined : poolNameProblem(pool);
    if (problem) ctx.addIssue({ code: 'custom', message: `invalid payload (pool ${problem})` });
  }),
  private_key: optionalString('private_key'),
  private_key_passphrase: optionalString('private_key_passphrase'),
  private_key_user: optionalString('private_key_user'),
  forward_agent: optionalBoolean('forward_agent'),
  username: optionalString('username'),
  password: optionalString('password'),
  git_config: z
    .array(
      z.object(
        {
          name: z
            .string({ error: 'invalid payload (git_config entries need a string name)' })
            .min(1, 'invalid payload (git_config entries need a name)')
            .superRefine((name, ctx) => {
              const problem = gitConfigKeyProblem(name);
              if (problem)
                ctx.addIssue({
                  code: 'custom',
                  message: `invalid payload (git_config: "${printable(name)}" ${problem})`,
                });
            }),
          value: z
            .union([z.string(), z.number(), z.boolean()], {
              error: 'invalid payload (git_config entries need a string value)',
            })
            .transform(String),
        },
        { error: 'invalid payload (git_config must be a list of {name, value})' },
      ),
      { error: 'invalid payload (git_config must be a list of {name, value})' },
    )
    .nullish()
    .transform((entries) => entries ?? []),
  retry_delay: duration('retry_delay', { allowZero: true }).nullish(),
  https_tunnel: z
    .object(
      {
        proxy_host: requiredString('https_tunnel.proxy_host'),
        proxy_port: z.union(
          [
            z
              .number()
              .int(PROXY_PORT_PROBLEM)
              .min(1, PROXY_PORT_PROBLEM)
              .max(65535, PROXY_PORT_PROBLEM),
            z
              .string()
              .regex(/^\d{1,5}$/, PROXY_PORT_PROBLEM)
              .transform(Number)
              .refine((port) => port >= 1 && port <= 65535, PROXY_PORT_PROBLEM),
          ],
          { error: PROXY_PORT_PROBLEM },
        ),
        proxy_user: optionalString('https_tunnel.proxy_user'),
        proxy_password: optionalString('https_tunnel.proxy_password'),
      },
      { error: 'invalid payload (https_tunnel must be an object)' },
    )
    .nullish(),
  skip_ssl_verification: optionalBoolean('skip_ssl_verification'),
  known_hosts: optionalString('known_hosts'),
  git_timeout: duration('git_timeout', { allowZero: false }).nullish(),
};

const sourceSchema = z
  .looseObject(SOURCE_SHAPE, { error: 'invalid payload (source must be an object)' })
  .transform((raw): Source => ({
    ...httpAuth(raw.uri, raw.username, raw.password),
    branch: raw.branch,
    pool: raw.pool,
    privateKey: raw.private_key,
    privateKeyPassphrase: raw.private_key_passphrase,
    privateKeyUser: raw.private_key_user,
    forwardAgent: raw.forward_agent,
    gitConfig: raw.git_config,
    retryDelayMs: raw.retry_delay ?? DEFAULT_RETRY_DELAY_MS,
    httpsTunnel: raw.https_tunnel
      ? {
          proxyHost: raw.https_tunnel.proxy_host,
          proxyPort: raw.https_tunnel.proxy_port,
          proxyUser: raw.https_tunnel.proxy_user,
          proxyPassword: raw.https_tunnel.proxy_password,
        }
      : undefined,
    skipSslVerification: raw.skip_ssl_verification,
    knownHosts: raw.known_hosts,
    gitTimeoutMs: raw.git_timeout ?? DEFAULT_GIT_TIMEOUT_MS,
  }));

/**
 * Credentials written into an HTTP(S) URI move out of it: git never sees them in its argv (any
 * local user can read /proc/PID/cmdline) nor writes them into a repository's config, and gets
 * them from the environment instead (git/environment.ts). As git reads such a URI, its user and
 * password win over `username` and `password`, and a part it lacks is taken from them.
 */
function httpAuth(uri: string, username: string | undefined, password: string | undefined) {
  const credentials = /^https?:/i.test(uri) ? uriCredentials(uri) : undefined;
  if (!credentials) return { uri, username, password };
  return {
    uri: displayUri(uri),
    username: credentials.user === '' ? username : decodeUserinfo(credentials.user),
    password: credentials.password === undefined ? password : decodeUserinfo(credentials.password),
  };
}

/** A full or abbreviated commit id: the only versions ever compared with the branch's commits. */
const COMMIT_ID = /^[0-9a-f]{4,64}$/i;

const anyRef = z.string({ error: 'invalid payload (version.ref must be a string)' });
const commitRef = anyRef.regex(COMMIT_ID, 'invalid payload (version.ref must be a commit id)');

const versionSchema = z.looseObject(
  { ref: commitRef },
  { error: 'invalid payload (version must be an object with a ref)' },
);

const checkSchema = z.looseObject({
  // zod 4 treats a bare z.unknown() key as required; a missing source is reported by parseSource.
  source: z.unknown().optional(),
  version: z
    .looseObject(
      // Any string: one that is not a commit id is a version no longer on the branch (§4).
      { ref: anyRef.nullish() },
      { error: 'invalid payload (version must be an object with a ref)' },
    )
    .nullish(),
});

const inSchema = z.looseObject({
  source: z.unknown().optional(),
  version: versionSchema.nullish(),
  params: z
    .looseObject(
      {
        depth: z
          .number({ error: 'invalid payload (params.depth must be a positive whole number)' })
          .int('invalid payload (params.depth must be a positive whole number)')
          .positive('invalid payload (params.depth must be a positive whole number)')
          .nullish(),
      },
      { error: 'invalid payload (params must be an object)' },
    )
    .nullish(),
});

const stepParam = (field: string) =>
  z
    .string({ error: `invalid payload (${field} must be the name of a step folder)` })
    .nullish()
    .transform((value) => (value === '' || value === null ? undefined : value));

const outParamsShape = {
  acquire: z.boolean({ error: 'invalid payload (acquire must be true or false)' }).nullish(),
  claim: z
    .string({ error: 'invalid payload (claim must be a lock name)' })
    .nullish()
    .transform((value) => (value === '' || value === null ? undefined : value)),
  release: stepParam('release'),
  add: stepParam('add'),
  add_claimed: stepParam('add_claimed'),
  remove: stepParam('remove'),
  update: stepParam('update'),
  check: stepParam('check'),
  check_unclaimed: stepParam('check_unclaimed'),
  wait_timeout: duration('wait_timeout', { allowZero: false }).nullish(),
};

const outSchema = z.looseObject({
  source: z.unknown().optional(),
  params: z
    .looseObject(outParamsShape, { error: 'invalid payload (params must be an object)' })
    .nullish(),
});

/** Whether git reaches `uri` over SSH: ssh://, git+ssh://, ssh+git:// or scp-like `[user@]host:path`. */
export function isSshUri(uri: string): boolean {
  if (/^(ssh|git\+ssh|ssh\+git):\/\//i.test(uri)) return true;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(uri)) return false;
  // git's rule: a colon before any slash makes it scp-like, unless it is a path.
  const colon = uri.indexOf(':');
  const slash = uri.indexOf('/');
  return colon > 0 && (slash === -1 || colon < slash);
}

/** Git refuses some branch names; refusing them here keeps them from ever reaching argv. */
function isSafeBranch(branch: string): boolean {
  return (
    !branch.startsWith('-') &&
    !branch.startsWith('/') &&
    !branch.endsWith('/') &&
    !branch.endsWith('.lock') &&
    !branch.includes('..') &&
    !branch.includes('//') &&
    !branch.includes('@{') &&
    // eslint-disable-next-line no-control-regex
    !/[\u0000-\u0020\u007f~^:?*[\\]/.test(branch)
  );
}

function parseJson(text: string): unknown {
  if (text.trim() === '')
    throw new ConfigurationError([
      'invalid payload (empty input: expected a JSON request on stdin)',
    ]);
  try {
    return JSON.parse(text);
  } catch {
    // JSON.parse's message quotes the input, which may hold secrets: say only what is wrong.
    throw new ConfigurationError(['invalid payload (stdin is not valid JSON)']);
  }
}

function issueLines(error: z.ZodError, prefix = ''): string[] {
  // One line per field: zod also runs length checks on a value of the wrong type (an array
  // `branch` gets "must be a string" and "missing branch"); the first says it.
  const seen = new Set<string>();
  const lines = new Set<string>();
  for (const issue of error.issues) {
    const where = [prefix, ...issue.path.map(String)].filter(Boolean).join('.');
    if (seen.has(where)) continue;
    seen.add(where);
    lines.add(
      issue.message.startsWith('invalid payload')
        ? issue.message
        : `invalid payload (${printable(where) || 'request'}: ${issue.message})`,
    );
  }
  // Capped here, not by the caller: spreading 200,000 lines into push() overflows the stack.
  return capped(
    [...lines],
    `invalid payload (${lines.size - MAX_LINES} more problems in ${prefix || 'the request'})`,
  );
}

/**
 * `unknown params field "aquire" (did you mean "acquire"?)` for each field of `value` not among
 * `known`: a warning when the request is otherwise fine, and part of the error when it is not
 * (a misspelled operation is what "missing acquire, release, …" is about).
 */
function unknownKeys(value: unknown, known: readonly string[], where: string): string[] {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return [];
  const unknown = Object.keys(value).filter((key) => !known.includes(key));
  return capped(
    unknown.map((key) => {
      const suggestion = suggestField(key, known);
      const hint = suggestion === undefined ? '' : ` (did you mean "${suggestion}"?)`;
      return `unknown ${where} field "${printable(key)}"${hint}`;
    }),
    `${unknown.length - MAX_LINES} more unknown ${where} fields`,
  );
}

/** A request of megabytes must not become megabytes of log: a screenful says what is wrong. */
const MAX_LINES = 20;

function capped(lines: string[], more: string): string[] {
  return lines.length <= MAX_LINES ? lines : [...lines.slice(0, MAX_LINES), more];
}

function expectObject(value: unknown): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigurationError(['invalid payload (expected a JSON object on stdin)']);
  }
}

async function parseSource(
  raw: unknown,
  problems: string[],
  unknown: string[],
): Promise<Source | undefined> {
  if (raw === undefined || raw === null) {
    problems.push(
      'invalid payload (missing uri)',
      'invalid payload (missing branch)',
      'invalid payload (missing pool)',
    );
    return undefined;
  }
  const result = sourceSchema.safeParse(raw);
  unknown.push(...unknownKeys(raw, Object.keys(SOURCE_SHAPE), 'source'));
  if (!result.success) problems.push(...issueLines(result.error, 'source'));
  const transport = await transportProblems(raw);
  problems.push(...transport);
  return result.success && transport.length === 0 ? result.data : undefined;
}

/**
 * Reads private_key and known_hosts now, so a key ssh2 cannot read fails here, naming the field,
 * not later inside git. Runs on the raw source so these lines join every other problem. ssh2 is
 * loaded only for a key to read: it is half of the packaged code and a tenth of every script's
 * start-up, which requests over git://, HTTP(S) or a path never need.
 */
async function transportProblems(raw: unknown): Promise<string[]> {
  if (typeof raw !== 'object' || raw === null) return [];
  const field = (name: string) => {
    const value = (raw as Record<string, unknown>)[name];
    return typeof value === 'string' && value !== '' ? value : undefined;
  };
  const problems: string[] = [];
  const uri = field('uri');
  const privateKey = field('private_key');
  // Only for SSH URIs: the reference ignored private_key for https:// and local repositories.
  if (privateKey !== undefined && uri !== undefined && isSshUri(uri)) {
    const { readPrivateKey } = await import('../transport/ssh-key.js');
    const read = readPrivateKey(privateKey, field('private_key_passphrase'));
    if ('problem' in read) problems.push(`invalid payload (${read.problem})`);
  }
  const knownHosts = field('known_hosts');
  // A forwarded agent signs for whoever holds the connection: without a pinned host key, any
  // host that answers (a spoofed DNS name, a hijacked address) could use the key.
  if ((raw as Record<string, unknown>).forward_agent === true && knownHosts === undefined)
    problems.push(
      'invalid payload (forward_agent needs known_hosts: an unchecked host could use the forwarded key)',
    );
  if (knownHosts !== undefined) {
    const parsed = parseKnownHosts(knownHosts);
    if ('problem' in parsed) problems.push(`invalid payload (known_hosts: ${parsed.problem})`);
  }
  return problems;
}

/**
 * `unknown`: the unknown fields, said as warnings, or after the problems when there are any (a
 * misspelled field is often why a required one is missing); `notes`: other warnings, said only
 * when the request is taken.
 */
function finish<T>(
  problems: string[],
  build: () => T,
  unknown: string[],
  notes: string[] = [],
): Parsed<T> {
  if (problems.length > 0) {
    const unique = [
      ...new Set([...problems, ...unknown.map((line) => `invalid payload (${line})`)]),
    ];
    throw new ConfigurationError(
      capped(unique, `invalid payload (and ${unique.length - MAX_LINES} more problems)`),
    );
  }
  return {
    request: build(),
    warnings: [...unknown.map((line) => `warning: ignoring ${line}`), ...notes],
  };
}

/** A `source` object on its own: the pool command builds one from flags or a JSON file. */
export async function parseSourceObject(raw: unknown): Promise<Parsed<Source>> {
  const problems: string[] = [];
  const unknown: string[] = [];
  const source = await parseSource(raw, problems, unknown);
  return finish(problems, () => source!, unknown);
}

/**
 * What every script's request has in common: JSON, an object, a `source` (its problems first, as
 * the reference reports them), no unknown keys, and the script's own envelope `schema`.
 */
async function readEnvelope<Schema extends z.ZodType>(text: string, schema: Schema) {
  const raw = parseJson(text);
  expectObject(raw);
  const problems: string[] = [];
  const unknown: string[] = [];
  const source = await parseSource((raw as { source?: unknown }).source, problems, unknown);
  unknown.push(...unknownKeys(raw, ENVELOPE_KEYS, 'request'));
  const envelope = schema.safeParse(raw);
  if (!envelope.success) problems.push(...issueLines(envelope.error));
  return { source, envelope, problems, unknown };
}

export async function parseCheckRequest(text: string): Promise<Parsed<CheckRequest>> {
  const { source, envelope, problems, unknown } = await readEnvelope(text, checkSchema);
  // The reference answers such a version (its own test sends "bogus-ref") as an unknown commit:
  // with the latest commit that touched the pool. It never reaches git, not even as a revision.
  const ref = envelope.data?.version?.ref ?? undefined;
  const version = ref !== undefined && COMMIT_ID.test(ref) ? ref : undefined;
  const notes =
    ref !== undefined && ref !== '' && version === undefined
      ? [
          `version.ref "${printable(ref)}" is not a commit id: answering with the latest commit that touched the pool`,
        ]
      : [];
  return finish(problems, () => ({ source: source!, version }), unknown, notes);
}

export async function parseInRequest(text: string): Promise<Parsed<InRequest>> {
  const { source, envelope, problems, unknown } = await readEnvelope(text, inSchema);
  if (envelope.success && !envelope.data.version)
    problems.push('invalid payload (missing version)');
  if (envelope.success) unknown.push(...unknownKeys(envelope.data.params, ['depth'], 'params'));
  return finish(
    problems,
    () => ({
      source: source!,
      version: envelope.data!.version!.ref,
      depth: envelope.data!.params?.depth ?? undefined,
    }),
    unknown,
  );
}

export async function parseOutRequest(text: string): Promise<Parsed<OutRequest>> {
  const { source, envelope, problems, unknown } = await readEnvelope(text, outSchema);
  let operation: OutOperation | undefined;
  if (envelope.success) {
    const params: Partial<OutParams> = envelope.data.params ?? {};
    unknown.push(...unknownKeys(params, Object.keys(outParamsShape), 'params'));
    const chosen = OPERATION_KEYS.filter((key) =>
      key === 'acquire' ? params.acquire === true : params[key] !== undefined,
    );
    if (chosen.length === 0) problems.push(MISSING_OPERATION);
    else if (chosen.length > 1) {
      problems.push(
        `invalid payload (params has more than one operation: ${chosen.join(', ')}; a put does exactly one)`,
      );
    } else {
      operation = toOperation(chosen[0]!, params, problems);
    }
  }
  return finish(
    problems,
    () => ({
      source: source!,
      operation: operation!,
      waitTimeoutMs: envelope.data!.params?.wait_timeout ?? undefined,
    }),
    unknown,
  );
}

type OutParams = z.infer<z.ZodObject<typeof outParamsShape>>;

function toOperation(
  key: (typeof OPERATION_KEYS)[number],
  params: Partial<OutParams>,
  problems: string[],
): OutOperation | undefined {
  if (key === 'acquire') return { kind: 'acquire' };
  if (key === 'claim') {
    const name = params.claim!;
    const problem = lockNameProblem(name);
    if (problem) {
      problems.push(`invalid payload (claim: lock name ${problem})`);
      return undefined;
    }
    return { kind: 'claim', name };
  }
  const step = params[key]!;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000]/.test(step)) {
    problems.push(`invalid payload (${key}: step folder contains a NUL character)`);
    return undefined;
  }
  return { kind: key, step };
}
