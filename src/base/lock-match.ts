// Choosing locks by their metadata and name (`match`, `match_name`): a lock file read as YAML (so
// JSON too) into a map, and the test of a map and a name against the filter. Pure: the policy
// applies it to the candidates, the repository reads and caches the files.
import { parse } from 'yaml';
import { globMatcher } from './glob.js';
import { printable } from './lock-name.js';

/** `match` as parsed: each key (dotted for nested maps) with the values any of which will do. */
export type MetadataMatch = ReadonlyMap<string, readonly string[]>;

/** What an acquire chooses among; at least one of the two is set (see lockFilter). */
export interface LockFilter {
  match?: MetadataMatch;
  /** A glob on the lock's name (`*`, `?`). */
  matchName?: string;
}

/** A lock file read for matching: a map, or why it can never match. */
export type LockMetadata =
  { kind: 'map'; map: ReadonlyMap<unknown, unknown> } | { kind: 'unreadable'; why: string };

/**
 * The most of a lock file read for matching: what a step folder's `metadata` may hold
 * (protocol/step-folder.ts, MAX_STEP_FILE_BYTES), so whatever `add` and `update` can write.
 */
export const MAX_MATCHED_FILE_BYTES = 1024 * 1024;

/**
 * The most aliases a lock file may use: a few nested anchors expand exponentially (the "billion
 * laughs"); a hand-written lock file uses a handful.
 */
const MAX_ALIAS_COUNT = 100;

/** A filter from the request's fields, or undefined when it chooses nothing (`match: {}`). */
export function lockFilter(
  match: MetadataMatch | undefined,
  matchName: string | undefined,
): LockFilter | undefined {
  const metadata = match !== undefined && match.size > 0 ? match : undefined;
  if (metadata === undefined && matchName === undefined) return undefined;
  return {
    ...(metadata === undefined ? {} : { match: metadata }),
    ...(matchName === undefined ? {} : { matchName }),
  };
}

/**
 * Reads a lock file as YAML 1.2 with every scalar a string (the failsafe schema): `size: 2` is
 * "2" and `version: 1.10` stays "1.10", as written. Never throws: a file that is too large, not
 * UTF-8, not YAML, or not a map is `unreadable`.
 */
export function readLockMetadata(bytes: Buffer): LockMetadata {
  if (bytes.length > MAX_MATCHED_FILE_BYTES)
    return { kind: 'unreadable', why: `larger than ${MAX_MATCHED_FILE_BYTES} bytes` };
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return { kind: 'unreadable', why: 'not UTF-8' };
  }
  let value: unknown;
  try {
    value = parse(text, {
      schema: 'failsafe',
      mapAsMap: true,
      maxAliasCount: MAX_ALIAS_COUNT,
      // yaml 2.9 checks keys for duplicates pairwise: a 1 MiB file of keys took minutes (and
      // blocked every signal), without the check 1.6 s. A key given twice: the last one holds.
      uniqueKeys: false,
      // The pretty message compiles a regular expression from the context: on a line of 20,000
      // `[` V8 ran out of memory and aborted the process.
      prettyErrors: false,
      // Errors are thrown (and caught here); warnings (unknown tags) would go to stderr.
      logLevel: 'error',
    });
  } catch {
    // Any error: a syntax error, an alias bomb, a nesting deep enough to exhaust the stack.
    return { kind: 'unreadable', why: 'not YAML or JSON' };
  }
  if (!(value instanceof Map)) return { kind: 'unreadable', why: 'not a map' };
  return { kind: 'map', map: value };
}

/** Whether the lock's name passes `match_name` (true when there is none). */
export function nameMatches(filter: LockFilter, name: string): boolean {
  return filter.matchName === undefined || globMatcher(filter.matchName)(name);
}

/**
 * Whether every key of `match` holds in the lock file: its value there (reached through nested
 * maps for a dotted key) is one of the key's values, or is a list holding one of them.
 */
export function metadataMatches(match: MetadataMatch, metadata: LockMetadata): boolean {
  if (metadata.kind !== 'map') return false;
  for (const [key, wanted] of match) {
    let value: unknown = metadata.map;
    for (const part of key.split('.')) {
      value = value instanceof Map ? (value as Map<unknown, unknown>).get(part) : undefined;
    }
    const found = Array.isArray(value) ? value : [value];
    if (!found.some((item) => typeof item === 'string' && wanted.includes(item))) return false;
  }
  return true;
}

/** `match_name "eu-*" and match {region: eu, size: [large, xlarge]}`, for messages. */
export function describeFilter(filter: LockFilter): string {
  const parts: string[] = [];
  if (filter.matchName !== undefined) parts.push(`match_name "${printable(filter.matchName)}"`);
  if (filter.match !== undefined) {
    const pairs = [...filter.match].map(([key, values]) => {
      const shown = values.map((value) => printable(value));
      return `${printable(key)}: ${shown.length === 1 ? shown[0] : `[${shown.join(', ')}]`}`;
    });
    parts.push(`match {${pairs.join(', ')}}`);
  }
  return parts.join(' and ');
}
