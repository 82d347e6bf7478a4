// The pool command's help: the usage line, what each subcommand does and takes, and the source
// flags every subcommand shares (arguments.ts answers --help with them).
import { MAX_COUNT } from '../../protocol/request.js';
import type { Subcommand } from './arguments.js';

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

export const SUBCOMMAND_HELP: Record<Subcommand, string> = {
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
