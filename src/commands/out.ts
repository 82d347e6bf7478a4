// `out`: one put, exactly one operation, through the lock policy.
import { buildInfoFromEnv } from '../protocol/build-info.js';
import type { CommandContext } from '../run/context.js';
import { ConfigurationError, OperationError } from '../base/errors.js';
import { lockNameProblem, printable } from '../base/lock-name.js';
import type { ResolvedOperation } from '../lock/lock-operation.js';
import { runLockOperation } from '../run/lock-run.js';
import { parseOutRequest, type OutRequest } from '../protocol/request.js';
import { lockResponse, openSession, readRequest, reapResponse } from '../run/session.js';
import { readStepFile, stepFolder, type StepFolder } from '../protocol/step-folder.js';

/** Said when the folder argument is missing (main says it before reading stdin). */
export const OUT_USAGE = 'usage: out SOURCE_DIRECTORY (the build folder holding the step folders)';

export async function runOut(ctx: CommandContext) {
  const request = await readRequest(ctx, parseOutRequest);
  const src = ctx.args[0];
  if (!src) throw new ConfigurationError([OUT_USAGE]);
  const operation = await resolveOperation(request, src);
  const { source } = request;

  const { git, environment } = await openSession(source, ctx);
  const outcome = await runLockOperation(ctx, operation, {
    git,
    home: environment.home,
    source,
    build: buildInfoFromEnv(ctx.env),
    waitTimeoutMs: request.waitTimeoutMs,
    claimer: 'the put',
    leaseMs: request.leaseMs,
  });
  if (operation.kind === 'reap') return reapResponse(outcome.ref, outcome.names, source.pool);
  return lockResponse(outcome.ref, outcome.name, source.pool, outcome.names);
}

/** Reads the step folder's `name` (and `metadata`) so the policy gets plain values. */
async function resolveOperation(request: OutRequest, src: string): Promise<ResolvedOperation> {
  const { operation } = request;
  if (operation.kind === 'acquire') return { ...operation, reclaimExpired: request.reclaimExpired };
  if (operation.kind === 'reap' || operation.kind === 'claim') return operation;
  const folder = await stepFolder(src, operation.step, operation.kind);
  const name = await readName(folder);
  if (operation.kind === 'add' || operation.kind === 'add_claimed' || operation.kind === 'update') {
    const metadata = await readStepFile(folder, 'metadata');
    if (metadata === undefined)
      throw new ConfigurationError([
        `error reading ${operation.kind}: ${printable(operation.step)}/metadata does not exist or cannot be read`,
      ]);
    if (operation.kind === 'update')
      return { kind: 'update', name, metadata, ...(await readToken(folder)) };
    return { kind: operation.kind, name, metadata };
  }
  if (operation.kind === 'release') {
    const token = await readToken(folder);
    // A `get` of a set's version wrote every lock of it to `names`: release them all.
    const names = await readNames(folder);
    if (names && names.length > 1) return { kind: 'release', name: names[0]!, names, ...token };
    return { kind: 'release', name, ...token };
  }
  // The request refuses a renew without a lease.
  if (operation.kind === 'renew') {
    const token = await readToken(folder);
    const names = await readNames(folder);
    const set = names && names.length > 1 ? { name: names[0]!, names } : { name };
    return { kind: 'renew', ...set, leaseMs: request.leaseMs!, ...token };
  }
  return { kind: operation.kind, name };
}

/** A token as claims write it (a UUID); anything else in the file is not one of ours. */
const CLAIM_TOKEN = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The claim a `get` of the lock wrote (`claim_token`, SPEC §10): the operation then acts only
 * while that claim holds the lock. A folder without one (the reference's `in`) acts as before.
 */
async function readToken(folder: StepFolder): Promise<{ token?: string }> {
  const bytes = await readStepFile(folder, 'claim_token');
  if (bytes === undefined) return {};
  const token = bytes.toString('utf8').trim();
  if (!CLAIM_TOKEN.test(token))
    throw new OperationError(
      `error reading ${folder.field}: the "claim_token" file does not hold a claim token`,
    );
  return { token };
}

/** The `names` file of a set's step folder (one lock a line), if the folder has one. */
async function readNames(folder: StepFolder): Promise<string[] | undefined> {
  const { field } = folder;
  const bytes = await readStepFile(folder, 'names');
  if (bytes === undefined) return undefined;
  const names = bytes
    .toString('utf8')
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '');
  for (const name of names) {
    const problem = lockNameProblem(name);
    if (problem)
      throw new OperationError(`error reading ${field}: "names" lists a lock name ${problem}`);
  }
  if (new Set(names).size !== names.length)
    throw new OperationError(`error reading ${field}: "names" lists a lock more than once`);
  return names;
}

async function readName(folder: StepFolder): Promise<string> {
  const { field } = folder;
  const bytes = await readStepFile(folder, 'name');
  if (bytes === undefined)
    throw new OperationError(`error reading ${field}: the step folder has no "name" file`);
  const name = bytes
    .toString('utf8')
    .replace(/\r?\n$/, '')
    .trim();
  if (name === '') throw new OperationError(`error reading ${field}: the "name" file is empty`);
  const problem = lockNameProblem(name);
  if (problem) throw new OperationError(`error reading ${field}: lock name ${problem}`);
  return name;
}
