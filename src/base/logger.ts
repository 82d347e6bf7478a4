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

/** `scheme://userinfo@` at the start of a URI; git reads the userinfo up to the first `@`. */
const USERINFO = /^([a-z][a-z0-9+.-]*:\/\/)([^/?#@]*)@/i;

/**
 * A URI as shown to people: without its userinfo, whose user name may be a token as much as its
 * password (`https://TOKEN@host/locks.git`, `https://x-access-token:TOKEN@host/…`). Every
 * message that names the lock repository shows it through here.
 */
export function displayUri(uri: string): string {
  return uri.replace(USERINFO, '$1');
}

/** The user name and password in a URI's userinfo as written (undefined when it has none). */
export function uriCredentials(uri: string): { user: string; password?: string } | undefined {
  const userinfo = USERINFO.exec(uri)?.[2];
  if (userinfo === undefined) return undefined;
  const colon = userinfo.indexOf(':');
  return colon === -1
    ? { user: userinfo }
    : { user: userinfo.slice(0, colon), password: userinfo.slice(colon + 1) };
}

/** Percent-decoded as git decodes userinfo; the text as written when it is not valid encoding. */
export function decodeUserinfo(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * A user name shorter than this is an account name (`git`, `oauth2`), not a token: masking it
 * would garble every message that says "git". Tokens are 20 characters and more.
 */
const MIN_SECRET_USER_CHARS = 8;

/** A user name (of basic auth or a URI) as secrets to mask: a token often stands in for one. */
export function userNameSecrets(user: string | undefined): string[] {
  if (user === undefined || user.length < MIN_SECRET_USER_CHARS) return [];
  return [...new Set([user, decodeUserinfo(user)])];
}

/**
 * The secrets in a URI's userinfo, as written and decoded (`p%2fss` and `p/ss`): git may show
 * either, and the way it was percent-encoded (lower-case hex, say) is the user's. The user name
 * counts too, except over SSH, where it is the account to log in as.
 */
export function uriSecrets(uri: string): string[] {
  const credentials = uriCredentials(uri);
  if (!credentials) return [];
  const secrets = credentials.password
    ? [credentials.password, decodeUserinfo(credentials.password)]
    : [];
  if (!/^(ssh|git\+ssh|ssh\+git):/i.test(uri)) secrets.push(...userNameSecrets(credentials.user));
  return [...new Set(secrets)];
}
