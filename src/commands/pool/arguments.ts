// The pool command's argv: one subcommand, its lock name, and the resource's `source` given as
// flags or as a JSON file. Parsed in one step into a typed invocation (node:util parseArgs), or
// refused with one line naming the flag.
import { parseArgs } from 'node:util';
import { ConfigurationError } from '../../base/errors.js';
import type { MetadataMatch } from '../../base/lock-match.js';
import { lockNameProblem, printable } from '../../base/lock-name.js';
import { MAX_COUNT } from '../../protocol/request.js';

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
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && option)
    return `error: option ${printable(option)} ${/argument missing/.test(message) ? 'needs a value' : 'takes no value'}`;
  return `error: ${printable(message.split('\n')[0] ?? message)}`;
}

const SOURCE_HELP = `Source (the resource's \`source\`, as flags or as a JSON file; flags win):
  --source FILE                       JSON object with the source fields
  --uri URI                           the lock repository
  --branch BRANCH                     the branch holding the pools
  --pool POOL                         the pool folder
  --private-key-file FILE             private_key, read from FILE
  --private-key-passphrase-file FILE  private_key_passphrase, read from FILE
  --private-key-user USER             private_key_user
  --forward-agent                     forward_agent: true
  --username USER                     username (HTTP(S) basic auth)
  --password-file FILE                password, read from FILE
  --git-config NAME=VALUE             git_config entry (repeatable)
  --known-hosts-file FILE             known_hosts, read from FILE
  --skip-ssl-verification             skip_ssl_verification: true
  --retry-delay DURATION              retry_delay (Go duration, default 10s)
  --git-timeout DURATION              git_timeout (Go duration, default 5m)
  --lease DURATION                    lease of a claim (Go duration; none by default)
  --lease-grace DURATION              lease_grace (Go duration, default 5m)
Secrets are read from files so they never show in the process list.`;

const HOLDER_HELP = `  --by TEXT     who holds the lock, written to the Claimed-By trailer
                (default: $USER@HOSTNAME)`;

export const USAGE = `usage: pool COMMAND [options]

Commands:
  status [--json] [--wide]               every lock: state, holder, since when, for how long
  report --html FILE | --json [--since D] who held what when, claims and waits (default 168h)
  init --lock NAME [--lock NAME ...]     create the pool (folders, .gitkeep, locks) and push
  claim NAME                             claim a lock, waiting while it is claimed
  acquire [--count N] [--match K=V] [--match-name G]
                                         claim any unclaimed lock (N of them; that match), waiting
  release NAME                           release a claimed lock
  add NAME [--metadata FILE] [--claimed] add a lock, unclaimed unless --claimed
  update NAME --metadata FILE            replace an unclaimed lock's metadata (or add it)
  remove NAME                            remove a claimed lock
  reap [--dry-run] [--older-than D]      release every lock whose lease expired

Run "pool COMMAND --help" for a command's options.

${SOURCE_HELP}

Exit status: 0 done, 1 error, 128+N stopped by signal N.
`;

