// `source`: the lock repository and how to reach it, parsed into a typed, fully defaulted value
// (durations in milliseconds, credentials moved out of the URI), every problem named at once.
import * as z from 'zod/mini';
import type { MetadataMatch } from '../base/lock-match.js';
import { poolNameProblem, printable } from '../base/lock-name.js';
import { POOL_EVENTS, type PoolEvent } from '../base/pool-event.js';
import { decodeUserinfo, displayUri, uriCredentials } from '../base/logger.js';
import { parseKnownHosts } from '../transport/known-hosts.js';
import { isSshUri, rewritesUrls } from '../transport/ssh-args.js';
import type { HttpsTunnel } from '../transport/ssh-config.js';
import { suggestField } from './field-suggestion.js';
import { gitConfigKeyProblem, signingProblem } from './git-config-keys.js';
import {
  duration,
  issueLines,
  leaseDuration,
  matchField,
  matchNameField,
  optionalBoolean,
  optionalString,
  requiredString,
  unknownKeys,
} from './payload-fields.js';

const DEFAULT_RETRY_DELAY_MS = 10_000;

const DEFAULT_GIT_TIMEOUT_MS = 5 * 60_000;

/** SPEC §10: room for clocks that disagree before a lease counts as expired. */
const DEFAULT_LEASE_GRACE_MS = 5 * 60_000;

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
  /** The kinds of commit `check` reports (every kind by default). */
  checkEvents: PoolEvent[];
  /** Globs on the lock names whose commits `check` reports; undefined for every lock. */
  checkLocks?: string[];
  /** The default `match` and `match_name` of this resource's acquires (SPEC §12). */
  match?: MetadataMatch;
  matchName?: string;
  /** The lease of every claim made through this resource (SPEC §10); none when unset. */
  leaseMs?: number;
  /** How long after its lease a claim still counts as held. */
  leaseGraceMs: number;
  /** An acquire that finds no unclaimed lock may take an expired one. */
  reclaimExpired: boolean;
}

const EVENT_NAMES = POOL_EVENTS.join(', ');

const PROXY_PORT_PROBLEM = 'invalid payload (https_tunnel.proxy_port must be a port number)';

