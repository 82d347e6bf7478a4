// @ts-check
// The bench's command line (see scripts/bench.mjs for what each option does).
import { dirname, resolve } from 'node:path';
import { parseArgs } from 'node:util';

export const ROOT = resolve(import.meta.dirname, '../..');

export const { values: opts } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    sizes: { type: 'string' },
    reps: { type: 'string' },
    workers: { type: 'string', default: '8' },
    locks: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '3' },
    'hold-ms': { type: 'string', default: '200' },
    // A short but realistic setting (the default is 10s): waiters poll once a second.
    'retry-delay': { type: 'string', default: '1s' },
    'no-contention': { type: 'boolean', default: false },
    'no-kills': { type: 'boolean', default: false },
    'no-variants': { type: 'boolean', default: false },
    'no-ssh': { type: 'boolean', default: false },
    'no-http': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
    out: { type: 'string' },
    // The scripts to measure: the payload `npm run package` writes (what the image puts in
    // /opt/resource), or assets/ (the unbundled build in dist/), or an installed payload.
    assets: { type: 'string', default: 'build/resource' },
    // The node the scripts run with (their `#!/usr/bin/env node` finds it first on PATH): the
    // machine's by default; the image's major version to measure the scripts as they run there.
    node: { type: 'string' },
    // The reference's scripts (its image's /opt/resource), to run the contention with them too
    // (over git daemon, and the first scenario over HTTP and SSH) and compare within one run.
    reference: { type: 'string' },
  },
});
export const ASSETS = resolve(ROOT, opts.assets);
export const REFERENCE = opts.reference ? resolve(opts.reference) : undefined;
/** The folder put first on the scripts' PATH so that `env node` finds --node, if given. */
export const NODE_DIR = opts.node ? dirname(resolve(opts.node)) : undefined;
export const sizes = (opts.sizes ?? '100,10000,100000').split(',').map(Number);
export const reps = Number(opts.reps ?? (opts.quick ? 3 : 9));
export const contention = {
  workers: Number(opts.workers),
  locks: Number(opts.locks),
  rounds: Number(opts.rounds),
  holdMs: Number(opts['hold-ms']),
  retryDelay: opts['retry-delay'],
};