const SUBCOMMAND_HELP: Record<Subcommand, string> = {
  status: `usage: pool status [--json] [--wide] SOURCE

Lists every lock of the pool with its state, who holds it and since when (and its lease, when
one of them has one), then the waiting line.
The holder is short (team/pipeline/job #build) and rows fit 100 columns.
  --wide        the holder's full build URL, however long the rows get
  --json        an array of {name, state, holder, claimed_by, claimed_at, since} instead
                (and lease_expires for a claim with a lease)

${SOURCE_HELP}
`,
  report: `usage: pool report (--html FILE | --json) [--since DURATION] SOURCE

Reads the branch history of the last DURATION (Go duration, default 168h: a week) and says,
per lock, the share of that time it was held, how many claims it had and how long they waited
(median, 95th percentile by nearest rank, longest; from each claiming commit's Waited trailer,
claims without one count as unknown), who holds it now and who is waiting.
  --html FILE       one self-contained page: a timeline of who held which lock when, the
                    figures, the current holders and the waiting line (no scripts, no network)
  --json            the same figures on stdout: {pool, since, until, locks, waiting}
  --since DURATION  how far back to look (default 168h)

${SOURCE_HELP}
`,
  init: `usage: pool init [--lock NAME ...] SOURCE

Creates POOL/claimed/.gitkeep, POOL/unclaimed/.gitkeep and the named locks (unclaimed, empty
metadata) on the branch, creating the branch if the repository has none by that name, and
pushes. Folders that already exist are kept; a lock that already exists is an error.
  --lock NAME   a lock to create (repeatable)
${HOLDER_HELP}

${SOURCE_HELP}
`,
  claim: `usage: pool claim NAME SOURCE

Moves NAME from unclaimed to claimed, waiting (every --retry-delay) while it is claimed, as a
put with \`claim: NAME\` does. Ctrl-C stops waiting; a claim that may have landed is released.
${HOLDER_HELP}
  --wait-timeout DURATION  give up waiting after this long (exit 1)
  --json        print {version, metadata} as the put would

${SOURCE_HELP}
`,
  release: `usage: pool release NAME SOURCE

Moves the claimed lock NAME back to unclaimed; refused if it is not claimed, or if its claim
holds a lease that has not run out (its holder may still be working: see pool reap).
${HOLDER_HELP}
  --force       release it even so
  --json        print {version, metadata} as the put would

${SOURCE_HELP}
`,
  add: `usage: pool add NAME [--metadata FILE] [--claimed] SOURCE

Adds the lock NAME with the contents of FILE (empty without --metadata); refused if NAME
already exists in the pool.
  --metadata FILE  the lock's metadata
  --claimed        add it claimed (as add_claimed does)
${HOLDER_HELP}
  --json        print {version, metadata} as the put would

${SOURCE_HELP}
`,
  update: `usage: pool update NAME --metadata FILE SOURCE

Replaces the metadata of the unclaimed lock NAME with the contents of FILE, waiting (every
--retry-delay) while it is claimed, or adds it unclaimed if the pool has no lock NAME, as a put
with \`update: STEP\` does.
  --metadata FILE  the lock's new metadata
${HOLDER_HELP}
  --wait-timeout DURATION  give up waiting after this long (exit 1)
  --json        print {version, metadata} as the put would

${SOURCE_HELP}
`,
  acquire: `usage: pool acquire [--count N] [--match KEY=VALUE ...] [--match-name GLOB] SOURCE

Claims a random unclaimed lock, waiting (every --retry-delay) while none is free, as a put with
\`acquire: true\` does. With --count N it claims N locks at once, all or none, in one push (the
put's \`count\`); more than the pool holds fails at once. With --match or --match-name only the locks that match count (the put's
\`match\` and \`match_name\`); they replace the ones the --source file sets. A filter no lock of
the pool matches, claimed or not, fails at once.
  --match KEY=VALUE    the lock file (YAML or JSON) has VALUE at KEY (a dotted KEY reaches into
                       nested maps; a list there matches when it holds VALUE); repeatable, every
                       KEY must match, a KEY given twice matches any of its values
  --match-name GLOB    the lock's name matches GLOB (\`*\` any characters, \`?\` one)
  --count N            claim N locks at once (1 to ${MAX_COUNT})
${HOLDER_HELP}
  --wait-timeout DURATION  give up waiting after this long (exit 1)
  --json        print {version, metadata} as the put would

${SOURCE_HELP}
`,
  reap: `usage: pool reap [--dry-run] [--older-than DURATION] SOURCE

Releases every lock whose claim's lease ran out more than lease_grace ago (--lease-grace,
default 5m): one commit each, naming the expired claim's token, the reason and who reclaimed
it. Claims without a lease are never reclaimed, unless --older-than says how old is too old.
  --dry-run              list what would be reclaimed, commit nothing
  --older-than DURATION  also reclaim claims without a lease older than this
  --by TEXT     who reclaims, written to the Reclaimed-By trailer (default: $USER@HOSTNAME)
  --json        print {version, metadata} as a put with reap: true would

${SOURCE_HELP}
`,
  remove: `usage: pool remove NAME SOURCE

Deletes the claimed lock NAME; refused if it is not claimed (release it first to keep it).
${HOLDER_HELP}
  --json        print {version, metadata} as the put would

${SOURCE_HELP}
`,
};
