// The wire between git's SSH program and the run's shared connection: frames survive any split
// of the byte stream, and a request line is read back exactly or refused.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeRequest,
  encodeFrame,
  encodeRequest,
  FRAME_EXIT,
  FRAME_STDERR,
  FRAME_STDOUT,
  FrameDecoder,
  type Frame,
} from '../../src/transport/mux-frames.js';

const frame = fc.record({
  type: fc.constantFrom(FRAME_STDOUT, FRAME_STDERR, FRAME_EXIT),
  payload: fc.uint8Array({ maxLength: 300 }).map((bytes) => Buffer.from(bytes)),
});

/** `bytes` cut at the given offsets. */
function split(bytes: Buffer, cuts: number[]): Buffer[] {
  const offsets = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b);
  const pieces: Buffer[] = [];
  let from = 0;
  for (const offset of [...offsets, bytes.length]) {
    pieces.push(bytes.subarray(from, offset));
    from = offset;
  }
  return pieces;
}

describe('frames', () => {
  it('come back as they were sent, however the stream is split', () => {
    fc.assert(
      fc.property(fc.array(frame, { maxLength: 20 }), fc.array(fc.nat()), (frames, cuts) => {
        const stream = Buffer.concat(frames.map((f) => encodeFrame(f.type, f.payload)));
        const decoder = new FrameDecoder();
        const received: Frame[] = split(stream, cuts).flatMap((piece) => decoder.push(piece));
        expect(received).toEqual(frames);
        expect(decoder.buffered).toBe(0);
      }),
    );
  });

  it('a stream cut inside a frame leaves bytes buffered, not a frame', () => {
    const bytes = encodeFrame(FRAME_STDOUT, Buffer.from('0008done'));
    const decoder = new FrameDecoder();
    expect(decoder.push(bytes.subarray(0, bytes.length - 1))).toEqual([]);
    expect(decoder.buffered).toBe(bytes.length - 1);
  });

  it('an unknown frame type is an error, not data', () => {
    expect(() => new FrameDecoder().push(Buffer.from([9, 0, 0, 0, 0]))).toThrow(/frame type 9/);
  });
});

describe('request line', () => {
  it('reads back what was written, quotes and newlines in arguments included', () => {
    const request = {
      args: ['-o', 'SendEnv=GIT_PROTOCOL', '-p', '2222', 'git@host', "git-upload-pack 'a\nb'"],
      env: { GIT_PROTOCOL: 'version=2' },
    };
    const line = encodeRequest(request).toString('utf8');
    expect(line.indexOf('\n')).toBe(line.length - 1);
    expect(decodeRequest(line.slice(0, -1))).toEqual(request);
  });

  it.each([
    ['not JSON', 'git@host'],
    ['no arguments', '{"env":{}}'],
    ['an argument that is not text', '{"args":[1],"env":{}}'],
    ['a variable that is not text', '{"args":["h","c"],"env":{"A":1}}'],
    ['null', 'null'],
  ])('refuses %s', (_what, line) => {
    expect(decodeRequest(line)).toEqual({ problem: 'malformed request' });
  });
});
