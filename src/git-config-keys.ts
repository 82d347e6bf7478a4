// Which `git_config` keys a request may set. Keys that make git run a program (or another SSH
// command, credential helper, hook…), load more config, or loosen which protocols git may use are
// refused: the resource runs git with credentials in reach, and the transports are its own.

/** Exact keys, lower case (git config names are case-insensitive except the subsection). */
const REFUSED_KEYS = new Set([
  'core.sshcommand',
  'core.gitproxy',
  'core.askpass',
  'core.fsmonitor',
  'core.hookspath',
  'core.editor',
  'core.pager',
  'core.alternaterefscommand',
  'sequence.editor',
  'diff.external',
  'gpg.program',
  'include.path',
  'init.templatedir',
  'protocol.allow',
  'ssh.variant',
  'uploadpack.packobjectshook',
  'credential.helper',
]);

/** `section.<anything>.name` keys, as section and name (lower case). */
const REFUSED_SUBSECTION_KEYS: [string, RegExp][] = [
  ['credential', /^helper$/],
  ['protocol', /^allow$/],
  ['includeif', /^path$/],
  ['diff', /^(command|textconv)$/],
  ['difftool', /^(cmd|path)$/],
  ['mergetool', /^(cmd|path)$/],
  ['merge', /^driver$/],
  ['filter', /^(clean|smudge|process)$/],
  ['gpg', /^program$/],
  ['remote', /^(uploadpack|receivepack|vcs)$/],
  ['submodule', /^update$/],
  ['tar', /^command$/],
  ['trailer', /^(cmd|command)$/],
  ['url', /^(insteadof|pushinsteadof)$/],
];

/** Whole sections whose every key runs a program. */
const REFUSED_SECTIONS = new Set(['alias', 'pager']);

/** Matches git's key syntax: `section.name` or `section.subsection.name`. */
const KEY_SYNTAX = /^[A-Za-z0-9-]+(\.[^\n\0]*)?\.[A-Za-z][A-Za-z0-9-]*$/;

/** Why `name` may not be set through git_config, or undefined when it may. */
export function gitConfigKeyProblem(name: string): string | undefined {
  if (!KEY_SYNTAX.test(name)) return 'is not a git config name (section.name)';
  const lower = name.toLowerCase();
  const first = lower.indexOf('.');
  const last = lower.lastIndexOf('.');
  const section = lower.slice(0, first);
  const key = lower.slice(last + 1);
  const hasSubsection = first !== last;
  const refused =
    (!hasSubsection && REFUSED_KEYS.has(lower)) ||
    REFUSED_SECTIONS.has(section) ||
    // credential.helper, credential.<url>.helper and any other helper program.
    key === 'helper' ||
    (hasSubsection &&
      REFUSED_SUBSECTION_KEYS.some(([refusedSection, pattern]) => {
        return refusedSection === section && pattern.test(key);
      }));
  if (!refused) return undefined;
  return 'is not allowed: it makes git run a program, read more configuration or use another transport';
}
