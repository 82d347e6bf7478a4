// Node's modules that cost a start more than they give it, loaded as CommonJS when first asked for
// rather than `import`ed.
// - node:http: from Node 22 on, importing it builds its ES-module face, which reads every export,
//   `WebSocket` and the other fetch classes among them: that loads Node's fetch (undici) with TLS
//   and HTTP/2, 10-15 ms of every start on Node 24 (measured), though the resource never uses
//   them. Loading it as CommonJS reads only what is asked for.
// - node:crypto: loading it at all took about 6 ms of every start on Node 24 (measured), and only
//   `check` needs it at every run (its cache key): a claim token comes from randomUuid() below,
//   and a blob id, a hashed known_hosts name or the HTTP relay's token load it when first asked
//   for.
// - node:zlib: importing it took about 2 ms of a start (Node 20 and 24, measured), and only a
//   put in line that writes the objects of a poll's pack needs it (git/pack-objects.ts).
import { closeSync, openSync, readSync } from 'node:fs';
import { createRequire } from 'node:module';

/** The node:http module, loaded when first asked for. */
export function nodeHttp(): typeof import('node:http') {
  return builtin('node:http');
}

/** The node:crypto module, loaded when first asked for. */
export function nodeCrypto(): typeof import('node:crypto') {
  return builtin('node:crypto');
}

/** The node:zlib module, loaded when first asked for. */
export function nodeZlib(): typeof import('node:zlib') {
  return builtin('node:zlib');
}

function builtin<T>(name: string): T {
  // process.getBuiltinModule: Node >= 20.16, and the single executable (a CommonJS bundle, where
  // import.meta.url is empty) has it; createRequire for an older Node, outside the executable.
  const get = process.getBuiltinModule as ((id: string) => unknown) | undefined;
  return (get?.(name) ?? createRequire(import.meta.url)(name)) as T;
}

/**
 * A random (version 4) UUID, as crypto.randomUUID() makes one, from 16 bytes of the kernel's
 * random source: the run need not load node:crypto for it. Where that cannot be read, from
 * crypto.randomUUID().
 */
export function randomUuid(): string {
  const bytes = Buffer.alloc(16);
  try {
    const fd = openSync('/dev/urandom', 'r');
    try {
      if (readSync(fd, bytes, 0, 16, null) !== 16) return nodeCrypto().randomUUID();
    } finally {
      closeSync(fd);
    }
  } catch {
    return nodeCrypto().randomUUID();
  }
  bytes[6] = (bytes[6]! & 0x0f) | 0x40; // version 4
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // the RFC 4122 variant
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
