// @ts-check
// The module hooks of held-load.mjs (they run on a thread of their own).
import { existsSync, writeFileSync } from 'node:fs';
import { TextDecoder } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';

const PROGRAM = /\/bin\/(check|in|out|pool)\.js$/;

/** @type {import('node:module').ResolveHook} */
export async function resolve(specifier, context, next) {
  const { HELD_LOAD_MARK: mark, HELD_LOAD_UNTIL: until } = process.env;
  if (mark && until && PROGRAM.test(specifier)) {
    writeFileSync(mark, '');
    while (!existsSync(until)) await sleep(20);
  }
  return next(specifier, context);
}

/**
 * With HELD_EVAL_MARK and HELD_EVAL_UNTIL, the program's own code, once everything it imports has
 * been evaluated, first writes the mark and blocks the process (no event loop turns) until the
 * other file exists: a signal then arrives while the program is being evaluated, as on a busy
 * worker, just before it calls main().
 * @type {import('node:module').LoadHook}
 */
export async function load(url, context, next) {
  const loaded = await next(url, context);
  const { HELD_EVAL_MARK: mark, HELD_EVAL_UNTIL: until } = process.env;
  if (!mark || !until || !PROGRAM.test(url) || loaded.source == null) return loaded;
  const hold = [
    "import { existsSync as heldExists, writeFileSync as heldWrite } from 'node:fs';",
    `heldWrite(${JSON.stringify(mark)}, '');`,
    'const heldCell = new Int32Array(new SharedArrayBuffer(4));',
    `while (!heldExists(${JSON.stringify(until)})) Atomics.wait(heldCell, 0, 0, 20);`,
    '',
  ].join('\n');
  const { source } = loaded;
  const text = typeof source === 'string' ? source : new TextDecoder().decode(source);
  return { ...loaded, source: hold + text };
}
