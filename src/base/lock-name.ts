// The rules a lock name (and a pool name) must follow before any git work happens.

const MAX_NAME_BYTES = 255;

/** Why `name` cannot be a lock name, or undefined when it can. */
export function lockNameProblem(name: string): string | undefined {
  if (name === '') return 'is empty';
  if (Buffer.byteLength(name, 'utf8') > MAX_NAME_BYTES)
    return `is longer than ${MAX_NAME_BYTES} bytes`;
  if (name === '.' || name === '..') return `"${name}" is not a name`;
  // Separators first: "../x" is a path, and calling it a dotfile would mislead.
  if (name.includes('/') || name.includes('\\'))
    return `"${printable(name)}" contains a path separator`;
  if (name.startsWith('.')) return `"${printable(name)}" is a dotfile`;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f-\u009f]/.test(name))
    return `"${printable(name)}" contains a control character`;
  // Bytes that are not UTF-8 read as U+FFFD: a file so named could be listed but never moved by
  // the name read back, and a name goes into JSON, which holds text.
  if (name.includes('\uFFFD')) return `"${printable(name)}" is not UTF-8 text`;
  return undefined;
}

/** Pool folders follow the lock rules and must not look like a git option or pathspec magic. */
export function poolNameProblem(pool: string): string | undefined {
  const problem = lockNameProblem(pool);
  if (problem) return problem;
  if (pool.startsWith('-')) return `"${printable(pool)}" starts with "-"`;
  if (pool.startsWith(':')) return `"${printable(pool)}" starts with ":"`;
  return undefined;
}

/** Longest value quoted in a message: a megabyte-long field must not become a megabyte-long line. */
const MAX_QUOTED_CHARS = 80;

/**
 * Characters that act on a terminal or a log instead of showing: C0 and C1 controls (escape
 * sequences, carriage returns, newlines), DEL, Unicode line separators and bidirectional overrides.
 */
// eslint-disable-next-line no-control-regex
const UNSHOWABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/**
 * The one filter for text on its way to stderr, stdout or a terminal: every character that would
 * act rather than show becomes a visible escape (`\x1b`, `\u202e`), nothing is cut. Text from the
 * lock repository (lock names, trailers, build URLs, authors) is anyone's who can push there.
 */
export function showable(text: string): string {
  return text.replace(UNSHOWABLE, (c) => {
    const code = c.charCodeAt(0);
    return code <= 0xff
      ? `\\x${code.toString(16).padStart(2, '0')}`
      : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

/** A value quoted in a message: shown as showable() does, and cut short when long. */
export function printable(text: string): string {
  const shown =
    text.length > MAX_QUOTED_CHARS
      ? `${text.slice(0, MAX_QUOTED_CHARS).replace(/[\uD800-\uDBFF]$/, '')}… (${text.length} characters)`
      : text;
  return showable(shown);
}
