// Choosing locks by their metadata and name (`match`, `match_name`): the filter a request asks for,
// and the test of a lock's name and its file (read by lock-metadata.ts) against it. Pure: the
// policy applies it to the candidates, the repository reads and caches the files.
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

/** A lock file read for matching (lock-metadata.ts): a map, or why it can never match. */
export type LockMetadata =
  { kind: 'map'; map: ReadonlyMap<unknown, unknown> } | { kind: 'unreadable'; why: string };

/**
 * The most of a lock file read for matching: what a step folder's `metadata` may hold
 * (protocol/step-folder.ts, MAX_STEP_FILE_BYTES), so whatever `add` and `update` can write.
 */
export const MAX_MATCHED_FILE_BYTES = 1024 * 1024;

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
