// @ts-check
// The module hooks of held-load.mjs (they run on a thread of their own).
import { existsSync, writeFileSync } from 'node:fs';
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
