// Looking at an HTTP(S) lock repository's refs on the run's one kept connection. A put that waits
// polls the branch tip and the waiting line every few hundred milliseconds to seconds; a `git
// ls-remote` each time is a new process, and without the run's relay (transport/http-relay.ts) a
// new TCP (and TLS) connection. Here the run asks the smart-HTTP ref advertisement on the relay's
// connection to the server at each poll: one request, answered by a fresh upload-pack on the
// server, so a release is seen at once (a long-lived upload-pack session would answer from refs
// it read once: git caches them).
//
// Only where the run has a relay. Anything unexpected (a refused login, an answer that is not an
// advertisement, a certificate Node does not trust) ends the looks for the run; the caller asks
// git instead, which reports the problem in its own words.
import type { IncomingMessage } from 'node:http';
import type { HttpRelay } from '../transport/http-relay.js';

export interface AdvertisedRef {
  id: string;
  ref: string;
}

/** The ref advertisement of a lock repository is a few lines; anything this big is not one. */
const MAX_ADVERTISEMENT_BYTES = 16 * 1024 * 1024;

/** The refs of a smart-HTTP `info/refs?service=git-upload-pack` answer (protocol v0). */
export function parseAdvertisement(body: Buffer): AdvertisedRef[] | undefined {
  const refs: AdvertisedRef[] = [];
  let offset = 0;
  let sawService = false;
  while (offset + 4 <= body.length) {
    const header = body.subarray(offset, offset + 4).toString('latin1');
    if (!/^[0-9a-f]{4}$/.test(header)) return undefined;
    const length = Number.parseInt(header, 16);
    if (length === 0) {
      offset += 4;
      continue;
    }
    if (length < 4 || offset + length > body.length) return undefined;
    const line = body
      .subarray(offset + 4, offset + length)
      .toString('utf8')
      .replace(/\n$/, '');
    offset += length;
    if (!sawService) {
      if (line !== '# service=git-upload-pack') return undefined;
      sawService = true;
      continue;
    }
    const match = /^([0-9a-f]{40}|[0-9a-f]{64}) ([^\0 ]+)/.exec(line);
    if (!match) return undefined;
    // An empty repository advertises only its capabilities, on a line of zeros.
    if (!/^0+$/.test(match[1]!)) refs.push({ id: match[1]!, ref: match[2]! });
  }
  return sawService && offset === body.length ? refs : undefined;
}

export interface HttpRefsSettings {
  gitTimeoutMs: number;
}

/** Looks at the refs for a run that has a relay; undefined otherwise (git is asked). */
export function httpRefsFor(
  relay: HttpRelay | undefined,
  settings: HttpRefsSettings,
  signal: AbortSignal,
): HttpRefs | undefined {
  return relay ? new HttpRefs(relay, settings, signal) : undefined;
}

/**
 * The ref advertisement, asked again and again over the relay's connection. Once a request fails
 * the looks stay failed (`usable` false) and the caller asks git from then on.
 */
export class HttpRefs {
  private failed = false;

  constructor(
    private readonly relay: HttpRelay,
    private readonly settings: HttpRefsSettings,
    private readonly signal: AbortSignal,
  ) {}

  get usable(): boolean {
    return !this.failed && !this.signal.aborted && this.relay.usable;
  }

  /** No more looks (the connection is the relay's: it closes with the run). */
  close(): void {
    this.failed = true;
  }

  /** Every ref the server advertises (a lock repository has a handful). */
  async listRefs(): Promise<AdvertisedRef[]> {
    if (!this.usable) throw new Error('the kept connection is closed');
    try {
      const body = await this.get();
      const refs = parseAdvertisement(body);
      if (!refs) throw new Error('not a smart-HTTP ref advertisement');
      return refs;
    } catch (error) {
      this.close();
      throw error;
    }
  }

  /**
   * `again`: whether a kept connection the server had closed meanwhile may be replaced for this
   * look (once).
   */
  private async get(again = true): Promise<Buffer> {
    const req = await this.relay.request(
      '/info/refs?service=git-upload-pack',
      { 'user-agent': 'git/pool-resource', accept: '*/*', 'cache-control': 'no-cache' },
      { signal: this.signal, timeout: this.settings.gitTimeoutMs },
    );
    return new Promise((resolve, reject) => {
      let answered = false;
      req.on('response', (res: IncomingMessage) => {
        answered = true;
        const type = res.headers['content-type'] ?? '';
        if (res.statusCode !== 200 || type !== 'application/x-git-upload-pack-advertisement') {
          res.resume();
          reject(new Error(`HTTP ${res.statusCode ?? '?'} (${type})`));
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_ADVERTISEMENT_BYTES) req.destroy(new Error('advertisement too large'));
          else chunks.push(chunk);
        });
        res.on('end', () => resolve(Buffer.concat(chunks)));
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error('timed out')));
      req.on('error', (error) => {
        if (again && !answered && req.reusedSocket && this.usable)
          this.get(false).then(resolve, reject);
        else reject(error);
      });
      req.end();
    });
  }
}
