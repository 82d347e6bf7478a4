// Looking at an HTTP(S) lock repository's refs on one kept connection. A put that waits polls the
// branch tip and the waiting line every few hundred milliseconds to seconds; each `git ls-remote`
// or fetch is a new process and a new TCP (and TLS) connection, which the server pays for. Here
// the run keeps one connection (HTTP keep-alive) and asks the smart-HTTP ref advertisement on it
// at each poll: one request, answered by a fresh upload-pack on the server, so a release is seen
// at once (a long-lived upload-pack session would answer from refs it read once: git caches
// them).
//
// Only where git itself would connect straight to the server with nothing but basic auth: no
// proxy, no `http.*` or `url.*` setting. Anything unexpected (a redirect, a refused login, a
// certificate Node does not trust) ends the session for the run; the caller asks git instead,
// which reports the problem in its own words.
import type { Agent, IncomingMessage } from 'node:http';

export interface AdvertisedRef {
  id: string;
  ref: string;
}

/** The ref advertisement of a lock repository is a few lines; anything this big is not one. */
const MAX_ADVERTISEMENT_BYTES = 16 * 1024 * 1024;

/** Environment variables that send git (curl) through a proxy: then git connects, not us. */
const PROXY_VARIABLES = ['http_proxy', 'https_proxy', 'all_proxy'];

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
  uri: string;
  username?: string;
  password?: string;
  skipSslVerification: boolean;
  gitConfig: readonly { name: string }[];
  gitTimeoutMs: number;
}

/**
 * A kept connection for a run's looks at `settings.uri`, when it is HTTP(S) and git would
 * connect straight to it; undefined otherwise.
 */
export function httpRefsFor(
  settings: HttpRefsSettings,
  env: Readonly<Record<string, string | undefined>>,
  signal: AbortSignal,
): HttpRefs | undefined {
  let url: URL;
  try {
    url = new URL(settings.uri);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  if (url.username || url.password || url.search || url.hash) return undefined;
  if (settings.gitConfig.some(({ name }) => /^(http|url)\./i.test(name))) return undefined;
  const proxied = Object.keys(env).some(
    (key) => PROXY_VARIABLES.includes(key.toLowerCase()) && env[key],
  );
  if (proxied) return undefined;
  return new HttpRefs(url, settings, signal);
}

/**
 * The ref advertisement, asked again and again over one kept connection. Once a request fails
 * the session stays failed (`usable` false) and the caller asks git from then on.
 */
export class HttpRefs {
  /**
   * Node's HTTP(S) client and the kept connection's agent, from the first look on: loading
   * node:https (and with it node:tls) costs every run's start a few milliseconds, and a put that
   * takes a lock at once never looks.
   */
  private client:
    Promise<{ agent: Agent; request: typeof import('node:http').request }> | undefined;
  private failed = false;

  constructor(
    private readonly url: URL,
    private readonly settings: HttpRefsSettings,
    private readonly signal: AbortSignal,
  ) {
    signal.addEventListener('abort', () => this.close(), { once: true });
  }

  private connect() {
    this.client ??= (async () => {
      const options = { keepAlive: true, maxSockets: 1 };
      if (this.url.protocol !== 'https:') {
        const http = await import('node:http');
        return { agent: new http.Agent(options), request: http.request };
      }
      const https = await import('node:https');
      const agent = new https.Agent({
        ...options,
        rejectUnauthorized: !this.settings.skipSslVerification,
      });
      return { agent, request: https.request };
    })();
    return this.client;
  }

  get usable(): boolean {
    return !this.failed && !this.signal.aborted;
  }

  close(): void {
    this.failed = true;
    this.client?.then(
      ({ agent }) => agent.destroy(),
      () => undefined,
    );
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

  private async get(): Promise<Buffer> {
    const { agent, request } = await this.connect();
    // Closed while Node's client loaded: no request may start on a destroyed agent.
    if (!this.usable) throw new Error('the kept connection is closed');
    const path = `${this.url.pathname.replace(/\/+$/, '')}/info/refs?service=git-upload-pack`;
    const headers: Record<string, string> = {
      'User-Agent': 'git/pool-resource',
      Accept: '*/*',
      'Cache-Control': 'no-cache',
    };
    const { username, password } = this.settings;
    if (username !== undefined || password !== undefined)
      headers.Authorization = `Basic ${Buffer.from(`${username ?? ''}:${password ?? ''}`).toString('base64')}`;
    return new Promise((resolve, reject) => {
      const req = request(
        {
          protocol: this.url.protocol,
          hostname: this.url.hostname.replace(/^\[|\]$/g, ''),
          port: this.url.port || undefined,
          path,
          method: 'GET',
          headers,
          agent,
          signal: this.signal,
          timeout: this.settings.gitTimeoutMs,
        },
        (res: IncomingMessage) => {
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
        },
      );
      req.on('timeout', () => req.destroy(new Error('timed out')));
      req.on('error', reject);
      req.end();
    });
  }
}
