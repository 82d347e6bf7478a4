// @ts-check
// Loaded with `node --import` (NODE_OPTIONS) into a script under test: holds the import of the
// program (bin/check.js, in.js, out.js, pool.js) until the file HELD_LOAD_UNTIL exists, after
// writing the file HELD_LOAD_MARK. A test can so signal an entry script at a moment it knows: run,
// but its program not loaded yet. HELD_EVAL_MARK and HELD_EVAL_UNTIL hold it later, the program
// loaded and being evaluated (held-load-hooks.mjs).
import { register } from 'node:module';

register('./held-load-hooks.mjs', import.meta.url);
