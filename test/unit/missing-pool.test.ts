import { describe, expect, it } from 'vitest';
import { missingPoolError } from '../../src/repo/missing-pool.js';

/** ls-tree over a branch given as its folders, answering as git does (NUL-separated names). */
function listTree(folders: string[]) {
  return (args: readonly string[]): Promise<string> => {
    const paths = args.slice(args.indexOf('--') + 1);
    if (!args.includes('--'))
      return Promise.resolve(folders.filter((f) => !f.includes('/')).join('\0'));
    const inside = folders.filter((f) =>
      paths.some((p) => f.startsWith(p) && !f.slice(p.length).includes('/')),
    );
    return Promise.resolve(inside.join('\0'));
  };
}

describe('missingPoolError', () => {
  it('names the pools of the branch, and not folders that lack claimed/ or unclaimed/', async () => {
    const error = await missingPoolError(
      listTree(['envs', 'envs/claimed', 'envs/unclaimed', 'half', 'half/claimed', 'docs']),
      'tip',
      'env',
      'locks',
    );
    expect(error.message).toBe(
      'pool "env" does not exist on branch "locks" (expected folders env/claimed/ and env/unclaimed/); pools on the branch: "envs"; create it with: pool init --uri URI --branch locks --pool env --lock NAME',
    );
  });

  it('says when the branch has no pool at all', async () => {
    const error = await missingPoolError(listTree(['docs']), 'tip', 'envs', 'main');
    expect(error.message).toContain('; the branch has no pools yet; create it with:');
  });

  it('names ten pools at most', async () => {
    const names = Array.from({ length: 25 }, (_, i) => `p${String(i).padStart(2, '0')}`);
    const folders = names.flatMap((n) => [n, `${n}/claimed`, `${n}/unclaimed`]);
    const error = await missingPoolError(listTree(folders), 'tip', 'x', 'main');
    expect(error.message).toContain('"p08", "p09" and 15 more;');
  });

  it('still says the pool is missing when the listing fails', async () => {
    const error = await missingPoolError(
      () => Promise.reject(new Error('gone')),
      'tip',
      'x',
      'main',
    );
    expect(error.message).toBe(
      'pool "x" does not exist on branch "main" (expected folders x/claimed/ and x/unclaimed/); create it with: pool init --uri URI --branch main --pool x --lock NAME',
    );
  });
});
