// `source.known_hosts`: OpenSSH known_hosts lines that pin the server's host key. Supports what
// `ssh-keyscan` and `~/.ssh/known_hosts` contain: comma-separated host patterns with `*`, `?`
// and `!` negation, `[host]:port` for other ports, hashed `|1|salt|hash` names, `@revoked`.
import { nodeCrypto } from '../base/lazy-builtins.js';

export interface KnownHostEntry {
  marker?: 'revoked' | 'cert-authority';
  patterns: string[];
  keyType: string;
  key: Buffer;
}

export type HostKeyVerdict =
  { ok: true } | { ok: false; reason: 'not-listed' | 'mismatch' | 'revoked' };

/** Parses the field; a problem names the offending line (never its key, which is public anyway). */
export function parseKnownHosts(text: string): { entries: KnownHostEntry[] } | { problem: string } {
  const entries: KnownHostEntry[] = [];
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  for (const [index, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const fields = line.split(/\s+/);
    let marker: KnownHostEntry['marker'];
    if (fields[0]?.startsWith('@')) {
      const name = fields.shift()!;
      if (name !== '@revoked' && name !== '@cert-authority')
        return { problem: `line ${index + 1} has an unknown marker ${name}` };
      marker = name === '@revoked' ? 'revoked' : 'cert-authority';
    }
    const [hosts, keyType, encoded] = fields;
    if (!hosts || !keyType || !encoded || !/^(ssh-|ecdsa-|sk-)/.test(keyType))
      return { problem: `line ${index + 1} is not "HOSTS KEYTYPE KEY" (as ssh-keyscan prints)` };
    const key = Buffer.from(encoded, 'base64');
    if (key.length < 4 || blobType(key) !== keyType)
      return { problem: `line ${index + 1} does not hold a valid ${keyType} key` };
    entries.push({ marker, patterns: hosts.split(','), keyType, key });
  }
  if (entries.length === 0) return { problem: 'no host key lines found' };
  return { entries };
}

/** The name OpenSSH looks up: `host` on port 22, `[host]:port` otherwise. */
export function hostName(host: string, port: number): string {
  return port === 22 ? host : `[${host}]:${port}`;
}

/** Whether `patterns` (one entry's host field) names this host, OpenSSH's rules. */
export function matchesHost(patterns: readonly string[], host: string, port: number): boolean {
  const name = hostName(host, port).toLowerCase();
  let matched = false;
  for (const pattern of patterns) {
    if (pattern.startsWith('|1|')) {
      if (hashedMatches(pattern, name)) matched = true;
      continue;
    }
    const negated = pattern.startsWith('!');
    const body = (negated ? pattern.slice(1) : pattern).toLowerCase();
    if (globMatches(body, name)) {
      if (negated) return false;
      matched = true;
    }
  }
  return matched;
}

function hashedMatches(pattern: string, name: string): boolean {
  const [, , salt, hash] = pattern.split('|');
  if (!salt || !hash) return false;
  const digest = nodeCrypto()
    .createHmac('sha1', Buffer.from(salt, 'base64'))
    .update(name)
    .digest('base64');
  return digest === hash;
}

/**
 * OpenSSH's host glob (`*` any run, `?` one character), without backtracking: a field of
 * thousands of `*` is user input, and a regex built from it backtracks exponentially in the
 * process that runs the SSH transport, freezing its event loop (and its signal handling).
 * Two pointers, going back only to the last `*`; a pattern needing more characters than the
 * name has is refused first, so the work is linear in the pattern and at most quadratic in the
 * (short) host name.
 */
export function globMatches(pattern: string, name: string): boolean {
  let literal = 0;
  for (let i = 0; i < pattern.length; i++) if (pattern[i] !== '*') literal++;
  if (literal > name.length) return false;
  let p = 0;
  let n = 0;
  let star = -1;
  let resume = 0;
  while (n < name.length) {
    const c = pattern[p];
    if (c === '*') {
      star = p++;
      resume = n;
    } else if (c !== undefined && (c === '?' || c === name[n])) {
      p++;
      n++;
    } else if (star !== -1) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (pattern[p] === '*') p++;
  return p === pattern.length;
}

/** The key types pinned for this host, so the handshake can ask for one of them first. */
export function pinnedKeyTypes(
  entries: readonly KnownHostEntry[],
  host: string,
  port: number,
): string[] {
  const types = entries
    .filter((entry) => entry.marker === undefined && matchesHost(entry.patterns, host, port))
    .map((entry) => entry.keyType);
  return [...new Set(types)];
}

export function verifyHostKey(
  entries: readonly KnownHostEntry[],
  host: string,
  port: number,
  key: Buffer,
): HostKeyVerdict {
  const forHost = entries.filter((entry) => matchesHost(entry.patterns, host, port));
  if (forHost.some((entry) => entry.marker === 'revoked' && entry.key.equals(key)))
    return { ok: false, reason: 'revoked' };
  const pinned = forHost.filter((entry) => entry.marker === undefined);
  if (pinned.length === 0) return { ok: false, reason: 'not-listed' };
  return pinned.some((entry) => entry.key.equals(key))
    ? { ok: true }
    : { ok: false, reason: 'mismatch' };
}

/** The type named inside an SSH public key blob (`string type, …`). */
export function blobType(blob: Buffer): string | undefined {
  if (blob.length < 4) return undefined;
  const length = blob.readUInt32BE(0);
  if (length > blob.length - 4 || length > 64) return undefined;
  return blob.subarray(4, 4 + length).toString('latin1');
}
