// The wire between git's SSH program and the run's shared SSH connection (ssh-mux.ts), over a
// Unix socket. The program sends one header line (JSON: git's arguments and the variables git
// asked to forward), then git's stdin as raw bytes, ending its half of the socket at git's EOF.
// The run answers in frames, since three things share its half: the remote command's stdout,
// its stderr, and finally its exit status.

export const FRAME_STDOUT = 1;
export const FRAME_STDERR = 2;
/** Payload: one byte, the exit status. Always the last frame. */
export const FRAME_EXIT = 3;

export type FrameType = typeof FRAME_STDOUT | typeof FRAME_STDERR | typeof FRAME_EXIT;

export interface Frame {
  type: FrameType;
  payload: Buffer;
}

export interface MuxRequest {
  /** git's arguments to its SSH command, as it gave them. */
  args: string[];
  /** Values of the variables git asked to forward (`-o SendEnv=GIT_PROTOCOL`). */
  env: Record<string, string>;
}

/** Longest header line accepted: git's arguments are a host, a port and a quoted path. */
export const MAX_HEADER_BYTES = 64 * 1024;
const HEADER_SIZE = 5;

export function encodeFrame(type: FrameType, payload: Buffer): Buffer {
  const header = Buffer.alloc(HEADER_SIZE);
  header.writeUInt8(type, 0);
  header.writeUInt32BE(payload.length, 1);
  return Buffer.concat([header, payload]);
}

export function encodeRequest(request: MuxRequest): Buffer {
  return Buffer.from(`${JSON.stringify(request)}\n`);
}

/** The request in a header line, or why it is not one. */
export function decodeRequest(line: string): MuxRequest | { problem: string } {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return { problem: 'malformed request' };
  }
  const { args, env } = (value ?? {}) as Partial<Record<keyof MuxRequest, unknown>>;
  const strings = (items: unknown[]) => items.every((item) => typeof item === 'string');
  if (!Array.isArray(args) || !strings(args)) return { problem: 'malformed request' };
  if (typeof env !== 'object' || env === null || !strings(Object.values(env)))
    return { problem: 'malformed request' };
  return { args: args as string[], env: env as Record<string, string> };
}

/** Cuts a byte stream back into the frames `encodeFrame` made, however it was split. */
export class FrameDecoder {
  private pending: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): Frame[] {
    this.pending = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    const frames: Frame[] = [];
    while (this.pending.length >= HEADER_SIZE) {
      const type = this.pending.readUInt8(0);
      const length = this.pending.readUInt32BE(1);
      if (type !== FRAME_STDOUT && type !== FRAME_STDERR && type !== FRAME_EXIT)
        throw new Error(`unknown frame type ${type}`);
      if (this.pending.length < HEADER_SIZE + length) break;
      frames.push({ type, payload: this.pending.subarray(HEADER_SIZE, HEADER_SIZE + length) });
      this.pending = this.pending.subarray(HEADER_SIZE + length);
    }
    return frames;
  }

  /** Bytes of a frame not yet complete: non-zero at the end of the stream means it was cut. */
  get buffered(): number {
    return this.pending.length;
  }
}
