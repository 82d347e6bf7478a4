// The step folders a put reads (`release: my-step` is SRC/my-step): real folders inside the build's
// folder and regular files in them, never through a symlink, never a FIFO or a device, and never
// more than a lock file may hold. What a build left there is input like any other: a symlink
// named `metadata` pointing at a secret would otherwise commit the secret to the lock repository,
// a FIFO would hang the put, /dev/zero would fill its memory.
import { constants } from 'node:fs';
import { lstat, open, realpath, type FileHandle } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { ConfigurationError, OperationError } from '../base/errors.js';
import { printable } from '../base/lock-name.js';

/** The most a step folder's file may hold: far more than any lock's metadata needs. */
export const MAX_STEP_FILE_BYTES = 1024 * 1024;

export interface StepFolder {
  /** The folder's path, with no symlink below the build's folder. */
  path: string;
  /** The step as the request names it, for messages. */
  step: string;
  /** The params field that named it (`release`, `add`, …), for messages. */
  field: string;
}

/** `SRC/step`, refused unless it is a folder inside SRC reached without any symlink. */
export async function stepFolder(src: string, step: string, field: string): Promise<StepFolder> {
  const refuse = (why: string) =>
    new ConfigurationError([`invalid payload (${field}: step folder "${printable(step)}" ${why})`]);
  const outside = (path: string, base: string) => {
    const rel = relative(base, path);
    return rel.startsWith('..') || isAbsolute(rel);
  };
  const lexicalRoot = resolve(src);
  if (isAbsolute(step) || outside(resolve(lexicalRoot, step), lexicalRoot))
    throw refuse("is outside the build's folder");
  let root: string;
  try {
    // SRC itself may sit behind a symlink (the worker's business); what lies below it may not.
    root = await realpath(lexicalRoot);
  } catch {
    throw refuse('does not exist');
  }
  const path = resolve(root, step);
  let walked = root;
  for (const part of relative(root, path).split(sep).filter(Boolean)) {
    walked = join(walked, part);
    const info = await lstat(walked).catch(() => undefined);
    if (info?.isSymbolicLink()) {
      const target = await realpath(walked).catch(() => undefined);
      if (target !== undefined && outside(target, root))
        throw refuse("is outside the build's folder");
      throw refuse('is reached through a symbolic link: step folders are read only as folders');
    }
    if (!info?.isDirectory()) throw refuse('does not exist');
  }
  return { path, step, field };
}

/**
 * A file of the step folder, read only if it is a regular file (not a symlink, FIFO or device)
 * of at most MAX_STEP_FILE_BYTES; undefined when there is none.
 */
export async function readStepFile(
  folder: StepFolder,
  file: 'name' | 'metadata' | 'names' | 'claim_token',
): Promise<Buffer | undefined> {
  const path = join(folder.path, file);
  const failure = (why: string) =>
    new OperationError(
      `error reading ${folder.field}: ${printable(`${folder.step}/${file}`)} ${why}`,
    );
  // Looked at before it is opened: opening a FIFO waits for a writer, a device may act on open.
  const info = await lstat(path).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw failure(`cannot be read (${error.code ?? error.message})`);
  });
  if (info === undefined) return undefined;
  if (info.isSymbolicLink())
    throw failure('is a symbolic link: step folder files are read only as regular files');
  if (!info.isFile()) throw failure(`is ${fileKind(info)}, not a regular file`);
  if (info.size > MAX_STEP_FILE_BYTES) throw failure(tooLarge());

  // O_NOFOLLOW and O_NONBLOCK in case it was swapped since: neither a symlink nor a FIFO then.
  let handle: FileHandle;
  try {
    handle = await open(
      path,
      constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY,
    );
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ELOOP')
      throw failure('is a symbolic link: step folder files are read only as regular files');
    throw failure(`cannot be read (${code ?? String(error)})`);
  }
  try {
    const opened = await handle.stat();
    if (!opened.isFile()) throw failure(`is ${fileKind(opened)}, not a regular file`);
    // Read up to one byte past the cap, so a file that grew since it was looked at is refused too.
    const buffer = Buffer.alloc(MAX_STEP_FILE_BYTES + 1);
    let length = 0;
    while (length < buffer.length) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    if (length > MAX_STEP_FILE_BYTES) throw failure(tooLarge());
    return buffer.subarray(0, length);
  } finally {
    await handle.close();
  }
}

function tooLarge(): string {
  return `is larger than ${MAX_STEP_FILE_BYTES / 1024 / 1024} MiB (the most a step file may hold)`;
}

function fileKind(info: {
  isDirectory(): boolean;
  isFIFO(): boolean;
  isCharacterDevice(): boolean;
  isBlockDevice(): boolean;
  isSocket(): boolean;
}): string {
  if (info.isDirectory()) return 'a folder';
  if (info.isFIFO()) return 'a FIFO';
  if (info.isCharacterDevice() || info.isBlockDevice()) return 'a device';
  if (info.isSocket()) return 'a socket';
  return 'not a file';
}
