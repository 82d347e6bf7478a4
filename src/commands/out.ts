// `out`: one put, exactly one operation, through the lock policy.
import { readFile, realpath, stat } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { buildInfoFromEnv, commitMessage } from '../build-info.js';
import type { CommandContext } from '../context.js';
import { ConfigurationError, OperationError } from '../errors.js';
import { LockPool } from '../lock-pool.js';
import { runReleasingAbandonedClaim } from '../abandoned-claim.js';
import { lockNameProblem, printable } from '../lock-name.js';
import type { ResolvedOperation } from '../lock-operation.js';
import { LockRepository } from '../lock-repository.js';
import { holderLookup } from '../lock-holders.js';
import { ProgressReporter } from '../progress.js';
import { parseOutRequest, type OutOperation } from '../request.js';
import { requestSecrets } from '../request-secrets.js';
import { lockResponse, openSession, registerSecrets } from '../session.js';

export async function runOut(ctx: CommandContext) {
  for (const secret of requestSecrets(ctx.stdin)) ctx.log.addSecret(secret);
  const { request, warnings } = parseOutRequest(ctx.stdin);
  registerSecrets(request.source, ctx);
  for (const warning of warnings) ctx.log.info(warning);
  const src = ctx.args[0];
  if (!src)
    throw new ConfigurationError([
      'usage: out SOURCE_DIRECTORY (the build folder holding the step folders)',
    ]);
  const operation = await resolveOperation(request.operation, src);
  const { source } = request;

  const { git, environment } = await openSession(source, ctx);
  const location = { uri: source.uri, branch: source.branch, pool: source.pool };
  const repository = new LockRepository(git, {
    ...location,
    workdir: join(environment.home, 'repository'),
  });
  const build = buildInfoFromEnv(ctx.env);
  const token = ctx.newToken();
  const pool = new LockPool(
    repository,
    ctx.clock,
    new ProgressReporter(
      ctx.log,
      () => ctx.clock.now(),
      holderLookup(git, source, environment.home, ctx.signal, request.waitTimeoutMs),
    ),
    {
      pool: source.pool,
      retryDelayMs: source.retryDelayMs,
      waitTimeoutMs: request.waitTimeoutMs,
      message: (subject, claiming) =>
        commitMessage(
          subject,
          build,
          claiming ? { token, at: new Date(ctx.clock.now()) } : undefined,
        ),
    },
    ctx.signal,
  );

  const run = runReleasingAbandonedClaim(ctx, pool, source, build, 'the put');

  ctx.log.info(startLine(operation, source.pool));
  const outcome = await run(operation);
  ctx.log.info(doneLine(operation, outcome.name, outcome.ref));
  return lockResponse(outcome.ref, outcome.name, source.pool);
}

export function startLine(operation: ResolvedOperation, pool: string): string {
  switch (operation.kind) {
    case 'acquire':
      return `acquiring lock on: ${pool}`;
    case 'claim':
      return `claiming lock: ${operation.name} on: ${pool}`;
    case 'release':
      return `releasing lock: ${operation.name} on: ${pool}`;
    case 'remove':
      return `removing lock: ${operation.name} on: ${pool}`;
    case 'add':
    case 'add_claimed':
      return `adding lock: ${operation.name} on: ${pool}`;
    case 'update':
      return `updating lock: ${operation.name} on: ${pool}`;
    case 'check':
      return `checking that lock: ${operation.name} on: ${pool} is unclaimed`;
    case 'check_unclaimed':
      return `checking that lock: ${operation.name} on: ${pool} is claimed`;
  }
}

export function doneLine(operation: ResolvedOperation, name: string, ref: string): string {
  const at = `(commit ${ref.slice(0, 12)})`;
  switch (operation.kind) {
    case 'acquire':
      return `acquired! lock: ${name} ${at}`;
    case 'claim':
      return `claimed! lock: ${name} ${at}`;
    case 'release':
      return `released! lock: ${name} ${at}`;
    case 'remove':
      return `removed! lock: ${name} ${at}`;
    case 'add':
    case 'add_claimed':
      return `added! lock: ${name} ${at}`;
    case 'update':
      return `updated! lock: ${name} ${at}`;
    case 'check':
      return `unclaimed! lock: ${name} ${at}`;
    case 'check_unclaimed':
      return `claimed! lock: ${name} ${at}`;
  }
}

/** Reads the step folder's `name` (and `metadata`) so the policy gets plain values. */
async function resolveOperation(operation: OutOperation, src: string): Promise<ResolvedOperation> {
  if (operation.kind === 'acquire' || operation.kind === 'claim') return operation;
  const folder = await stepFolder(src, operation.step, operation.kind);
  const name = await readName(folder, operation.kind);
  if (operation.kind === 'add' || operation.kind === 'add_claimed' || operation.kind === 'update') {
    let metadata: Buffer;
    try {
      metadata = await readFile(join(folder, 'metadata'));
    } catch {
      throw new ConfigurationError([
        `error reading ${operation.kind}: ${printable(operation.step)}/metadata does not exist or cannot be read`,
      ]);
    }
    return { kind: operation.kind, name, metadata };
  }
  return { kind: operation.kind, name };
}

async function stepFolder(src: string, step: string, field: string): Promise<string> {
  const root = resolve(src);
  const folder = resolve(root, step);
  const outside = (path: string, base: string) => {
    const rel = relative(base, path);
    return rel.startsWith('..') || isAbsolute(rel);
  };
  if (isAbsolute(step) || outside(folder, root)) {
    throw new ConfigurationError([
      `invalid payload (${field}: step folder "${printable(step)}" is outside the build's folder)`,
    ]);
  }
  let real: string;
  try {
    real = await realpath(folder);
    if (!(await stat(real)).isDirectory()) throw new Error('not a folder');
  } catch {
    throw new ConfigurationError([
      `invalid payload (${field}: step folder "${printable(step)}" does not exist)`,
    ]);
  }
  if (outside(real, await realpath(root))) {
    throw new ConfigurationError([
      `invalid payload (${field}: step folder "${printable(step)}" is outside the build's folder)`,
    ]);
  }
  return real;
}

async function readName(folder: string, field: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(join(folder, 'name'), 'utf8');
  } catch {
    throw new OperationError(`error reading ${field}: the step folder has no "name" file`);
  }
  const name = text.replace(/\r?\n$/, '').trim();
  if (name === '') throw new OperationError(`error reading ${field}: the "name" file is empty`);
  const problem = lockNameProblem(name);
  if (problem) throw new OperationError(`error reading ${field}: lock name ${problem}`);
  return name;
}
