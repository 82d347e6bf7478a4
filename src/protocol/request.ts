// Turns the JSON on stdin into typed, fully defaulted requests for check, in and out (one place,
// so the three scripts validate alike and report every problem at once). The `source` they share
// is source.ts's.
import * as z from 'zod/mini';
import { ConfigurationError } from '../base/errors.js';
import { lockFilter, type LockFilter } from '../base/lock-match.js';
import { lockNameProblem, printable } from '../base/lock-name.js';
import {
  capped,
  duration,
  issueLines,
  leaseDuration,
  matchField,
  matchNameField,
  MAX_LINES,
  unknownKeys,
} from './payload-fields.js';
import { parseSource, type Source } from './source.js';

export { isSshUri } from '../transport/ssh-args.js';
export { type GitConfigEntry, type Source } from './source.js';

export type StepOperationKind =
  'release' | 'add' | 'add_claimed' | 'remove' | 'update' | 'check' | 'check_unclaimed' | 'renew';

export type OutOperation =
  | { kind: 'acquire'; count?: number; filter?: LockFilter }
  | { kind: 'reap' }
  /** `names`: every lock of a `claim` list (more than one), `name` its first. */
  | { kind: 'claim'; name: string; names?: string[] }
  | { kind: StepOperationKind; step: string };

/** The most locks one put takes at once: more is a typo, and each is a commit of one push. */
export const MAX_COUNT = 100;

export interface CheckRequest {
  source: Source;
  version?: string;
}

export interface InRequest {
  source: Source;
  version: string;
  depth?: number;
}

export interface OutRequest {
  source: Source;
  operation: OutOperation;
  waitTimeoutMs?: number;
  /** The lease of this put's claim: `params.lease`, else the source's (SPEC §10). */
  leaseMs?: number;
  /** `reclaim_expired` of the params, else of the source. */
  reclaimExpired: boolean;
}

export interface Parsed<T> {
  request: T;
  warnings: string[];
}

const OPERATION_KEYS = [
  'acquire',
  'release',
  'remove',
  'claim',
  'add',
  'add_claimed',
  'update',
  'check',
  'check_unclaimed',
  'renew',
  'reap',
] as const;

/**
 * The keys of a request, whichever script reads it: Concourse sends each script the ones it
 * needs, and one script's key in another's request (a `version` in a put) is no mistake.
 */
const ENVELOPE_KEYS = ['source', 'version', 'params'];

const MISSING_OPERATION =
  'invalid payload (missing acquire, release, remove, claim, add, add_claimed, update, check, or check_unclaimed)';

/** A full or abbreviated commit id: the only versions ever compared with the branch's commits. */
const COMMIT_ID = /^[0-9a-f]{4,64}$/i;

const anyRef = z.string({ error: 'invalid payload (version.ref must be a string)' });

const commitRef = anyRef.check(
  z.regex(COMMIT_ID, 'invalid payload (version.ref must be a commit id)'),
);

const versionSchema = z.looseObject(
  { ref: commitRef },
  { error: 'invalid payload (version must be an object with a ref)' },
);

const checkSchema = z.looseObject({
  // zod 4 treats a bare z.unknown() key as required; a missing source is reported by parseSource.
  source: z.optional(z.unknown()),
  version: z.nullish(
    z.looseObject(
      // Any string: one that is not a commit id is a version no longer on the branch (§4).
      { ref: z.nullish(anyRef) },
      { error: 'invalid payload (version must be an object with a ref)' },
    ),
  ),
});

const DEPTH_PROBLEM = 'invalid payload (params.depth must be a positive whole number)';

const inSchema = z.looseObject({
  source: z.optional(z.unknown()),
  version: z.nullish(versionSchema),
  params: z.nullish(
    z.looseObject(
      {
        depth: z.nullish(
          z.number({ error: DEPTH_PROBLEM }).check(z.int(DEPTH_PROBLEM), z.positive(DEPTH_PROBLEM)),
        ),
      },
      { error: 'invalid payload (params must be an object)' },
    ),
  ),
});

const stepParam = (field: string) =>
  z.pipe(
    z.nullish(z.string({ error: `invalid payload (${field} must be the name of a step folder)` })),
    z.transform((value) => (value === '' || value === null ? undefined : value)),
  );

const COUNT_PROBLEM = `invalid payload (count must be a whole number from 1 to ${MAX_COUNT})`;

