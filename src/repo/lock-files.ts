// The lock files an acquire with `match` reads from the branch copy: blobs the copy already holds
// (a depth-1 fetch brings the tip's whole tree), read in one `cat-file --batch` and kept parsed by
// object id, so a put that polls for an hour reads each version of a lock file once. Only an
// acquire with `match` ever gets here: one without costs nothing more.
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Git } from '../git/git.js';
import { MAX_MATCHED_FILE_BYTES, type LockMetadata } from '../base/lock-match.js';

export class LockFiles {
  /** Parsed lock files by blob id (a blob id names its bytes: never stale). */
  private readonly parsed = new Map<string, LockMetadata>();

  constructor(
    private readonly git: Git,
    private readonly gitDir: string,
  ) {}

  /** The parsed lock file of each blob id. */
  async metadata(ids: readonly string[]): Promise<Map<string, LockMetadata>> {
    const unread = [...new Set(ids)].filter((id) => !this.parsed.has(id));
    if (unread.length > 0) await this.read(unread);
    return new Map(ids.map((id) => [id, this.parsed.get(id)!]));
  }

  /**
   * Sizes first: a lock file over the limit is never read into memory, whatever its size (a
   * repository can hold a blob of gigabytes).
   */
  private async read(ids: readonly string[]): Promise<void> {
    const sizes = parseBatch(
      await this.git.catFile(['--batch-check'], { cwd: this.gitDir, input: lines(ids) }),
      false,
    );
    const small: string[] = [];
    for (const id of ids) {
      const size = sizes.get(id)?.size;
      if (size === undefined) this.parsed.set(id, { kind: 'unreadable', why: 'not in the copy' });
      else if (size > MAX_MATCHED_FILE_BYTES)
        this.parsed.set(id, {
          kind: 'unreadable',
          why: `larger than ${MAX_MATCHED_FILE_BYTES} bytes`,
        });
      else small.push(id);
    }
    if (small.length === 0) return;
    const { readLockMetadata } = await import('../base/lock-metadata.js');
    const contents = parseBatch(
      await this.git.catFile(['--batch'], { cwd: this.gitDir, input: lines(small) }),
      true,
    );
    for (const id of small) {
      // A signal is handled between two files: a large one takes a second or so to parse.
      await nextTurn();
      const content = contents.get(id)?.content;
      this.parsed.set(
        id,
        content === undefined
          ? { kind: 'unreadable', why: 'not in the copy' }
          : readLockMetadata(content),
      );
    }
  }
}

function lines(ids: readonly string[]): Buffer {
  return Buffer.from(ids.map((id) => `${id}\n`).join(''));
}

/**
 * `git cat-file --batch-check` (`withContent` false) or `--batch` output: per object a line
 * `<id> <type> <size>` (followed, with content, by exactly `size` bytes and a newline), or
 * `<name> missing`. Blobs only; anything else is left out.
 */
export function parseBatch(
  out: Buffer,
  withContent: boolean,
): Map<string, { size: number; content?: Buffer }> {
  const objects = new Map<string, { size: number; content?: Buffer }>();
  let at = 0;
  while (at < out.length) {
    const end = out.indexOf(0x0a, at);
    if (end === -1) break;
    const [id = '', type, size] = out.subarray(at, end).toString('utf8').split(' ');
    at = end + 1;
    if (type === 'missing' || size === undefined) continue;
    const bytes = Number(size);
    if (!Number.isSafeInteger(bytes)) break;
    if (!withContent) {
      if (type === 'blob') objects.set(id, { size: bytes });
      continue;
    }
    if (at + bytes > out.length) break;
    if (type === 'blob') objects.set(id, { size: bytes, content: out.subarray(at, at + bytes) });
    at += bytes + 1;
  }
  return objects;
}
