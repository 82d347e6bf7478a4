// Globs on lock names, as `match_name` and `check_locks` take them: `*` is any run of characters
// (none included), `?` is one character, everything else is itself. A lock name is one path
// component, so there is nothing for `*` to stop at.

/** A test for names matching `pattern`. */
export function globMatcher(pattern: string): (name: string) => boolean {
  const body = [...pattern]
    .map((char) => (char === '*' ? '.*' : char === '?' ? '.' : escapeRegExp(char)))
    .join('');
  const regexp = new RegExp(`^${body}$`, 'su');
  return (name) => regexp.test(name);
}

function escapeRegExp(char: string): string {
  return /[\\^$.*+?()[\]{}|/]/.test(char) ? `\\${char}` : char;
}
