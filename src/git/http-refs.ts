// Looking at an HTTP(S) lock repository's refs on the run's one kept connection. A put that waits
// polls the branch tip and the waiting line every few hundred milliseconds to seconds; a `git
// ls-remote` each time is a new process, and without the run's relay (transport/http-relay.ts) a
// new TCP (and TLS) connection. Here the run asks the server on the relay's connection at each
// poll: one request, answered by a fresh upload-pack on the server, so a release is seen at once
// (a long-lived upload-pack session would answer from refs it read once: git caches them).
//
// Over protocol v2 (every current git server) the request is an `ls-refs` for the branch and the
// pool's line only: the answer is a few lines however many other refs the repository holds (a
// hosted one advertises a pair per pull request; `git ls-remote` asks for all of them, patterns
// or not). A server that speaks only v0 answers with its whole ref advertisement, each time.
//
// Only where the run has a relay. Anything unexpected (a refused login, an answer that is not an
// advertisement, a certificate Node does not trust) ends the looks for the run; the caller asks
// git instead, which reports the problem in its own words.
//
// A tip a look saw move is fetched the same way: one v2 `fetch` request on the connection, its
// pack written by the run (session-pack.ts), where git's fetch starts four processes. A request
// that fails, or an answer the run cannot read, leaves that to git for the rest of the run.
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import { isV2 } from '../transport/http-messages.js';
import type { HttpRelay } from '../transport/http-relay.js';
import {
  lsRefsRequest,
  MAX_ANSWER_BYTES,
  objectFormat,
  parseAdvertisement,
  parseLsRefs,
  type AdvertisedRef,
} from './ls-refs.js';
import {
  PackRequests,
  packAnswerOf,
  packRequest,
  type PackSource,
  type ShallowPack,
} from './session-pack.js';

const ADVERTISEMENT = {
  path: '/info/refs?service=git-upload-pack',
  type: 'application/x-git-upload-pack-advertisement',
};
const UPLOAD_PACK = { path: '/git-upload-pack', type: 'application/x-git-upload-pack-result' };

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
 * The refs, asked again and again over the relay's connection. Once a request fails the looks
 * stay failed (`usable` false) and the caller asks git from then on.
 */
export class HttpRefs implements PackSource {
  private failed = false;
  private readonly packRequests = new PackRequests();
  /**
   * How the server is asked, known after the first look: `ls-refs` (protocol v2, in the
   * repository's object format) or the whole advertisement (v0).
   */
  private protocol: { version: 2; objectFormat?: string } | { version: 0 } | undefined;

  constructor(
    private readonly relay: HttpRelay,
    private readonly settings: HttpRefsSettings,
    private readonly signal: AbortSignal,
  ) {}

  readonly cheaperThanFetch = true;

  readonly packs: PackSource = this;

  get usable(): boolean {
    return !this.failed && !this.signal.aborted && this.relay.usable;
  }

  /** The pack of what `want` has beyond `haves`, one request (see PackRequests). */
  async pack(
    want: string,
    haves: readonly string[],
    signal?: AbortSignal,
  ): Promise<Buffer | undefined> {
    return (await this.askPack(packRequest(want, haves), signal))?.pack;
  }

  /** A copy's first commits, one request (see PackSource.firstPack). */
  firstPack(want: string, depth: number, signal?: AbortSignal): Promise<ShallowPack | undefined> {
    return this.askPack(packRequest(want, [], depth), signal);
  }

  /** listRefs, for a copy's first fetch: undefined where it fails (the looks end then too). */
  refs(prefixes: readonly string[]): Promise<AdvertisedRef[] | undefined> {
    return this.usable
      ? this.listRefs(prefixes).catch(() => undefined)
      : Promise.resolve(undefined);
  }

  private async askPack(request: Buffer, signal?: AbortSignal) {
    if (!this.usable) return undefined;
    return this.packRequests.ask(this.protocol, [signal, this.signal], async () =>
      packAnswerOf(await this.uploadPack(request, signal)),
    );
  }

