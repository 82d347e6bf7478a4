// node:http, loaded as a CommonJS module rather than `import`ed. From Node 22 on, importing it as
// an ES module builds its ES-module face, which reads every export, `WebSocket` and the other
// fetch classes among them: that loads Node's fetch (undici) with TLS and HTTP/2, 10-15 ms of
// every start on Node 24 (measured), though the resource never uses them. Loading it as CommonJS
// reads only what is asked for.
import { createRequire } from 'node:module';

/** The node:http module, loaded when first asked for. */
export function nodeHttp(): typeof import('node:http') {
  // process.getBuiltinModule: Node >= 20.16, and the single executable (a CommonJS bundle, where
  // import.meta.url is empty) has it; createRequire for an older Node, outside the executable.
  const builtin = process.getBuiltinModule as typeof process.getBuiltinModule | undefined;
  return builtin?.('node:http') ?? createRequire(import.meta.url)('node:http');
}