const outParamsShape = {
  acquire: z.nullish(z.boolean({ error: 'invalid payload (acquire must be true or false)' })),
  claim: z.pipe(
    z.nullish(
      z.union(
        [
          z.string(),
          z
            .array(z.string(), {
              error: 'invalid payload (claim must be a lock name or a list of them)',
            })
            .check(
              z.minLength(1, 'invalid payload (claim must not be an empty list)'),
              z.maxLength(MAX_COUNT, `invalid payload (claim lists more than ${MAX_COUNT} locks)`),
            ),
        ],
        { error: 'invalid payload (claim must be a lock name or a list of them)' },
      ),
    ),
    z.transform((value) => (value === '' || value === null ? undefined : value)),
  ),
  count: z.nullish(
    z
      .number({ error: COUNT_PROBLEM })
      .check(z.int(COUNT_PROBLEM), z.gte(1, COUNT_PROBLEM), z.lte(MAX_COUNT, COUNT_PROBLEM)),
  ),
  release: stepParam('release'),
  add: stepParam('add'),
  add_claimed: stepParam('add_claimed'),
  remove: stepParam('remove'),
  update: stepParam('update'),
  check: stepParam('check'),
  check_unclaimed: stepParam('check_unclaimed'),
  renew: stepParam('renew'),
  reap: z.nullish(z.boolean({ error: 'invalid payload (reap must be true or false)' })),
  wait_timeout: z.nullish(duration('wait_timeout', { allowZero: false })),
  match: matchField('match'),
  match_name: matchNameField('match_name'),
  lease: z.nullish(leaseDuration('lease', { allowZero: false })),
  reclaim_expired: z.nullish(
    z.boolean({ error: 'invalid payload (reclaim_expired must be true or false)' }),
  ),
};

const outSchema = z.looseObject({
  source: z.optional(z.unknown()),
  params: z.nullish(
    z.looseObject(outParamsShape, { error: 'invalid payload (params must be an object)' }),
  ),
});

function parseJson(text: string): unknown {
  if (text.trim() === '')
    throw new ConfigurationError([
      'invalid payload (empty input: expected a JSON request on stdin)',
    ]);
  try {
    return JSON.parse(text);
  } catch {
    // JSON.parse's message quotes the input, which may hold secrets: say only what is wrong.
    throw new ConfigurationError(['invalid payload (stdin is not valid JSON)']);
  }
}

function expectObject(value: unknown): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigurationError(['invalid payload (expected a JSON object on stdin)']);
  }
}

/**
 * `unknown`: the unknown fields, said as warnings, or after the problems when there are any (a
 * misspelled field is often why a required one is missing); `notes`: other warnings, said only
 * when the request is taken.
 */
function finish<T>(
  problems: string[],
  build: () => T,
  unknown: string[],
  notes: string[] = [],
): Parsed<T> {
  if (problems.length > 0) {
    const unique = [
      ...new Set([...problems, ...unknown.map((line) => `invalid payload (${line})`)]),
    ];
    throw new ConfigurationError(
      capped(unique, `invalid payload (and ${unique.length - MAX_LINES} more problems)`),
    );
  }
  return {
    request: build(),
    warnings: [...unknown.map((line) => `warning: ignoring ${line}`), ...notes],
  };
}

/** A `source` object on its own: the pool command builds one from flags or a JSON file. */
export async function parseSourceObject(raw: unknown): Promise<Parsed<Source>> {
  const problems: string[] = [];
  const unknown: string[] = [];
  const source = await parseSource(raw, problems, unknown);
  return finish(problems, () => source!, unknown);
}

/**
 * What every script's request has in common: JSON, an object, a `source` (its problems first, as
 * the reference reports them), no unknown keys, and the script's own envelope `schema`.
 */
async function readEnvelope<Schema extends z.ZodMiniType>(text: string, schema: Schema) {
  const raw = parseJson(text);
  expectObject(raw);
  const problems: string[] = [];
  const unknown: string[] = [];
  const source = await parseSource((raw as { source?: unknown }).source, problems, unknown);
  unknown.push(...unknownKeys(raw, ENVELOPE_KEYS, 'request'));
  const envelope = schema.safeParse(raw);
  if (!envelope.success) problems.push(...issueLines(envelope.error));
  return { source, envelope, problems, unknown };
}

export async function parseCheckRequest(text: string): Promise<Parsed<CheckRequest>> {
  const { source, envelope, problems, unknown } = await readEnvelope(text, checkSchema);
  // The reference answers such a version (its own test sends "bogus-ref") as an unknown commit:
  // with the latest commit that touched the pool. It never reaches git, not even as a revision.
  const ref = envelope.data?.version?.ref ?? undefined;
  const version = ref !== undefined && COMMIT_ID.test(ref) ? ref : undefined;
  const notes =
    ref !== undefined && ref !== '' && version === undefined
      ? [
          `version.ref "${printable(ref)}" is not a commit id: answering with the latest commit that touched the pool`,
        ]
      : [];
  return finish(problems, () => ({ source: source!, version }), unknown, notes);
}

export async function parseInRequest(text: string): Promise<Parsed<InRequest>> {
  const { source, envelope, problems, unknown } = await readEnvelope(text, inSchema);
  if (envelope.success && !envelope.data.version)
    problems.push('invalid payload (missing version)');
  if (envelope.success) unknown.push(...unknownKeys(envelope.data.params, ['depth'], 'params'));
  return finish(
    problems,
    () => ({
      source: source!,
      version: envelope.data!.version!.ref,
      depth: envelope.data!.params?.depth ?? undefined,
    }),
    unknown,
  );
}

