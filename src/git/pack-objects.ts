// The objects of a small pack (a poll's fetch on the kept session, session-pack.ts), written by
// the run itself, as loose objects or as a pack of whole objects with its index: `git
// unpack-objects` or `git index-pack` would do the same in a process of its own, and as they print
// nothing, the runner would wait 50 ms more after them (simple-git, git.ts).
// A pack (git's Documentation/gitformat-pack.txt): "PACK", a version (2 or 3) and an object
// count, then each object: its type and size, and its data zlib-deflated, the data of a delta
// being instructions to build the object from another (by offset back in the pack, or by id).
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { nodeCrypto, nodeZlib } from '../base/lazy-builtins.js';

const TYPES = ['', 'commit', 'tree', 'blob', 'tag'] as const;
const OFS_DELTA = 6;
const REF_DELTA = 7;

export interface PackedObject {
  /** Its id (SHA-1: the session asks only SHA-1 repositories for packs). */
  id: string;
  type: 'commit' | 'tree' | 'blob' | 'tag';
  data: Buffer;
}

/** The objects of `pack`, deltas resolved; throws on anything it cannot read whole. */
export function unpack(pack: Buffer): PackedObject[] {
  if (pack.toString('latin1', 0, 4) !== 'PACK') throw new Error('not a pack');
  // The pack's last 20 bytes are the SHA-1 of the rest.
  const sum = nodeCrypto().createHash('sha1').update(pack.subarray(0, -20)).digest();
  if (pack.length < 32 || !sum.equals(pack.subarray(-20)))
    throw new Error('a pack whose checksum does not match');
  const version = pack.readUInt32BE(4);
  if (version !== 2 && version !== 3) throw new Error(`pack version ${version}`);
  const count = pack.readUInt32BE(8);
  const byOffset = new Map<number, PackedObject>();
  const byId = new Map<string, PackedObject>();
  const objects: PackedObject[] = [];
  let offset = 12;
  for (let index = 0; index < count; index++) {
    const start = offset;
    let byte = pack[offset++]!;
    const kind = (byte >> 4) & 7;
    let size = byte & 15;
    for (let shift = 4; byte & 0x80; shift += 7) {
      byte = at(pack, offset++);
      size += (byte & 0x7f) * 2 ** shift;
    }
    let base: PackedObject | undefined;
    if (kind === OFS_DELTA) {
      byte = at(pack, offset++);
      let back = byte & 0x7f;
      while (byte & 0x80) {
        byte = at(pack, offset++);
        back = (back + 1) * 128 + (byte & 0x7f);
      }
      base = byOffset.get(start - back);
    } else if (kind === REF_DELTA) {
      base = byId.get(pack.toString('hex', offset, offset + 20));
      offset += 20;
    } else if (!TYPES[kind]) throw new Error(`object type ${kind} in a pack`);
    const { buffer: data, engine } = nodeZlib().inflateSync(pack.subarray(offset), {
      info: true,
    }) as unknown as {
      buffer: Buffer;
      engine: { bytesWritten: number };
    };
    offset += engine.bytesWritten;
    if (data.length !== size) throw new Error('an object of the wrong size in a pack');
    const delta = kind === OFS_DELTA || kind === REF_DELTA;
    if (delta && !base) throw new Error('a delta whose base is not in the pack');
    const type = base?.type ?? (TYPES[kind] as PackedObject['type']);
    const object = withId(type, base ? applyDelta(base.data, data) : data);
    byOffset.set(start, object);
    byId.set(object.id, object);
    objects.push(object);
  }
  return objects;
}

/** Builds an object from its delta's `base` (copies from it and new bytes). */
function applyDelta(base: Buffer, delta: Buffer): Buffer {
  let offset = 0;
  const varint = () => {
    let value = 0;
    let byte: number;
    let shift = 0;
    do {
      byte = at(delta, offset++);
      value += (byte & 0x7f) * 2 ** shift;
      shift += 7;
    } while (byte & 0x80);
    return value;
  };
  if (varint() !== base.length) throw new Error('a delta for another base');
  const result = Buffer.alloc(varint());
  let written = 0;
  while (offset < delta.length) {
    const op = delta[offset++]!;
    if (op & 0x80) {
      let from = 0;
      let length = 0;
      for (let bit = 0; bit < 4; bit++)
        if (op & (1 << bit)) from |= at(delta, offset++) << (8 * bit);
      for (let bit = 0; bit < 3; bit++)
        if (op & (0x10 << bit)) length |= at(delta, offset++) << (8 * bit);
      from >>>= 0;
      if (length === 0) length = 0x10000;
      if (from + length > base.length || written + length > result.length)
        throw new Error('a delta out of bounds');
      written += base.copy(result, written, from, from + length);
    } else if (op > 0) {
      if (offset + op > delta.length || written + op > result.length)
        throw new Error('a delta out of bounds');
      written += delta.copy(result, written, offset, offset + op);
      offset += op;
    } else throw new Error('a delta with a reserved instruction');
  }
  if (written !== result.length) throw new Error('a delta of the wrong size');
  return result;
}

function at(data: Buffer, offset: number): number {
  const byte = data[offset];
  if (byte === undefined) throw new Error('a pack cut short');
  return byte;
}

