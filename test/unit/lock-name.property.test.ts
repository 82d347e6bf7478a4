// Property-based tests of the name rules: an accepted lock or pool name is one path component
// that stays inside its folder; a refused one gets a one-line reason.
import { join, normalize, sep } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { lockNameProblem, poolNameProblem, printable } from '../../src/base/lock-name.js';

const anyName = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 300 }),
  fc.string({ unit: 'grapheme', maxLength: 300 }),
  fc.constantFrom('.', '..', '../x', 'a/b', 'a\\b', '.hidden', '', '\u0000', ' ', '-x', ':x'),
);
/** Names that are plainly fine: letters, digits and a few marks, not starting with a dot. */
const plainName = fc.stringMatching(/^[A-Za-z0-9_][A-Za-z0-9_.@+=, -]{0,100}$/);
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
/** What acts on a terminal rather than shows: controls, line separators, bidirectional overrides. */
// eslint-disable-next-line no-control-regex
const UNSHOWABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

describe('lock names', () => {
  it('an accepted name is a single component that stays inside its folder', () => {
    fc.assert(
      fc.property(anyName, (name) => {
        if (lockNameProblem(name) !== undefined) return;
        const folder = join('/repo', 'pool', 'claimed');
        const path = normalize(join(folder, name));
        expect(path.startsWith(folder + sep)).toBe(true);
        expect(path.slice(folder.length + 1)).toBe(name);
        expect(name).not.toMatch(/^\.|[/\\]/);
        expect(name).not.toMatch(CONTROL);
        expect(Buffer.byteLength(name)).toBeGreaterThan(0);
        expect(Buffer.byteLength(name)).toBeLessThanOrEqual(255);
      }),
      { numRuns: 5000 },
    );
  });

  it('names with a separator, a leading dot or a control character are refused', () => {
    const bad = fc.oneof(
      fc.tuple(fc.string(), fc.constantFrom('/', '\\'), fc.string()).map((p) => p.join('')),
      fc.string().map((rest) => `.${rest}`),
      fc
        .tuple(fc.string(), fc.integer({ min: 0, max: 0x1f }), fc.string())
        .map(([a, c, b]) => `${a}${String.fromCharCode(c)}${b}`),
      fc.string({ minLength: 256, maxLength: 400 }),
    );
    fc.assert(
      fc.property(bad, (name) => {
        expect(lockNameProblem(name)).toBeDefined();
      }),
      { numRuns: 2000 },
    );
  });

  it('plain names are accepted', () => {
    fc.assert(
      fc.property(plainName, (name) => {
        expect(lockNameProblem(name)).toBeUndefined();
        expect(poolNameProblem(name)).toBeUndefined();
      }),
    );
  });

  it('a reason is one short printable line', () => {
    fc.assert(
      fc.property(anyName, (name) => {
        for (const problem of [lockNameProblem(name), poolNameProblem(name)]) {
          if (problem === undefined) continue;
          expect(problem).not.toMatch(CONTROL);
          expect(problem.length).toBeLessThan(200);
        }
      }),
      { numRuns: 3000 },
    );
  });
});

describe('pool names', () => {
  it('follow the lock rules and never look like an option or pathspec magic', () => {
    fc.assert(
      fc.property(anyName, (pool) => {
        const problem = poolNameProblem(pool);
        if (lockNameProblem(pool) !== undefined) expect(problem).toBeDefined();
        if (pool.startsWith('-') || pool.startsWith(':')) expect(problem).toBeDefined();
      }),
      { numRuns: 3000 },
    );
  });
});

describe('printable', () => {
  it('keeps any value on one bounded line', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 2000 }), (text) => {
        const shown = printable(text);
        expect(shown).not.toMatch(UNSHOWABLE);
        // Each of 80 characters kept is at most a six-character escape (\u202e), then "… (N characters)".
        expect(shown.length).toBeLessThanOrEqual(80 * 6 + 40);
        if (text.length <= 80 && !UNSHOWABLE.test(text)) expect(shown).toBe(text);
      }),
      { numRuns: 2000 },
    );
  });
});
