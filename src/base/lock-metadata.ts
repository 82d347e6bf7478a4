// A lock file read for `match`: YAML 1.2 (so JSON too) into a map, within limits, never throwing.
// Its own module because loading the yaml package takes 30-50 ms (measured on Node 20): only an
// acquire with `match` loads it (repo/lock-files.ts imports it when it has a file to read).
import { parse } from 'yaml';
import { MAX_MATCHED_FILE_BYTES, type LockMetadata } from './lock-match.js';

/**
 * The most aliases a lock file may use: a few nested anchors expand exponentially (the "billion
 * laughs"); a hand-written lock file uses a handful.
 */
const MAX_ALIAS_COUNT = 100;

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
