// The pieces every part of a request is checked with: zod fields that fail in the reference's
// `invalid payload (…)` words, and the lines a failed check becomes (one per field, a screenful at
// most, unknown fields named with the field they were likely meant to be).
//
// zod/mini, not zod's default API: the same checks and messages (both are zod's core), but a
// check or transform is a function applied to a schema, where the default API binds some fifty
// methods to every schema it builds. A script builds every request schema at start and parses
// one request: measured, the default API cost each start 8-10 ms more.
import * as z from 'zod/mini';
import en from 'zod/v4/locales/en.js';
import { nanosToMs, parseGoDuration } from '../base/duration.js';
import type { MetadataMatch } from '../base/lock-match.js';
import { printable } from '../base/lock-name.js';
import { suggestField } from './field-suggestion.js';

// The default API sets English messages on its own; zod/mini sets none (a check without a message
// of ours would read "Invalid input").
z.config(en());
// zod 4 compiles each object schema into a function (new Function) the first time it parses with
// it, which pays off over many parses; a script parses one request, so interpreting is faster
// (measured: ~2 ms of each run's start).
z.config({ jitless: true });

/**
 * A transform that may fail: `convert` returns the value, or a `Problem` (the whole message) for
 * a value it cannot take. zod/mini's transforms have no `addIssue`; this adds the issue as the
 * default API's `ctx.addIssue({ code: 'custom', message })` does.
 */
function convert<I, O>(convertValue: (value: I) => O | Problem) {
  return z.transform((value: I, payload) => {
    const converted = convertValue(value);
    if (!(converted instanceof Problem)) return converted;
    payload.issues.push({ code: 'custom', message: converted.message, input: value });
    return z.NEVER;
  });
}

/** What a `convert` function returns for a value it cannot take. */
class Problem {
  constructor(readonly message: string) {}
}

/** Anything longer is almost certainly a unit mistake ("10" meaning seconds, read as hours). */
const MAX_DURATION_MS = 7 * 24 * 3600_000;

/** No real duration is longer ("1h2m3s4ms5us6ns" is 15); longer text is not worth quoting back. */
const MAX_DURATION_CHARS = 64;

/**
 * `maxMs`/`maxText` replace the ceiling for a field whose sane values reach further (a lease may
 * span a weekend of hand-offs).
 */
export function duration(
  field: string,
  {
    allowZero,
    maxMs = MAX_DURATION_MS,
    maxText = '168h',
    nanoseconds = true,
  }: { allowZero: boolean; maxMs?: number; maxText?: string; nanoseconds?: boolean },
) {
  const problem = (message: string) => new Problem(`invalid payload (${message})`);
  return z.pipe(
    z.union([z.string(), z.number()], {
      error: `invalid payload (${field} must be a duration such as "10s")`,
    }),
    convert((value: string | number) => {
      if (typeof value === 'string' && value.length > MAX_DURATION_CHARS)
        return problem(`${field} must be a duration such as "10s"`);
      if (typeof value === 'number' && !nanoseconds)
        return problem(
          `${field} must be a duration such as "30m", not a bare number (${printable(String(value))} would be nanoseconds)`,
        );
      let ms: number;
      if (typeof value === 'number') {
        // Past 2^53 nanoseconds (104 days) a number is still whole, but no longer exact.
        if (Number.isInteger(value) && value > 0 && !Number.isSafeInteger(value))
          return problem(`${field} is longer than ${maxText}`);
        if (!Number.isSafeInteger(value))
          return problem(`${field} must be whole nanoseconds or a duration such as "10s"`);
        // Checked before converting: a few negative nanoseconds round to -0, which passes `< 0`.
        ms = value < 0 ? -1 : nanosToMs(value);
      } else {
        const parsed = parseGoDuration(value);
        if ('error' in parsed) return problem(`${field}: ${printable(parsed.error)}`);
        ms = parsed.ms;
      }
      if (ms < 0 || (!allowZero && ms === 0))
        return problem(`${field} must be ${allowZero ? 'zero or more' : 'more than zero'}`);
      if (ms > maxMs) return problem(`${field} is longer than ${maxText}`);
      return ms;
    }),
  );
}

/**
 * The longest lease (SPEC §10): a month covers any hand-off chain that renews; a longer one is
 * almost certainly a unit mistake, and would leave a forgotten lock stuck for as long.
 */
export const MAX_LEASE_MS = 30 * 24 * 3600_000;

/**
 * `lease` and `lease_grace`: Go durations up to MAX_LEASE_MS, as text only. A bare number would
 * be nanoseconds (as retry_delay's are, for the reference's sake), and `lease: 5` or
 * `lease_grace: 300` meant as minutes or seconds would let anyone reclaim a live holder's lock.
 */
export function leaseDuration(field: string, { allowZero }: { allowZero: boolean }) {
  return duration(field, {
    allowZero,
    maxMs: MAX_LEASE_MS,
    maxText: '720h (30 days)',
    nanoseconds: false,
  });
}

