// The pool command's argv: one subcommand, its lock name, and the resource's `source` given as
// flags or as a JSON file. Parsed in one step into a typed invocation (node:util parseArgs), or
// refused with one line naming the flag.
import { parseArgs } from 'node:util';
import { ConfigurationError } from '../../base/errors.js';
import type { MetadataMatch } from '../../base/lock-match.js';
import { lockNameProblem, printable } from '../../base/lock-name.js';
import { MAX_COUNT } from '../../protocol/request.js';
import { SUBCOMMAND_HELP, USAGE } from './help.js';

export const SUBCOMMANDS = [
  'status',
  'init',
  'claim',
  'release',
  'add',
  'remove',
  'report',
  'update',
  'acquire',
  'reap',
] as const;
export type Subcommand = (typeof SUBCOMMANDS)[number];

const OPTIONS = {
  help: { type: 'boolean', short: 'h' },
  json: { type: 'boolean' },
  wide: { type: 'boolean' },
  html: { type: 'string' },
  since: { type: 'string' },
  source: { type: 'string' },
  uri: { type: 'string' },
  branch: { type: 'string' },
  pool: { type: 'string' },
  'private-key-file': { type: 'string' },
  'private-key-passphrase-file': { type: 'string' },
  'private-key-user': { type: 'string' },
  'forward-agent': { type: 'boolean' },
  username: { type: 'string' },
  'password-file': { type: 'string' },
  'git-config': { type: 'string', multiple: true },
  'known-hosts-file': { type: 'string' },
  'skip-ssl-verification': { type: 'boolean' },
  'retry-delay': { type: 'string' },
  'git-timeout': { type: 'string' },
  lease: { type: 'string' },
  'lease-grace': { type: 'string' },
  lock: { type: 'string', multiple: true },
  metadata: { type: 'string' },
  claimed: { type: 'boolean' },
  by: { type: 'string' },
  'wait-timeout': { type: 'string' },
  match: { type: 'string', multiple: true },
  'match-name': { type: 'string' },
  count: { type: 'string' },
  'dry-run': { type: 'boolean' },
  'older-than': { type: 'string' },
  force: { type: 'boolean' },
} as const;

type OptionName = keyof typeof OPTIONS;

const SOURCE_OPTIONS: readonly OptionName[] = [
  'source',
  'uri',
  'branch',
  'pool',
  'private-key-file',
  'private-key-passphrase-file',
  'private-key-user',
  'forward-agent',
  'username',
  'password-file',
  'git-config',
  'known-hosts-file',
  'skip-ssl-verification',
  'retry-delay',
  'git-timeout',
  'lease',
  'lease-grace',
];

/** What each subcommand takes besides the source options and --help. */
const SUBCOMMAND_OPTIONS: Record<Subcommand, readonly OptionName[]> = {
  status: ['json', 'wide'],
  report: ['html', 'json', 'since'],
  init: ['lock', 'by'],
  claim: ['by', 'wait-timeout', 'json'],
  release: ['by', 'json', 'force'],
  reap: ['dry-run', 'older-than', 'by', 'json'],
  add: ['metadata', 'claimed', 'by', 'json'],
  update: ['metadata', 'by', 'wait-timeout', 'json'],
  remove: ['by', 'json'],
  acquire: ['count', 'match', 'match-name', 'by', 'wait-timeout', 'json'],
};

export interface SourceFlags {
  sourceFile?: string;
  uri?: string;
  branch?: string;
  pool?: string;
  privateKeyFile?: string;
  privateKeyPassphraseFile?: string;
  privateKeyUser?: string;
  forwardAgent?: boolean;
  username?: string;
  passwordFile?: string;
  gitConfig: string[];
  knownHostsFile?: string;
  skipSslVerification?: boolean;
  retryDelay?: string;
  gitTimeout?: string;
  lease?: string;
  leaseGrace?: string;
}

export type Invocation =
  | { kind: 'help'; text: string }
  | {
      kind: Subcommand;
      /** The lock NAME of claim, release, add and remove. */
      name: string;
      source: SourceFlags;
      json: boolean;
      /** status: full holder URLs, whatever the width. */
      wide: boolean;
      /** report: where the HTML page goes. */
      html?: string;
      /** report: how far back the window reaches (Go duration). */
      since?: string;
      locks: string[];
      metadataFile?: string;
      claimed: boolean;
      by?: string;
      waitTimeout?: string;
      /** acquire: `--match KEY=VALUE` (a key given twice: any of its values), `--match-name`. */
      match?: MetadataMatch;
      matchName?: string;
      /** acquire: `--count N`, that many locks at once. */
      count?: number;
      /** reap: list what would be reclaimed, commit nothing. */
      dryRun: boolean;
      /** reap: also reclaim claims without a lease older than this (Go duration). */
      olderThan?: string;
      /** release: even a claim whose lease has not run out. */
      force: boolean;
    };