export async function parseOutRequest(text: string): Promise<Parsed<OutRequest>> {
  const { source, envelope, problems, unknown } = await readEnvelope(text, outSchema);
  let operation: OutOperation | undefined;
  if (envelope.success) {
    const params: Partial<OutParams> = envelope.data.params ?? {};
    unknown.push(...unknownKeys(params, Object.keys(outParamsShape), 'params'));
    const chosen = OPERATION_KEYS.filter((key) =>
      key === 'acquire' || key === 'reap' ? params[key] === true : params[key] !== undefined,
    );
    if (params.count != null && !chosen.every((key) => key === 'acquire'))
      problems.push('invalid payload (count goes with acquire: true only)');
    if (chosen.length === 0) problems.push(MISSING_OPERATION);
    else if (chosen.length > 1 && chosen.includes('reap')) {
      problems.push(
        `invalid payload (reap reclaims every expired lock of the pool and takes no other operation: drop ${chosen.filter((key) => key !== 'reap').join(', ')})`,
      );
    } else if (chosen.length > 1) {
      problems.push(
        `invalid payload (params has more than one operation: ${chosen.join(', ')}; a put does exactly one)`,
      );
    } else {
      operation = toOperation(chosen[0]!, params, problems);
      const filters = (['match', 'match_name'] as const).filter((key) => params[key] !== undefined);
      if (chosen[0] !== 'acquire' && filters.length > 0)
        problems.push(
          `invalid payload (${filters.join(' and ')} ${filters.length === 1 ? 'chooses' : 'choose'} the lock of an acquire; ${chosen[0]} names its lock)`,
        );
    }
    problems.push(...leaseProblems(chosen, params));
    if (operation?.kind === 'renew' && params.lease == null && source?.leaseMs === undefined)
      problems.push('invalid payload (renew needs a lease: set lease in params or in source)');
  }
  return finish(
    problems,
    () => {
      const params = envelope.data!.params;
      return {
        source: source!,
        operation: operation!.kind === 'acquire' ? acquiring(params ?? {}, source!) : operation!,
        waitTimeoutMs: params?.wait_timeout ?? undefined,
        leaseMs: params?.lease ?? source!.leaseMs,
        reclaimExpired: params?.reclaim_expired ?? source!.reclaimExpired,
      };
    },
    unknown,
  );
}

type OutParams = z.infer<z.ZodMiniObject<typeof outParamsShape>>;

/** An acquire and its filter: `match` and `match_name` in params each replace the source's. */
function acquiring(params: Partial<OutParams>, source: Source): OutOperation {
  const filter = lockFilter(params.match ?? source.match, params.match_name ?? source.matchName);
  return {
    kind: 'acquire',
    ...(params.count == null ? {} : { count: params.count }),
    ...(filter ? { filter } : {}),
  };
}

/** The lease params mean something only to the operations that take or keep a claim. */
function leaseProblems(chosen: readonly string[], params: Partial<OutParams>): string[] {
  const [operation] = chosen;
  if (chosen.length !== 1 || operation === undefined) return [];
  const problems: string[] = [];
  if (params.lease != null && !LEASED_OPERATIONS.includes(operation))
    problems.push(
      `invalid payload (lease applies to ${LEASED_OPERATIONS.join(', ')}, not to ${operation})`,
    );
  if (params.reclaim_expired != null && operation !== 'acquire')
    problems.push(`invalid payload (reclaim_expired applies to acquire, not to ${operation})`);
  return problems;
}

const LEASED_OPERATIONS: readonly string[] = ['acquire', 'claim', 'renew'];

function toOperation(
  key: (typeof OPERATION_KEYS)[number],
  params: Partial<OutParams>,
  problems: string[],
): OutOperation | undefined {
  if (key === 'reap') return { kind: 'reap' };
  // Its count and filter are added once the source is known (see acquiring).
  if (key === 'acquire') return { kind: 'acquire' };
  if (key === 'claim') {
    const claim = params.claim!;
    const names = typeof claim === 'string' ? [claim] : claim;
    for (const name of names) {
      const problem = lockNameProblem(name);
      if (problem) {
        problems.push(`invalid payload (claim: lock name ${problem})`);
        return undefined;
      }
    }
    const repeated = names.find((name, index) => names.indexOf(name) !== index);
    if (repeated !== undefined) {
      problems.push(`invalid payload (claim lists "${printable(repeated)}" more than once)`);
      return undefined;
    }
    return names.length === 1
      ? { kind: 'claim', name: names[0]! }
      : { kind: 'claim', name: names[0]!, names };
  }
  const step = params[key]!;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000]/.test(step)) {
    problems.push(`invalid payload (${key}: step folder contains a NUL character)`);
    return undefined;
  }
  return { kind: key, step };
}
