// Reads a ref straight from a repository's files, sparing a `git rev-parse` process on the hot
// path right after a clone (refs are loose files or lines of packed-refs; anything else, such
// as a reftable repository, answers undefined and the caller asks git).
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';

const ID = /^[0-9a-f]{40}(?:[0-9a-f]{24})?$/;

export async function readRef(gitDir: string, ref: string): Promise<string | undefined> {
  const loose = await readFile(join(gitDir, ref), 'utf8').catch(() => undefined);
  if (loose !== undefined) return ID.test(loose.trim()) ? loose.trim() : undefined;
  const packed = await readFile(join(gitDir, 'packed-refs'), 'utf8').catch(() => '');
  for (const line of packed.split('\n')) {
    const [id, name] = line.split(' ');
    if (name === ref && id && ID.test(id)) return id;
  }
  return undefined;
}

/** Sets `ref` to `id` as a loose ref (which wins over a line of packed-refs), as git writes it. */
export async function writeRef(gitDir: string, ref: string, id: string): Promise<void> {
  const path = join(gitDir, ref);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(`${path}.lock`, `${id}\n`);
  await rename(`${path}.lock`, path);
}