const SOURCE_SHAPE = {
  // The URI is never quoted back: it may carry credentials.
  uri: requiredString('uri').check(
    z.superRefine((uri, ctx) => {
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
  ),
  branch: requiredString('branch').check(
    z.refine((branch) => isSafeBranch(branch), {
      message: 'invalid payload (branch is not a valid branch name)',
    }),
  ),
  pool: requiredString('pool').check(
    z.superRefine((pool, ctx) => {
      // An empty pool already reads "missing pool".
      const problem = pool === '' ? undefined : poolNameProblem(pool);
      if (problem) ctx.addIssue({ code: 'custom', message: `invalid payload (pool ${problem})` });
    }),
  ),
  private_key: optionalString('private_key'),
  private_key_passphrase: optionalString('private_key_passphrase'),
  private_key_user: optionalString('private_key_user'),
  forward_agent: optionalBoolean('forward_agent'),
  username: optionalString('username'),
  password: optionalString('password'),
  git_config: z.pipe(
    z.nullish(
      z.array(
        z
          .object(
            {
              name: z
                .string({ error: 'invalid payload (git_config entries need a string name)' })
                .check(
                  z.minLength(1, 'invalid payload (git_config entries need a name)'),
                  z.superRefine((name, ctx) => {
                    const problem = gitConfigKeyProblem(name);
                    if (problem)
                      ctx.addIssue({
                        code: 'custom',
                        message: `invalid payload (git_config: "${printable(name)}" ${problem})`,
                      });
                  }),
                ),
              value: z.pipe(
                z.union([z.string(), z.number(), z.boolean()], {
                  error: 'invalid payload (git_config entries need a string value)',
                }),
                z.transform(String),
              ),
            },
            { error: 'invalid payload (git_config must be a list of {name, value})' },
          )
          .check(
            z.superRefine(({ name, value }, ctx) => {
              const problem = signingProblem(name, value);
              if (problem)
                ctx.addIssue({
                  code: 'custom',
                  message: `invalid payload (git_config: "${printable(name)}" ${problem})`,
                });
            }),
          ),
        { error: 'invalid payload (git_config must be a list of {name, value})' },
      ),
    ),
    z.transform((entries) => entries ?? []),
  ),
  retry_delay: z.nullish(duration('retry_delay', { allowZero: true })),
  https_tunnel: z.nullish(
    z.object(
      {
        proxy_host: requiredString('https_tunnel.proxy_host'),
        proxy_port: z.union(
          [
            z
              .number()
              .check(
                z.int(PROXY_PORT_PROBLEM),
                z.gte(1, PROXY_PORT_PROBLEM),
                z.lte(65535, PROXY_PORT_PROBLEM),
              ),
            z
              .pipe(z.string().check(z.regex(/^\d{1,5}$/, PROXY_PORT_PROBLEM)), z.transform(Number))
              .check(z.refine((port: number) => port >= 1 && port <= 65535, PROXY_PORT_PROBLEM)),
          ],
          { error: PROXY_PORT_PROBLEM },
        ),
        proxy_user: optionalString('https_tunnel.proxy_user'),
        proxy_password: optionalString('https_tunnel.proxy_password'),
      },
      { error: 'invalid payload (https_tunnel must be an object)' },
    ),
  ),
  skip_ssl_verification: optionalBoolean('skip_ssl_verification'),
  known_hosts: optionalString('known_hosts'),
  git_timeout: z.nullish(duration('git_timeout', { allowZero: false })),
  check_events: checkEvents(),
  check_locks: checkLocks(),
  match: matchField('match'),
  match_name: matchNameField('match_name'),
  lease: z.nullish(leaseDuration('lease', { allowZero: false })),
  // Zero is a choice: clocks known to agree need no room.
  lease_grace: z.nullish(leaseDuration('lease_grace', { allowZero: true })),
  reclaim_expired: optionalBoolean('reclaim_expired'),
};

const sourceSchema = z.pipe(
  z.looseObject(SOURCE_SHAPE, { error: 'invalid payload (source must be an object)' }),
  z.transform((raw): Source => ({
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
    checkEvents: raw.check_events ?? [...POOL_EVENTS],
    checkLocks: raw.check_locks ?? undefined,
    ...(raw.match === undefined ? {} : { match: raw.match }),
    ...(raw.match_name === undefined ? {} : { matchName: raw.match_name }),
    leaseMs: raw.lease ?? undefined,
    leaseGraceMs: raw.lease_grace ?? DEFAULT_LEASE_GRACE_MS,
    reclaimExpired: raw.reclaim_expired,
  })),
);

/** `check_events`: a list of event names, each known (a misspelling is named with its fix). */
function checkEvents() {
  const shape = `invalid payload (check_events must be a list of events: ${EVENT_NAMES})`;
  return z.pipe(
    z
      .nullish(
        z
          .array(z.string({ error: shape }), { error: shape })
          .check(
            z.minLength(
              1,
              `invalid payload (check_events must name at least one event: ${EVENT_NAMES})`,
            ),
          ),
      )
      .check(
        z.superRefine((names, ctx) => {
          const unknown = (names ?? []).filter((name) => !isPoolEvent(name));
          if (unknown.length === 0) return;
          // A screenful at most, however long the list.
          const named = unknown.slice(0, 5).map((name) => {
            const suggestion = suggestField(name, POOL_EVENTS);
            const hint = suggestion === undefined ? '' : ` (did you mean "${suggestion}"?)`;
            return `"${printable(name)}"${hint}`;
          });
          ctx.addIssue({
            code: 'custom',
            message: `invalid payload (check_events: unknown event${unknown.length > 1 ? 's' : ''} ${named.join(', ')}${unknown.length > 5 ? ', …' : ''}; the events are ${EVENT_NAMES})`,
          });
        }),
      ),
    z.transform((names) => (names ? [...new Set(names.filter(isPoolEvent))] : undefined)),
  );
}

function isPoolEvent(name: string): name is PoolEvent {
  return (POOL_EVENTS as readonly string[]).includes(name);
}

/** `check_locks`: a list of globs on lock names (`*` and `?`). */
function checkLocks() {
  const shape =
    'invalid payload (check_locks must be a list of lock names or globs such as "env-*")';
  return z.nullish(
    z
      .array(z.string({ error: shape }).check(z.minLength(1, shape)), { error: shape })
      .check(
        z.minLength(
          1,
          'invalid payload (check_locks must name at least one lock or glob such as "env-*")',
        ),
      ),
  );
}

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

export async function parseSource(
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
  // host that answers (a spoofed DNS name, a hijacked address) could use the key. Where nothing
  // goes over SSH (an https:// or git:// URI no git_config rewrites) it forwards nothing: a
  // resource that sets it anyway works as it did with the reference.
  const record = raw as Record<string, unknown>;
  const overSsh = uri === undefined || isSshUri(uri) || rewritesUrls(record.git_config);
  if (record.forward_agent === true && knownHosts === undefined && overSsh)
    problems.push(
      'invalid payload (forward_agent needs known_hosts: an unchecked host could use the forwarded key)',
    );
  if (knownHosts !== undefined) {
    const parsed = parseKnownHosts(knownHosts);
    if ('problem' in parsed) problems.push(`invalid payload (known_hosts: ${parsed.problem})`);
  }
  return problems;
}
