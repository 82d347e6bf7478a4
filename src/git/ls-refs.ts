// The pkt-line messages of git's wire protocol that the run's own looks at the refs read and
// write (http-refs.ts, ssh-refs.ts): protocol v2's `ls-refs` with ref prefixes, and v0's ref
// advertisement for servers that speak nothing newer.

/** The refs a lock repository answers are a few lines; an answer this big is not one. */
export const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

export interface AdvertisedRef {
  id: string;
  ref: string;
}

/**
 * Splits pkt-lines into their texts, a flush as null; undefined unless `body` is whole pkt-lines.
 * `toFlush`: only up to the first flush (included), whatever follows it.
 */
function pktLines(body: Buffer, toFlush = false): (string | null)[] | undefined {
  const lines: (string | null)[] = [];
  let offset = 0;
  try {
    for (const packet of packets(body)) {
      offset += packet.length;
      if (isFlush(packet)) {
        lines.push(null);
        if (toFlush) return lines;
      } else if (packet.toString('latin1', 0, 4) < '0004') {
        // A delimiter or response end: not in the answers read here.
        return undefined;
      } else lines.push(packetText(packet));
    }
  } catch {
    return undefined;
  }
  return offset === body.length && !toFlush ? lines : undefined;
}

/** The whole packets at the start of `data`; throws on bytes that are no pkt-line header. */
export function* packets(data: Buffer): Generator<Buffer> {
  let offset = 0;
  while (offset + 4 <= data.length) {
    const header = data.subarray(offset, offset + 4).toString('latin1');
    if (!/^[0-9a-f]{4}$/.test(header)) throw new Error('not a pkt-line');
    const length = Number.parseInt(header, 16);
    // 0000 flush, 0001 delimiter, 0002 response end: a header alone.
    const size = length < 4 ? 4 : length;
    if (length === 3) throw new Error('not a pkt-line');
    if (offset + size > data.length) return;
    yield data.subarray(offset, offset + size);
    offset += size;
  }
}

export function isFlush(packet: Buffer): boolean {
  return packet.length === 4 && packet.toString('latin1') === '0000';
}

/** A packet's text, without its header and final newline. */
export function packetText(packet: Buffer): string {
  return packet.subarray(4).toString('utf8').replace(/\n$/, '');
}

/** One pkt-line of `text`. */
export function pktLine(text: string): Buffer {
  const data = Buffer.from(text, 'utf8');
  return Buffer.concat([Buffer.from((data.length + 4).toString(16).padStart(4, '0')), data]);
}

/** The refs of a protocol v2 `ls-refs` answer: `<id> <ref>[ attribute]…` lines, then a flush. */
export function parseLsRefs(body: Buffer): AdvertisedRef[] | undefined {
  const lines = pktLines(body);
  return lines && lsRefsAnswer(lines);
}

function lsRefsAnswer(lines: readonly (string | null)[]): AdvertisedRef[] | undefined {
  if (lines.at(-1) !== null || lines.indexOf(null) !== lines.length - 1) return undefined;
  const refs: AdvertisedRef[] = [];
  for (const line of lines.slice(0, -1)) {
    const match = /^([0-9a-f]{40}|[0-9a-f]{64}) ([^ ]+)(?: |$)/.exec(line!);
    if (!match) return undefined;
    refs.push({ id: match[1]!, ref: match[2]! });
  }
  return refs;
}

/**
 * What upload-pack answers on a connection of its own (SSH) to an ls-refs request sent at once:
 * v2's capabilities and a flush, then the ls-refs answer; or, from a server that speaks only v0
 * (one that does not take GIT_PROTOCOL), its ref advertisement up to its flush.
 */
export function parseSessionAnswer(
  body: Buffer,
): { version: 0 | 2; refs: AdvertisedRef[] } | undefined {
  // Up to the first flush: v2's capabilities, or v0's whole advertisement (whatever follows it
  // is about our request, which a v0 server does not understand).
  const head = pktLines(body, true);
  if (!head) return undefined;
  if (head[0] === 'version 2') {
    const refs = lsRefsAnswer(pktLines(body)?.slice(head.length) ?? []);
    return refs && { version: 2, refs };
  }
  const refs = advertisedRefs(head.slice(0, -1) as string[]);
  return refs && { version: 0, refs };
}

/**
 * The `ls-refs` request for the refs under `prefixes`, in the repository's object format;
 * `symrefs`: a symbolic ref (HEAD) says which ref it names.
 */
export function lsRefsRequest(
  prefixes: readonly string[],
  objectFormat: string | undefined,
  options: { symrefs?: boolean } = {},
): Buffer {
  return Buffer.concat([
    pktLine('command=ls-refs\n'),
    ...(objectFormat ? [pktLine(`object-format=${objectFormat}\n`)] : []),
    Buffer.from('0001'),
    ...(options.symrefs ? [pktLine('symrefs\n')] : []),
    ...prefixes.map((prefix) => pktLine(`ref-prefix ${prefix}\n`)),
    Buffer.from('0000'),
  ]);
}

/** The object format a v2 capability advertisement names (sha1 when it names none). */
export function objectFormat(capabilities: Buffer): string | undefined {
  for (const line of pktLines(capabilities) ?? [])
    if (line?.startsWith('object-format=')) return line.slice('object-format='.length);
  return undefined;
}

/** The refs of a smart-HTTP `info/refs?service=git-upload-pack` answer (protocol v0). */
export function parseAdvertisement(body: Buffer): AdvertisedRef[] | undefined {
  const lines = pktLines(body)?.filter((line): line is string => line !== null);
  if (lines?.[0] !== '# service=git-upload-pack') return undefined;
  return advertisedRefs(lines.slice(1));
}

/** The refs of v0 advertisement lines (`<id> <ref>`, the first with capabilities after a NUL). */
export function advertisedRefs(lines: readonly string[]): AdvertisedRef[] | undefined {
  const refs: AdvertisedRef[] = [];
  for (const line of lines) {
    const match = /^([0-9a-f]{40}|[0-9a-f]{64}) ([^\0 ]+)/.exec(line);
    if (!match) return undefined;
    // An empty repository advertises only its capabilities, on a line of zeros.
    if (!/^0+$/.test(match[1]!)) refs.push({ id: match[1]!, ref: match[2]! });
  }
  return refs;
}