  /** No more looks (the connection is the relay's: it closes with the run). */
  close(): void {
    this.failed = true;
  }

  /** The refs whose names start with one of `prefixes`. */
  async listRefs(prefixes: readonly string[]): Promise<AdvertisedRef[]> {
    if (!this.usable) throw new Error('the kept connection is closed');
    try {
      return await this.ask(prefixes);
    } catch (error) {
      this.close();
      throw error;
    }
  }

  private async ask(prefixes: readonly string[]): Promise<AdvertisedRef[]> {
    if (this.protocol === undefined) {
      // The capabilities git's first fetch asked (the relay keeps them), else asked here: a v2
      // server lists capabilities, a v0 one its refs.
      const first =
        this.relay.knownCapabilities ??
        (await this.request('GET', ADVERTISEMENT, { 'git-protocol': 'version=2' }));
      if (!isV2(first)) {
        this.protocol = { version: 0 };
        return advertised(first, prefixes);
      }
      const format = objectFormat(first);
      this.protocol = { version: 2, ...(format ? { objectFormat: format } : {}) };
    }
    if (this.protocol.version === 0)
      return advertised(await this.request('GET', ADVERTISEMENT), prefixes);
    // ls-refs answers only what the prefixes name.
    const refs = parseLsRefs(
      await this.uploadPack(lsRefsRequest(prefixes, this.protocol.objectFormat)),
    );
    if (!refs) throw new Error('not an ls-refs answer');
    return refs;
  }

  /** A protocol v2 command to upload-pack, one request on the kept connection. */
  private uploadPack(body: Buffer, signal?: AbortSignal): Promise<Buffer> {
    const headers = {
      'git-protocol': 'version=2',
      'content-type': 'application/x-git-upload-pack-request',
      accept: UPLOAD_PACK.type,
    };
    return this.request('POST', UPLOAD_PACK, headers, body, true, signal);
  }

  /**
   * One request on the kept connection, its answer whole when it is of `expected.type`.
   * `again`: whether a kept connection the server had closed meanwhile may be replaced for this
   * look (once); every look only reads.
   */
  private async request(
    method: 'GET' | 'POST',
    expected: { path: string; type: string },
    headers: OutgoingHttpHeaders = {},
    body?: Buffer,
    again = true,
    signal?: AbortSignal,
  ): Promise<Buffer> {
    const req = await this.relay.request(
      method,
      expected.path,
      {
        'user-agent': 'git/pool-resource',
        accept: '*/*',
        'cache-control': 'no-cache',
        ...headers,
        ...(body ? { 'content-length': body.length } : {}),
      },
      {
        signal: signal ? AbortSignal.any([this.signal, signal]) : this.signal,
        timeout: this.settings.gitTimeoutMs,
      },
    );
    return new Promise((resolve, reject) => {
      let answered = false;
      req.on('response', (res: IncomingMessage) => {
        answered = true;
        const type = res.headers['content-type'] ?? '';
        if (res.statusCode !== 200 || type !== expected.type) {
          res.resume();
          reject(new Error(`HTTP ${res.statusCode ?? '?'} (${type})`));
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_ANSWER_BYTES) req.destroy(new Error('answer too large'));
          else chunks.push(chunk);
        });
        res.on('end', () => resolve(Buffer.concat(chunks)));
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error('timed out')));
      req.on('error', (error) => {
        if (again && !answered && req.reusedSocket && this.usable)
          this.request(method, expected, headers, body, false, signal).then(resolve, reject);
        else reject(error);
      });
      req.end(body);
    });
  }
}

/**
 * The refs of a v0 advertisement (every ref the server has) under `prefixes`, or the error of an
 * answer that is none.
 */
function advertised(body: Buffer, prefixes: readonly string[]): AdvertisedRef[] {
  const refs = parseAdvertisement(body);
  if (!refs) throw new Error('not a smart-HTTP ref advertisement');
  return refs.filter(({ ref }) => prefixes.some((prefix) => ref.startsWith(prefix)));
}
