// A protocol v2 `fetch` the run asks itself, on its kept git:// session (daemon-session.ts), as
// one request on the kept HTTP(S) connection (http-refs.ts) or as an upload-pack on the shared SSH
// connection (session-refs.ts): the objects one commit has beyond the copy's tip, or (git:// and
// HTTP(S)) a copy's first commits, as a pack (pack-objects.ts writes its objects). git's own
// fetch of the same starts four processes (fetch or clone, its remote helper, unpack-objects or
// index-pack, and the rev-list of its connectivity check); a put waiting in line fetches at every
// move, and every run fetches once.
import { isFlush, packetText, packets, pktLine, type AdvertisedRef } from './ls-refs.js';

/** Where the run asks for a commit's pack itself. */
export interface PackSource {
  /** False once it cannot ask any more (git fetches then). */
  readonly usable: boolean;
  /**
   * The pack of what commit `want` has beyond `haves` (a SHA-1 repository's), or undefined where
   * it cannot be had so (git fetches then).
   */
  pack(want: string, haves: readonly string[], signal?: AbortSignal): Promise<Buffer | undefined>;
  /**
   * The refs under `prefixes` as the server has them now, for a copy's first fetch; undefined
   * where they cannot be had so (git fetches then). None over SSH: each question there is an
   * upload-pack of its own on the server, so the refs and then the pack would cost it two where
   * git's fetch costs one (git://'s session and HTTP(S)'s requests cost the server what git's do).
   */
  refs?(prefixes: readonly string[], signal?: AbortSignal): Promise<AdvertisedRef[] | undefined>;
  /**
   * The pack of commit `want` and the `depth` commits from it, and the commits whose parents it
   * cut off (a copy's first fetch); undefined where it cannot be had so (git fetches then).
   */
  firstPack?(want: string, depth: number, signal?: AbortSignal): Promise<ShallowPack | undefined>;
}

/**
 * The run's own pack requests on a kept connection (HTTP(S) or SSH): only to a server that has
 * answered in protocol v2 and SHA-1 (pack-objects.ts reads those alone), and only until one
 * failed for any reason but a stop, after which git fetches for the rest of the run (and
 * reports, in its own words, whatever stood in the way).
 */
export class PackRequests {
  private failed = false;

  /**
   * `send`'s pack where `speaks` (protocol v2, SHA-1) and no request failed yet; undefined
   * otherwise. `stops`: the signals whose abort is a stop, not a failure.
   */
  async ask<T>(
    speaks: { version?: number | undefined; objectFormat?: string | undefined } | undefined,
    stops: readonly (AbortSignal | undefined)[],
    send: () => Promise<T>,
  ): Promise<T | undefined> {
    if (this.failed || speaks?.version !== 2) return undefined;
    if ((speaks.objectFormat ?? 'sha1') !== 'sha1') return undefined;
    try {
      return await send();
    } catch {
      // Stopped: the caller sees its own signal.
      if (!stops.some((signal) => signal?.aborted)) this.failed = true;
      return undefined;
    }
  }
}

/**
 * The request for the objects of `want` that `haves` lack (a SHA-1 repository's): one pack, no
 * progress, no delta on an object outside it (pack-objects.ts reads the pack alone). With
 * `depth`, only that many commits from `want` (a copy's first fetch: the answer names the
 * commits whose parents it cut off, packAnswerOf).
 */
export function packRequest(want: string, haves: readonly string[], depth?: number): Buffer {
  return Buffer.concat([
    pktLine('command=fetch\n'),
    Buffer.from('0001'),
    pktLine('no-progress\n'),
    pktLine('ofs-delta\n'),
    ...(depth === undefined ? [] : [pktLine(`deepen ${depth}\n`)]),
    pktLine(`want ${want}\n`),
    ...haves.map((have) => pktLine(`have ${have}\n`)),
    pktLine('done\n'),
    Buffer.from('0000'),
  ]);
}

/** A pack with the commits whose parents its fetch cut off (a fetch with a depth). */
export interface ShallowPack {
  pack: Buffer;
  shallow: string[];
}

/**
 * The pack in the answer to packRequest (its `packfile` section, side band 1), up to the flush
 * that ends it, and the `shallow` lines of the `shallow-info` section a depth asked before it.
 * Throws on anything else: another section (the server asks something), a message on side band 3
 * (its error), or no pack at all.
 */
export function packAnswerOf(answer: Buffer): ShallowPack {
  const parts: Buffer[] = [];
  const shallow: string[] = [];
  let section: string | undefined;
  for (const packet of packets(answer)) {
    if (isFlush(packet)) break;
    if (section === undefined) {
      section = packetText(packet);
      if (section !== 'packfile' && section !== 'shallow-info')
        throw new Error(`a fetch answered with "${section}"`);
      continue;
    }
    if (section === 'shallow-info') {
      if (isDelimiter(packet)) section = undefined;
      else shallow.push(shallowLine(packetText(packet)));
      continue;
    }
    const band = packet[4];
    if (band === 1) parts.push(packet.subarray(5));
    else if (band === 3) throw new Error(`the server: ${packet.subarray(5).toString('utf8')}`);
    else if (band !== 2) throw new Error('a fetch answered outside its side bands');
  }
  const pack = Buffer.concat(parts);
  if (pack.subarray(0, 4).toString('latin1') !== 'PACK') throw new Error('a fetch sent no pack');
  return { pack, shallow };
}

/** The pack in the answer to packRequest: see packAnswerOf. */
export function packOf(answer: Buffer): Buffer {
  return packAnswerOf(answer).pack;
}

function isDelimiter(packet: Buffer): boolean {
  return packet.length === 4 && packet.toString('latin1') === '0001';
}

/**
 * The commit of a `shallow <id>` line; throws on `unshallow` (a first fetch has nothing to
 * deepen) or anything else.
 */
function shallowLine(line: string): string {
  const match = /^shallow ([0-9a-f]{40})$/.exec(line);
  if (!match) throw new Error(`a fetch answered "${line}" about its depth`);
  return match[1]!;
}

/**
 * The pack in what an upload-pack session wrote whole (over SSH: its protocol v2 capabilities, a
 * flush, then the answer packOf reads).
 */
export function sessionPackOf(output: Buffer): Buffer {
  for (const packet of packets(output))
    if (isFlush(packet))
      return packOf(output.subarray(packet.byteOffset - output.byteOffset + packet.length));
  throw new Error('an upload-pack that listed no capabilities');
}