export function requiredString(field: string) {
  return z
    .string({
      error: (issue) =>
        issue.input === undefined || issue.input === null
          ? `invalid payload (missing ${field})`
          : `invalid payload (${field} must be a string)`,
    })
    .check(z.minLength(1, `invalid payload (missing ${field})`));
}

export function optionalString(field: string) {
  return z.pipe(
    z.nullish(z.string({ error: `invalid payload (${field} must be a string)` })),
    z.transform((value) => (value === '' || value === null ? undefined : value)),
  );
}

export function optionalBoolean(field: string) {
  return z.pipe(
    z.nullish(z.boolean({ error: `invalid payload (${field} must be true or false)` })),
    z.transform((value) => value ?? false),
  );
}

export function issueLines(error: z.core.$ZodError, prefix = ''): string[] {
  // One line per field: zod also runs length checks on a value of the wrong type (an array
  // `branch` gets "must be a string" and "missing branch"); the first says it.
  const seen = new Set<string>();
  const lines = new Set<string>();
  for (const issue of error.issues) {
    const where = [prefix, ...issue.path.map(String)].filter(Boolean).join('.');
    if (seen.has(where)) continue;
    seen.add(where);
    lines.add(
      issue.message.startsWith('invalid payload')
        ? issue.message
        : `invalid payload (${printable(where) || 'request'}: ${issue.message})`,
    );
  }
  // Capped here, not by the caller: spreading 200,000 lines into push() overflows the stack.
  return capped(
    [...lines],
    `invalid payload (${lines.size - MAX_LINES} more problems in ${prefix || 'the request'})`,
  );
}

/**
 * `unknown params field "aquire" (did you mean "acquire"?)` for each field of `value` not among
 * `known`: a warning when the request is otherwise fine, and part of the error when it is not
 * (a misspelled operation is what "missing acquire, release, …" is about).
 */
export function unknownKeys(value: unknown, known: readonly string[], where: string): string[] {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return [];
  const unknown = Object.keys(value).filter((key) => !known.includes(key));
  return capped(
    unknown.map((key) => {
      const suggestion = suggestField(key, known);
      const hint = suggestion === undefined ? '' : ` (did you mean "${suggestion}"?)`;
      return `unknown ${where} field "${printable(key)}"${hint}`;
    }),
    `${unknown.length - MAX_LINES} more unknown ${where} fields`,
  );
}

/** A request of megabytes must not become megabytes of log: a screenful says what is wrong. */
export const MAX_LINES = 20;

export function capped(lines: string[], more: string): string[] {
  return lines.length <= MAX_LINES ? lines : [...lines.slice(0, MAX_LINES), more];
}

/**
 * `match`: a map of keys (dotted for nested maps) to a scalar or a list of scalars, any of which
 * will do; every value becomes the string it is compared as (`2` is "2"). Absent is undefined;
 * `{}` is an empty map, which in params replaces the source's `match` with none.
 */
export function matchField(field: string) {
  // Optional: zod 4 treats a bare z.unknown() key as required.
  return z.pipe(
    z.optional(z.unknown()),
    convert((value): MetadataMatch | undefined | Problem => {
      if (value === undefined || value === null) return undefined;
      const problem = (message: string) => new Problem(`invalid payload (${message})`);
      if (typeof value !== 'object' || Array.isArray(value))
        return problem(`${field} must be a map of KEY: VALUE, such as {region: eu}`);
      const match = new Map<string, string[]>();
      for (const [key, wanted] of Object.entries(value)) {
        if (key.split('.').some((part) => part === ''))
          return problem(
            `${field}: "${printable(key)}" is not a key (a name, or names joined by dots for nested maps)`,
          );
        const values = Array.isArray(wanted) ? (wanted as unknown[]) : [wanted];
        if (!values.every(isScalar))
          return problem(
            `${field}.${printable(key)} must be a string, number or boolean, or a list of them`,
          );
        if (values.length === 0)
          return problem(`${field}.${printable(key)} is an empty list: no lock would match it`);
        match.set(key, values.map(String));
      }
      return match;
    }),
  );
}

function isScalar(value: unknown): value is string | number | boolean {
  return (
    typeof value === 'string' ||
    typeof value === 'boolean' ||
    (typeof value === 'number' && Number.isFinite(value))
  );
}

/** `match_name`: a glob on lock names (`*`, `?`); absent is undefined, empty is a mistake. */
export function matchNameField(field: string) {
  return z.pipe(
    z.nullish(
      z
        .string({
          error: `invalid payload (${field} must be a glob on lock names, such as "eu-*")`,
        })
        .check(
          z.minLength(
            1,
            `invalid payload (${field} must not be empty: a glob on lock names, such as "eu-*")`,
          ),
        ),
    ),
    z.transform((value) => value ?? undefined),
  );
}
