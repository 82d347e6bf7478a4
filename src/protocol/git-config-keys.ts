// Which `git_config` keys a request may set: an allow list of the settings users give lock
// repositories (identity, HTTP, packing, fetching, URL rewrites…). Everything else is refused by
// name, above all keys that make git run a program (a signing program, a hook, a helper), write
// or move files (cookie files, worktrees) or read more configuration: the resource runs git with
// credentials in reach, and the transports are its own. README.md (git_config) lists the same.

/** Sections whose keys are allowed, minus the names listed (lower case). */
const ALLOWED_SECTIONS = new Map<string, Set<string>>([
  // Cookie files are read and written at any path the value names.
  ['http', new Set(['cookiefile', 'savecookies'])],
  ['user', new Set()],
  ['author', new Set()],
  ['committer', new Set()],
  [
    'core',
    new Set([
      // Run a program.
      'sshcommand',
      'gitproxy',
      'askpass',
      'fsmonitor',
      'hookspath',
      'editor',
      'pager',
      'alternaterefscommand',
      // Read or write files elsewhere, or change what the repository is.
      'worktree',
      'excludesfile',
      'attributesfile',
      'sharedrepository',
      'bare',
    ]),
  ],
  ['pack', new Set()],
  // Allowed, as pipelines set them, but git/environment.ts turns automatic gc off after them: a
  // gc that git starts on its own detaches and would outlive the run.
  ['gc', new Set()],
  ['fetch', new Set()],
  ['transfer', new Set()],
  ['index', new Set()],
  ['feature', new Set()],
  ['advice', new Set()],
  // Settings of commands the resource never runs (pull) or of how git shows things: pipelines
  // carry them over from the git resource's configuration.
  ['pull', new Set()],
  ['color', new Set()],
]);

/** Single keys allowed in sections not allowed as a whole (lower case). */
const ALLOWED_KEYS = new Set([
  'protocol.version',
  'init.defaultbranch',
  'commit.cleanup',
  'commit.status',
  'push.pushoption',
  'push.default',
  'push.negotiate',
  'push.usebitmaps',
  'receive.fsckobjects',
  'receive.unpacklimit',
  'receive.maxinputsize',
  'receive.keepalive',
  // Read from system and global configuration only: set here it changes nothing.
  'safe.directory',
  // Signing stays off whatever comes first (git/environment.ts); only `false` is taken
  // (signingProblem), so no one expects signed commits from it.
  'commit.gpgsign',
  'tag.gpgsign',
  'push.gpgsign',
]);

/** `section.<subsection>.name` keys allowed: the section, and the names allowed after any subsection. */
const ALLOWED_SUBSECTION_KEYS = new Map<string, (name: string) => boolean>([
  // http.<url>.*: the same names as http.*.
  ['http', (name) => !ALLOWED_SECTIONS.get('http')!.has(name)],
  ['url', (name) => name === 'insteadof' || name === 'pushinsteadof'],
  // fetch.fsck.<msg-id>, receive.fsck.<msg-id>, gc.<pattern>.reflogExpire…
  ['fetch', () => true],
  ['receive', () => true],
  ['gc', (name) => name === 'reflogexpire' || name === 'reflogexpireunreachable'],
]);

/** Keys that are refused with the reason that matters most: they run a program. */
const RUNS_PROGRAM =
  /^(core\.(sshcommand|gitproxy|askpass|fsmonitor|hookspath|editor|pager|alternaterefscommand)|.*\.helper|gpg\..*|.*\.gpgsign|.*command|.*\.(program|textconv|driver|cmd|process|clean|smudge)|include(if)?\..*|alias\..*|pager\..*|protocol(\..*)?\.allow|remote\..*\.(uploadpack|receivepack)|uploadpack\..*|ssh\.variant|sequence\.editor|diff\.external|init\.templatedir|submodule\..*\.update)$/;

/** Keys that are refused because they read, write or move files at a path they name. */
const NAMES_FILE =
  /^(http\..*(cookiefile|savecookies)|core\.(worktree|excludesfile|attributesfile|sharedrepository)|commit\.template)$/;

/** Matches git's key syntax: `section.name` or `section.subsection.name`. */
const KEY_SYNTAX = /^[A-Za-z0-9-]+(\.[^\n\0]*)?\.[A-Za-z][A-Za-z0-9-]*$/;

/** Why `name` may not be set through git_config, or undefined when it may. */
export function gitConfigKeyProblem(name: string): string | undefined {
  if (!KEY_SYNTAX.test(name)) return 'is not a git config name (section.name)';
  if (isAllowed(name)) return undefined;
  if (RUNS_PROGRAM.test(name.toLowerCase()))
    return 'is not allowed: it makes git run a program, read more configuration or use another transport';
  if (NAMES_FILE.test(name.toLowerCase()))
    return 'is not allowed: it makes git read or write files outside its repository';
  return 'is not allowed: only the settings listed under git_config in the README are';
}

function isAllowed(name: string): boolean {
  // Section and name are case-insensitive; a subsection (a URL, say) is kept as written.
  const first = name.indexOf('.');
  const last = name.lastIndexOf('.');
  const section = name.slice(0, first).toLowerCase();
  const key = name.slice(last + 1).toLowerCase();
  if (first !== last) return ALLOWED_SUBSECTION_KEYS.get(section)?.(key) ?? false;
  const refused = ALLOWED_SECTIONS.get(section);
  if (refused) return !refused.has(key);
  return ALLOWED_KEYS.has(`${section}.${key}`);
}

/** The signing keys git_config may name, each only to turn signing off. */
const SIGNING = /^(commit|tag|push)\.gpgsign$/i;

/** git's spellings of false (git-config(1), "Values"). */
const FALSE = /^(false|no|off|0|)$/i;

/** Why the entry `name` = `value` may not be set when its name alone may (signing turned on). */
export function signingProblem(name: string, value: string): string | undefined {
  if (!SIGNING.test(name) || FALSE.test(value.trim())) return undefined;
  return 'may only be false: the resource signs nothing (a signing program would run)';
}