export function parsePoolArguments(args: readonly string[]): Invocation {
  let parsed;
  try {
    parsed = parseArgs({ args: [...args], options: OPTIONS, allowPositionals: true, strict: true });
  } catch (error) {
    throw new ConfigurationError([argumentError(error)]);
  }
  const { values, positionals } = parsed;
  const [first, ...rest] = positionals;
  if (first === 'help') {
    const topic = rest[0];
    return { kind: 'help', text: isSubcommand(topic) ? SUBCOMMAND_HELP[topic] : USAGE };
  }
  if (first === undefined) {
    if (values.help) return { kind: 'help', text: USAGE };
    throw new ConfigurationError([
      `error: missing command (one of ${SUBCOMMANDS.join(', ')}); see pool --help`,
    ]);
  }
  if (!isSubcommand(first)) {
    throw new ConfigurationError([
      `error: unknown command "${printable(first)}" (one of ${SUBCOMMANDS.join(', ')}); see pool --help`,
    ]);
  }
  if (values.help) return { kind: 'help', text: SUBCOMMAND_HELP[first] };

  const allowed = new Set<string>([...SOURCE_OPTIONS, ...SUBCOMMAND_OPTIONS[first], 'help']);
  for (const key of Object.keys(values)) {
    if (!allowed.has(key))
      throw new ConfigurationError([
        `error: pool ${first} does not take --${key} (see pool ${first} --help)`,
      ]);
  }

  const takesName = !['status', 'init', 'report', 'acquire', 'reap'].includes(first);
  if (takesName && rest.length !== 1) {
    throw new ConfigurationError([
      rest.length === 0
        ? `error: pool ${first} needs a lock NAME (see pool ${first} --help)`
        : `error: pool ${first} takes one lock NAME, got ${rest.length}`,
    ]);
  }
  if (!takesName && rest.length > 0) {
    throw new ConfigurationError([
      `error: pool ${first} takes no arguments, got "${printable(rest[0]!)}" (see pool ${first} --help)`,
    ]);
  }
  const name = takesName ? rest[0]! : '';
  if (takesName) refuseBadName(name);
  const locks = values.lock ?? [];
  if (first === 'init') locks.forEach(refuseBadName);
  if (first === 'init' && new Set(locks).size !== locks.length)
    throw new ConfigurationError(['error: --lock names the same lock twice']);
  if ((first === 'add' || first === 'update') && values.metadata === '')
    throw new ConfigurationError(['error: --metadata needs a file name']);
  if (first === 'update' && values.metadata === undefined)
    throw new ConfigurationError(['error: pool update needs --metadata FILE']);
  if (first === 'report' && values.html === undefined && !values.json)
    throw new ConfigurationError(['error: pool report needs --html FILE or --json']);
  if (values.html === '') throw new ConfigurationError(['error: --html needs a file name']);
  if (values['match-name'] === '')
    throw new ConfigurationError(['error: --match-name needs a glob, such as "eu-*"']);
  const count = values.count === undefined ? undefined : Number(values.count);
  if (count !== undefined && !(/^\d{1,3}$/.test(values.count!) && count >= 1 && count <= MAX_COUNT))
    throw new ConfigurationError([
      `error: --count needs a whole number from 1 to ${MAX_COUNT}, got "${printable(values.count!)}"`,
    ]);

  return {
    kind: first,
    name,
    json: values.json ?? false,
    wide: values.wide ?? false,
    html: values.html,
    since: values.since,
    locks,
    metadataFile: values.metadata,
    claimed: values.claimed ?? false,
    by: values.by,
    waitTimeout: values['wait-timeout'],
    match: values.match === undefined ? undefined : matchFlags(values.match),
    matchName: values['match-name'],
    count,
    dryRun: values['dry-run'] ?? false,
    olderThan: values['older-than'],
    force: values.force ?? false,
    source: {
      sourceFile: values.source,
      uri: values.uri,
      branch: values.branch,
      pool: values.pool,
      privateKeyFile: values['private-key-file'],
      privateKeyPassphraseFile: values['private-key-passphrase-file'],
      privateKeyUser: values['private-key-user'],
      forwardAgent: values['forward-agent'],
      username: values.username,
      passwordFile: values['password-file'],
      gitConfig: values['git-config'] ?? [],
      knownHostsFile: values['known-hosts-file'],
      skipSslVerification: values['skip-ssl-verification'],
      retryDelay: values['retry-delay'],
      gitTimeout: values['git-timeout'],
      lease: values.lease,
      leaseGrace: values['lease-grace'],
    },
  };
}

function isSubcommand(value: string | undefined): value is Subcommand {
  return (SUBCOMMANDS as readonly (string | undefined)[]).includes(value);
}

/** `--match KEY=VALUE`, repeated; a key given twice matches either value. */
function matchFlags(flags: readonly string[]): MetadataMatch {
  const match = new Map<string, string[]>();
  for (const flag of flags) {
    const equals = flag.indexOf('=');
    const key = flag.slice(0, equals);
    const value = flag.slice(equals + 1);
    if (equals === -1 || value === '' || key.split('.').some((part) => part === ''))
      throw new ConfigurationError([
        `error: --match needs KEY=VALUE (KEY dotted for nested maps), got "${printable(flag)}"`,
      ]);
    match.set(key, [...(match.get(key) ?? []), value]);
  }
  return match;
}

function refuseBadName(name: string): void {
  const problem = lockNameProblem(name);
  if (problem) throw new ConfigurationError([`error: lock name ${problem}`]);
}

/** parseArgs explains itself at length; one line naming the flag is enough. */
function argumentError(error: unknown): string {
  const code = (error as { code?: string }).code;
  const message = error instanceof Error ? error.message : String(error);
  const option = /'(-[^' ]+)/.exec(message)?.[1];
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && option)
    return `error: unknown option ${printable(option)} (see pool --help)`;
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && option) {
    // The value given starts with a dash: an option forgotten its value, or a value that would
    // read as one (`--uri -oProxyCommand=…`); `--flag=-value` passes one on purpose.
    if (/argument is ambiguous/.test(message))
      return `error: option ${printable(option)} needs a value, and the next argument starts with "-" (write ${printable(option)}=VALUE to pass one that does)`;
    return `error: option ${printable(option)} ${/argument missing/.test(message) ? 'needs a value' : 'takes no value'}`;
  }
  return `error: ${printable(message.split('\n')[0] ?? message)}`;
}
