// The one writer of human-readable output: stderr, with every registered secret masked and every
// line passed through the one display filter (showable), whatever part of it came from where.
import { showable } from './lock-name.js';

export type Write = (text: string) => void;

export class Logger {
  private readonly secrets = new Set<string>();

  constructor(private readonly write: Write) {}

  /** Registers a value that must never be shown; very short values are ignored (they would mask noise). */
  addSecret(value: string | undefined): void {
    if (value === undefined) return;
    for (const candidate of [value, value.trim(), encodeURIComponent(value)]) {
      if (candidate.length >= 3) this.secrets.add(candidate);
    }
    // Multi-line secrets (keys) are also masked line by line, in case a tool prints one line.
    for (const line of value.split(/\r?\n/)) {
      if (line.trim().length >= 8) this.secrets.add(line.trim());
    }
  }

  redact(text: string): string {
    let result = text;
    // Longest first, so a secret containing another is masked whole.
    const secrets = [...this.secrets].sort((a, b) => b.length - a.length);
    for (const secret of secrets) {
      if (result.includes(secret)) result = result.split(secret).join('***');
    }
    // A value quoted in a message is cut short with "…" (lock-name.ts, printable): a secret
    // pasted into that field can straddle the cut and show its first part, which no whole
    // secret matches.
    for (let cut = result.indexOf('…'); cut !== -1; cut = result.indexOf('…', cut + 1)) {
      const before = result.slice(0, cut);
      const secret = secrets.find((s) => secretHeadEnding(before, s) > 0);
      if (secret === undefined) continue;
      const head = secretHeadEnding(before, secret);
      result = `${before.slice(0, cut - head)}***${result.slice(cut)}`;
      cut = cut - head + 3;
    }
    return result;
  }

  /** One line, whatever the message holds: a newline or an escape sequence in it is shown escaped. */
  info(message: string): void {
    this.write(`${showable(this.redact(message))}\n`);
  }

  error(message: string): void {
    this.write(`${showable(this.redact(message))}\n`);
  }
}

/** The length of the longest start of `secret` (3 characters or more) that `text` ends with. */
function secretHeadEnding(text: string, secret: string): number {
  for (let length = Math.min(secret.length - 1, text.length); length >= 3; length--) {
    if (text.endsWith(secret.slice(0, length))) return length;
  }
  return 0;
}

/** Removes credentials from a URI for display: `https://user:pass@host` → `https://user:***@host`. */
export function displayUri(uri: string): string {
  return uri.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/@:]*):[^/@]*@/i, '$1:***@');
}

/**
 * The password in a URI's userinfo as written and decoded (`p%2fss` and `p/ss`): git may show
 * either, and the way it was percent-encoded (lower-case hex, say) is the user's.
 */
export function uriPasswords(uri: string): string[] {
  const match = /^[a-z][a-z0-9+.-]*:\/\/[^/@:]*:([^/@]*)@/i.exec(uri);
  if (!match?.[1]) return [];
  try {
    return [...new Set([match[1], decodeURIComponent(match[1])])];
  } catch {
    return [match[1]];
  }
}
