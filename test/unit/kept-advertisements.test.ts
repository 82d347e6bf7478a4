// receive-pack's advertisement, kept from the server's answer and rebuilt around the refs a push
// goes to: the server's own capabilities and framing, nothing else kept, and only the formats
// git's smart HTTP push reads (protocol v0).
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { KeptAdvertisements, parseReceivePack } from '../../src/transport/kept-advertisements.js';

const A = 'a'.repeat(40);
const B = 'b'.repeat(40);
const CAPABILITIES =
  'report-status delete-refs side-band-64k quiet atomic ofs-delta agent=git/2.39';
const SERVICE = '001f# service=git-receive-pack\n0000';

function pkt(text: string): string {
  return `${(Buffer.byteLength(text) + 4).toString(16).padStart(4, '0')}${text}`;
}

const advertisement = (head: string) =>
  Buffer.from(
    `${head}${pkt(`${A} refs/heads/master\0${CAPABILITIES}\n`)}${pkt(`${B} refs/tags/v1\n`)}0000`,
  );

const request = (method: string) => ({ method, headers: {} }) as IncomingMessage;
const PUSH_ADVERTISEMENT = '/locks.git/info/refs?service=git-receive-pack';
const HEADERS = { 'content-type': 'application/x-git-receive-pack-advertisement' };

describe('parseReceivePack', () => {
  it('keeps the service line and its flush, and the first ref line’s capabilities', () => {
    expect(parseReceivePack(advertisement(SERVICE))).toEqual({
      head: Buffer.from(SERVICE),
      capabilities: CAPABILITIES,
    });
  });

  it('reads a repository without refs (capabilities^{})', () => {
    const body = Buffer.from(`${SERVICE}${pkt(`${'0'.repeat(40)} capabilities^{}\0atomic\n`)}0000`);
    expect(parseReceivePack(body)?.capabilities).toBe('atomic');
  });

  it.each([
    [
      'protocol v1',
      `${SERVICE}${pkt('version 1\n')}${pkt(`${A} refs/heads/master\0atomic\n`)}0000`,
    ],
    ['no capabilities', `${SERVICE}${pkt(`${A} refs/heads/master\n`)}0000`],
    ['a cut-off body', `${SERVICE}00b3${A}`],
    ['not pkt-lines', '<html>sign in</html>'],
  ])('keeps nothing of %s', (_name, body) => {
    expect(parseReceivePack(Buffer.from(body))).toBeUndefined();
  });
});

describe('KeptAdvertisements', () => {
  it('answers the next push once, with the refs it goes to and the server’s capabilities', () => {
    const kept = new KeptAdvertisements();
    const get = request('GET');
    kept.expectPush([{ ref: 'refs/heads/lock-branch', id: B }]);
    // Nothing kept from the server yet: it is asked.
    expect(kept.answer(get, PUSH_ADVERTISEMENT)).toBeUndefined();
    expect(kept.keeps(get, PUSH_ADVERTISEMENT)).toBe(true);
    kept.keep(get, PUSH_ADVERTISEMENT, HEADERS, advertisement(SERVICE));
    kept.expectPush([
      { ref: 'refs/heads/lock-branch', id: B },
      { ref: 'refs/pool-resource/waiting/x/1-1-ab', id: A },
    ]);
    const answer = kept.answer(get, PUSH_ADVERTISEMENT);
    const body = `${SERVICE}${pkt(`${B} refs/heads/lock-branch\0${CAPABILITIES}\n`)}${pkt(`${A} refs/pool-resource/waiting/x/1-1-ab\n`)}0000`;
    expect(answer?.body.toString()).toBe(body);
    expect(answer?.headers).toEqual({ ...HEADERS, 'content-length': Buffer.byteLength(body) });
    expect(kept.answer(get, PUSH_ADVERTISEMENT)).toBeUndefined();
    // A fetch's advertisement and the push's own request are never answered from it.
    kept.expectPush([{ ref: 'refs/heads/lock-branch', id: B }]);
    expect(kept.answer(get, '/locks.git/info/refs?service=git-upload-pack')).toBeUndefined();
    expect(kept.answer(request('POST'), '/locks.git/git-receive-pack')).toBeUndefined();
  });

  it('keeps no compressed or mistyped answer', () => {
    const kept = new KeptAdvertisements();
    const get = request('GET');
    kept.keep(
      get,
      PUSH_ADVERTISEMENT,
      { ...HEADERS, 'content-encoding': 'gzip' },
      advertisement(SERVICE),
    );
    kept.keep(get, PUSH_ADVERTISEMENT, { 'content-type': 'text/plain' }, advertisement(SERVICE));
    kept.expectPush([{ ref: 'refs/heads/master', id: B }]);
    expect(kept.answer(get, PUSH_ADVERTISEMENT)).toBeUndefined();
  });
});
