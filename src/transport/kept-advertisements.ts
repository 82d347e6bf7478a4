// The advertisements the relay (http-relay.ts) answers git with itself, from what the server sent
// earlier in the run, each a request to the server and a round trip fewer:
//
// - upload-pack's capabilities in protocol v2, which every fetch asks for first and which list no
//   refs: the same all run long.
// - receive-pack's ref advertisement, which every push asks for first, for a push whose refs the
//   run knows (`expectPush`: the tip its commit was made on, the line entry it takes out). The
//   server's own capabilities, kept from a push of the run's, go with those refs. The refs may be
//   stale by the time the push arrives, as the server's own advertisement may: receive-pack checks
//   each ref's old value when it updates it, so a push whose ref moved meanwhile is rejected
//   (`failed to update ref`, `atomic transaction failed`: a lost race, git/push-outcome.ts) and
//   never lands on a tip it was not made on.
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import { asksCapabilities, isV2 } from './http-messages.js';

/** A ref as the run knows it on the server. */
export interface KnownRef {
  id: string;
  ref: string;
}

interface Kept {
  headers: OutgoingHttpHeaders;
  body: Buffer;
}

const RECEIVE_PACK_TYPE = 'application/x-git-receive-pack-advertisement';

/** git's first request of a push: receive-pack's refs and capabilities. */
export function asksPushAdvertisement(req: IncomingMessage, path: string): boolean {
  return req.method === 'GET' && /\/info\/refs\?service=git-receive-pack$/.test(path);
}

export class KeptAdvertisements {
  private capabilities: Kept | undefined;
  /**
   * receive-pack's advertisement as the server sent it: what comes before the refs (the
   * `# service=` line and its flush), and the capabilities its first ref carries.
   */
  private receivePack:
    { headers: OutgoingHttpHeaders; head: Buffer; capabilities: string } | undefined;
  /** The refs the next push's advertisement lists, once. */
  private pushRefs: readonly KnownRef[] | undefined;

  /** upload-pack's v2 capability advertisement, once a fetch of git's has asked it. */
  get uploadPackCapabilities(): Buffer | undefined {
    return this.capabilities?.body;
  }

  /**
   * The refs to advertise to the next push (undefined: none, the server is asked). Only the refs
   * it pushes to: git sends the objects their ids do not reach, and the copy has those commits.
   */
  expectPush(refs: readonly KnownRef[] | undefined): void {
    this.pushRefs = refs;
  }

  /** The answer to git's request from what is kept, or undefined: the server is asked. */
  answer(req: IncomingMessage, path: string): Kept | undefined {
    if (this.capabilities && asksCapabilities(req, path)) return this.capabilities;
    const refs = this.pushRefs;
    if (!this.receivePack || !refs || refs.length === 0 || !asksPushAdvertisement(req, path))
      return undefined;
    this.pushRefs = undefined;
    const { headers, head, capabilities } = this.receivePack;
    const lines = refs.map(({ id, ref }, index) =>
      pktLine(index === 0 ? `${id} ${ref}\0${capabilities}\n` : `${id} ${ref}\n`),
    );
    const body = Buffer.concat([head, ...lines, Buffer.from('0000')]);
    return { headers: { ...headers, 'content-length': body.length }, body };
  }

  /** Whether the server's answer to this request is kept (the relay then reads it whole). */
  keeps(req: IncomingMessage, path: string): boolean {
    return asksCapabilities(req, path) || asksPushAdvertisement(req, path);
  }

  /** Keeps the server's answer (a 200) to a request `keeps` named, when it is what it should be. */
  keep(req: IncomingMessage, path: string, headers: OutgoingHttpHeaders, body: Buffer): void {
    if (headers['content-encoding'] !== undefined) return;
    const type = String(headers['content-type'] ?? '');
    if (asksCapabilities(req, path)) {
      if (type === 'application/x-git-upload-pack-advertisement' && isV2(body))
        this.capabilities = { headers: { ...headers, 'content-length': body.length }, body };
      return;
    }
    const parsed = type === RECEIVE_PACK_TYPE ? parseReceivePack(body) : undefined;
    if (parsed) this.receivePack = { headers, ...parsed };
  }
}

/**
 * The part of receive-pack's advertisement before its refs, and the capabilities its first ref
 * line carries after a NUL (protocol v0; `capabilities^{}` in a repository without refs);
 * undefined for anything else.
 */
export function parseReceivePack(body: Buffer): { head: Buffer; capabilities: string } | undefined {
  let offset = 0;
  for (;;) {
    const length = Number.parseInt(body.subarray(offset, offset + 4).toString('latin1'), 16);
    if (!Number.isInteger(length) || offset + Math.max(length, 4) > body.length) return undefined;
    if (length === 0) {
      offset += 4;
      continue;
    }
    if (length < 4) return undefined;
    const line = body.subarray(offset + 4, offset + length).toString('latin1');
    if (line.startsWith('# service=')) {
      offset += length;
      continue;
    }
    const match = /^[0-9a-f]{40,64} [^\0]+\0([^\0\n]*)\n?$/.exec(line);
    return match ? { head: body.subarray(0, offset), capabilities: match[1]! } : undefined;
  }
}

function pktLine(text: string): Buffer {
  const data = Buffer.from(text, 'utf8');
  return Buffer.concat([Buffer.from((data.length + 4).toString(16).padStart(4, '0')), data]);
}
