// node:http, loaded with require() rather than `import`. From Node 22 on, importing it as an ES
// module builds its ES-module face, which reads every export, `WebSocket` and the other fetch
// classes among them: that loads Node's fetch (undici) with TLS and HTTP/2, about 25 ms of every
// start, though the resource never uses them. require() reads only what is asked for.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** The node:http module, loaded when first asked for. */
export function nodeHttp(): typeof import('node:http') {
  return require('node:http') as typeof import('node:http');
}
