// The HTTP messages the relay (http-relay.ts) passes between git and the server: which headers go
// on, the bodies it holds whole, which of git's requests it may answer itself or send again, and
// how an answer reaches git.
import type {
  IncomingHttpHeaders,
  IncomingMessage,
  OutgoingHttpHeaders,
  ServerResponse,
} from 'node:http';

/** The header that carries the run's token from git to the relay (never further). */
export const RELAY_TOKEN_HEADER = 'X-Pool-Resource-Relay';

/**
 * The largest request the relay holds whole (to send again when the server had closed the kept
 * connection): git's requests to a lock repository are a few kilobytes. A larger one turns the
 * relay off and goes straight to the server.
 */
const MAX_BODY_BYTES = 8 * 1024 * 1024;

/** Headers about one connection rather than the request (RFC 9110 §7.6.1), or the relay's own. */
const CONNECTION_HEADERS = new Set([
  RELAY_TOKEN_HEADER.toLowerCase(),
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
  'host',
  'content-length',
]);

/** git's first request of a fetch over protocol v2: upload-pack's capabilities. */
export function asksCapabilities(req: IncomingMessage, path: string): boolean {
  return (
    req.method === 'GET' &&
    /\/info\/refs\?service=git-upload-pack$/.test(path) &&
    /(^|:)version=2(:|$)/.test(String(req.headers['git-protocol'] ?? ''))
  );
}

/**
 * Whether an advertisement is protocol v2's (pkt-lines: an optional `# service=` line and a
 * flush, then `version 2`), which lists capabilities only, never refs.
 */
export function isV2(body: Buffer): boolean {
  const text = body.subarray(0, 64).toString('latin1');
  return /^(?:[0-9a-f]{4}# service=git-upload-pack\n0000)?000eversion 2\n/.test(text);
}

/** A push's request: sent once, whatever happens to the connection. */
export function changesRefs(path: string): boolean {
  return /\/git-receive-pack$/.test(path.replace(/\?.*$/, ''));
}

/** The request's body, whole; undefined past MAX_BODY_BYTES. */
export async function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) {
      req.resume();
      return undefined;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

export function requestHeaders(headers: IncomingHttpHeaders, length: number): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers))
    if (value !== undefined && !CONNECTION_HEADERS.has(name)) out[name] = value;
  if (length > 0) out['content-length'] = length;
  return out;
}

export function responseHeaders(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers))
    if (value !== undefined && (name === 'content-length' || !CONNECTION_HEADERS.has(name)))
      out[name] = value;
  return out;
}

/** An answer Node's parser could not read as HTTP: whatever is there is git's to describe. */
export function speaksNoHttp(error: Error): boolean {
  return /^HPE_/.test(String((error as { code?: unknown }).code ?? ''));
}

/**
 * Answers git with `status` and `headers`, and `body` when given (else the caller pipes one);
 * false, the answer dropped, when git has gone or was already answered.
 */
export function reply(
  res: ServerResponse,
  status: number,
  headers: OutgoingHttpHeaders,
  body?: Buffer,
): boolean {
  if (res.headersSent || res.destroyed) return false;
  try {
    res.writeHead(status, headers);
  } catch {
    // A header of the server's Node will not send on: git sees the connection drop.
    res.destroy();
    return false;
  }
  if (body) res.end(body);
  return true;
}