/** An object's id: the hash of its header (`type size\0`) and its data. */
export function objectId(type: string, data: Buffer, hash: 'sha1' | 'sha256' = 'sha1'): string {
  return nodeCrypto().createHash(hash).update(header(type, data)).update(data).digest('hex');
}

function withId(type: PackedObject['type'], data: Buffer): PackedObject {
  return { id: objectId(type, data), type, data };
}

function header(type: string, data: Buffer): Buffer {
  return Buffer.from(`${type} ${data.length}\0`, 'latin1');
}

/**
 * Writes `objects` into `gitDir` as one pack of whole objects and its index (version 2), as `git
 * index-pack` leaves them: two files however many objects, where loose objects are a file and
 * often a folder each, which a run then spends as long removing as writing. The index goes last:
 * git sees a pack once its index is there.
 */
export async function writePack(gitDir: string, objects: readonly PackedObject[]): Promise<void> {
  const unique = distinct(objects);
  if (unique.length === 0) return;
  const { body, sum, entries } = packed(unique);
  // The pack's own size stays far below 2 GiB (a commit's objects): no 64-bit offsets.
  if (body.length >= 2 ** 31) throw new Error('a pack too large to index');
  const name = join(gitDir, 'objects', 'pack', `pack-${sum.toString('hex')}`);
  await mkdir(join(gitDir, 'objects', 'pack'), { recursive: true });
  await writeAtomically(`${name}.pack`, Buffer.concat([body, sum]));
  await writeAtomically(`${name}.idx`, packIndex(entries, sum));
}

/**
 * `objects` as the pack a push sends (version 2, whole objects, its SHA-1 last): what `git
 * pack-objects --stdout` would send of them, deltas aside. None make a pack of no object.
 */
export function packOf(objects: readonly PackedObject[]): Buffer {
  const { body, sum } = packed(distinct(objects));
  return Buffer.concat([body, sum]);
}

/** The pack of `unique` (each id once) before its checksum, the checksum, and its entries. */
function packed(unique: readonly PackedObject[]) {
  const zlib = nodeZlib();
  const head = Buffer.alloc(12);
  head.write('PACK', 0, 'latin1');
  head.writeUInt32BE(2, 4);
  head.writeUInt32BE(unique.length, 8);
  const parts = [head];
  let offset = head.length;
  const entries = unique.map(({ id, type, data }) => {
    const entry = Buffer.concat([
      entryHeader(TYPES.indexOf(type), data.length),
      zlib.deflateSync(data),
    ]);
    parts.push(entry);
    const at = offset;
    offset += entry.length;
    return { id: Buffer.from(id, 'hex'), offset: at, crc: zlib.crc32(entry) };
  });
  const body = Buffer.concat(parts);
  return { body, sum: sha1(body), entries };
}

/** A pack entry's header: its type, and its size 4 bits then 7 bits a byte. */
function entryHeader(kind: number, size: number): Buffer {
  const bytes = [(kind << 4) | (size & 15)];
  let rest = Math.floor(size / 16);
  while (rest > 0) {
    bytes[bytes.length - 1]! |= 0x80;
    bytes.push(rest & 0x7f);
    rest = Math.floor(rest / 128);
  }
  return Buffer.from(bytes);
}

/** A version 2 pack index (git's Documentation/gitformat-pack.txt) of `entries`. */
function packIndex(
  entries: { id: Buffer; offset: number; crc: number }[],
  packSum: Buffer,
): Buffer {
  const sorted = [...entries].sort((a, b) => Buffer.compare(a.id, b.id));
  const fanout = Buffer.alloc(256 * 4);
  for (let byte = 0, index = 0; byte < 256; byte++) {
    while (index < sorted.length && sorted[index]!.id[0]! <= byte) index++;
    fanout.writeUInt32BE(index, byte * 4);
  }
  const crcs = Buffer.alloc(sorted.length * 4);
  const offsets = Buffer.alloc(sorted.length * 4);
  sorted.forEach(({ crc, offset }, index) => {
    crcs.writeUInt32BE(crc >>> 0, index * 4);
    offsets.writeUInt32BE(offset, index * 4);
  });
  const body = Buffer.concat([
    Buffer.from([0xff, 0x74, 0x4f, 0x63, 0, 0, 0, 2]),
    fanout,
    ...sorted.map(({ id }) => id),
    crcs,
    offsets,
    packSum,
  ]);
  return Buffer.concat([body, sha1(body)]);
}

function sha1(data: Buffer): Buffer {
  return nodeCrypto().createHash('sha1').update(data).digest();
}

/** Writes `path` whole or not at all: git may read it at any moment. */
async function writeAtomically(path: string, data: Buffer): Promise<void> {
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, data);
  await rename(temporary, path);
}

/** Writes `objects` into `gitDir` as loose objects, as git does. */
export async function writeLooseObjects(
  gitDir: string,
  objects: readonly PackedObject[],
): Promise<void> {
  await Promise.all(
    distinct(objects).map(async ({ id, type, data }) => {
      const folder = join(gitDir, 'objects', id.slice(0, 2));
      await mkdir(folder, { recursive: true });
      const loose = nodeZlib().deflateSync(Buffer.concat([header(type, data), data]));
      await writeAtomically(join(folder, id.slice(2)), loose);
    }),
  );
}

/** `objects` with each id once. */
function distinct(objects: readonly PackedObject[]): PackedObject[] {
  return [...new Map(objects.map((object) => [object.id, object])).values()];
}
