// One connection per run to an HTTP(S) lock repository, as the SSH transport keeps one login per
// run (ssh-mux.ts). git (libcurl) opens a TCP connection, and over HTTPS a TLS handshake, for each
// command: an acquire's fetch and its push, every fetch while a put waits. Here a
// url.<base>.insteadOf sends git's requests for the lock repository to a relay on 127.0.0.1 in
// this process, which forwards each of them over one kept connection to the server (HTTP
// keep-alive); the kept looks at the refs (git/http-refs.ts) share that connection.
//
// Only where git would connect to the server with nothing but basic auth, straight or through an
// HTTP proxy (`relayRoute`); through a proxy, the one connection is a CONNECT tunnel for https and
// the proxy's own for http, as libcurl uses them.
// The relay sends the request's credentials with what it forwards, so it answers only requests
// that carry a random token of the run's, in a header git is told to send by its environment:
// the relay's address is in git's command lines, which any local user can read; the environment,
// like the password already there, is the run's own.
//
// A connection to the server that cannot be made (refused, a certificate that git would not trust
// either: http-trust.ts, …) or an answer the relay does not pass on (a redirect) turns the relay
// off for the run: git then connects on its own, and the command that met it runs again that way
// (git/git.ts), so whatever stands in the way is reported in git's own words.
import { isAbsolute } from 'node:path';
import { basicCredentials } from '../base/basic-auth.js';
import { nodeCrypto, nodeHttp } from '../base/lazy-builtins.js';
import type {
  Agent,
  ClientRequest,
  IncomingMessage,
  OutgoingHttpHeaders,
  Server,
  ServerResponse,
} from 'node:http';
import {
  RELAY_TOKEN_HEADER,
  changesRefs,
  readBody,
  reply,
  requestHeaders,
  responseHeaders,
  speaksNoHttp,
} from './http-messages.js';
import { proxyRoute, tunnelThrough, type HttpProxy } from './http-proxy.js';
import { caInfoOf, isCaInfo, trustedAuthorities } from './http-trust.js';
import { KeptAdvertisements, type KnownRef } from './kept-advertisements.js';

export interface HttpRelaySettings {
  uri: string;
  username?: string;
  password?: string;
  skipSslVerification: boolean;
  gitConfig: readonly { name: string; value: string }[];
}

/** The server's side of the relay: Node's client and the agent that keeps the connection. */
export interface Upstream {
  agent: Agent;
  request: typeof import('node:http').request;
}

/** Where the relay forwards to: the lock repository, and the HTTP proxy on the way if any. */
export interface RelayRoute {
  url: URL;
  proxy?: HttpProxy;
}

/**
 * The lock repository's URL, and the proxy git would take to it (http-proxy.ts), when git would
 * connect to it over HTTP(S) with nothing but basic auth: no `http.*` or `url.*` in git_config but
 * `http.proxy` and an `http.sslCAInfo` with a whole path, no user or query in the URI (request.ts
 * moves credentials out of it), no proxy but a plain HTTP one. Undefined otherwise, and git
 * connects on its own.
 */
export function relayRoute(
  settings: HttpRelaySettings,
  env: Readonly<Record<string, string | undefined>>,
): RelayRoute | undefined {
  let url: URL;
  try {
    url = new URL(settings.uri);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  if (url.username || url.password || url.search || url.hash) return undefined;
  const proxySettings = settings.gitConfig.filter(({ name }) => /^http\.proxy$/i.test(name));
  // The relay reads an http.sslCAInfo itself (http-trust.ts), given as a whole path.
  const caInfo = caInfoOf(settings.gitConfig);
  if (caInfo !== undefined && !isAbsolute(caInfo)) return undefined;
  const others = settings.gitConfig.filter(
    (entry) => !proxySettings.includes(entry) && !isCaInfo(entry.name),
  );
  if (others.some(({ name }) => /^(http|url)\./i.test(name))) return undefined;
  // The last one, as git reads them.
  const proxy = proxyRoute(url, env, proxySettings.at(-1)?.value);
  if (proxy === 'unusable') return undefined;
  return proxy === 'direct' ? { url } : { url, proxy };
}

/** A relay listening on 127.0.0.1, or undefined where git should connect on its own. */
export async function startHttpRelay(
  settings: HttpRelaySettings,
  env: Readonly<Record<string, string | undefined>>,
): Promise<HttpRelay | undefined> {
  const route = relayRoute(settings, env);
  if (!route) return undefined;
  const { createServer } = nodeHttp();
  const server = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
  } catch {
    return undefined;
  }
  // Never what keeps the process alive: a run ends when its work does.
  server.unref();
  const { port } = server.address() as import('node:net').AddressInfo;
  const relay = new HttpRelay(route, settings, server, port);
  server.on('request', (req: IncomingMessage, res: ServerResponse) => relay.handle(req, res));
  return relay;
}

export class HttpRelay {
  private failure: unknown;
  private client: Promise<Upstream> | undefined;
  /** The relay's address for git. */
  private readonly base: string;
  /** What a request must carry in RELAY_TOKEN_HEADER to be forwarded. */
  private readonly token = nodeCrypto().randomBytes(16).toString('hex');
  /** What the relay answers git with itself (a request to the server and a round trip fewer). */
  private readonly kept = new KeptAdvertisements();
  /** Aborted by `close`: a tunnel still being opened through the proxy gives up. */
  private readonly closing = new AbortController();
  /** The lock repository, as the request names it. */
  readonly url: URL;
  private readonly proxy: HttpProxy | undefined;

  constructor(
    route: RelayRoute,
    private readonly settings: HttpRelaySettings,
    private readonly server: Server,
    private readonly port: number,
  ) {
    this.url = route.url;
    this.proxy = route.proxy;
    this.base = `http://127.0.0.1:${port}/relay`;
  }

  /** Whether git still goes through the relay: false for the rest of the run once it failed. */
  get usable(): boolean {
    return this.failure === undefined;
  }

  /**
   * The settings that send git's requests for the lock repository to the relay, with the token,
   * and past any proxy in git's environment (an empty proxy is none, even against the variables).
   */
  get config(): readonly (readonly [string, string])[] {
    return [
      [`url.${this.base}.insteadOf`, this.settings.uri],
      [`http.${this.base}.extraHeader`, `${RELAY_TOKEN_HEADER}: ${this.token}`],
      [`http.${this.base}.proxy`, ''],
    ];
  }

  /** `text` (git's words) with the relay's address put back to the lock repository's. */
  unrelay(text: string): string {
    return text
      .replaceAll(this.base, this.settings.uri.replace(/\/+$/, ''))
      .replaceAll(`http://127.0.0.1:${this.port}`, this.url.origin);
  }

  /** Node's client for the server, and the agent that keeps one connection to it. */
  upstream(): Promise<Upstream> {
    this.client ??= (async () => {
      // One connection: git's requests take turns on it (each is answered in full before the
      // next), as do the looks at the refs.
      const options = { keepAlive: true, maxSockets: 1 };
      if (this.url.protocol !== 'https:') {
        // Through a proxy, the kept connection is to the proxy, which gets the whole URL.
        const http = nodeHttp();
        return { agent: new http.Agent(options), request: http.request };
      }
      const https = await import('node:https');
      const { skipSslVerification: unchecked, gitConfig } = this.settings;
      // Unchecked certificates need no authorities, whose reading costs 6-19 ms.
      const ca = unchecked ? undefined : await trustedAuthorities(caInfoOf(gitConfig));
      const agent = new https.Agent({
        ...options,
        rejectUnauthorized: !unchecked,
        ...(ca === undefined ? {} : { ca }),
      });
      if (this.proxy) await tunnelThrough(this.proxy, agent, this.closing.signal);
      return { agent, request: https.request as Upstream['request'] };
    })();
    return this.client;
  }

  close(): void {
    this.closing.abort();
    this.failure ??= new Error('closed');
    this.server.close();
    this.server.closeAllConnections();
    this.client?.then(
      ({ agent }) => agent.destroy(),
      () => undefined,
    );
  }

  /**
   * A request of the run's own to the server at `path` (below the repository's), on the kept
   * connection, with the request's credentials; the caller sends its body and ends it.
   */
  async request(
    method: string,
    path: string,
    headers: OutgoingHttpHeaders,
    options: { signal: AbortSignal; timeout: number },
  ): Promise<ClientRequest> {
    const upstream = await this.upstream();
    if (!this.usable) throw new Error('the relay is off');
    const full = `${this.url.pathname.replace(/\/+$/, '')}${path}`;
    return this.requestOn(upstream, method, full, headers, options);
  }

  /** upload-pack's v2 capability advertisement, once a fetch of git's has asked it. */
  get knownCapabilities(): Buffer | undefined {
    return this.kept.uploadPackCapabilities;
  }

  /**
   * The refs the server is known to have that the next push of git's goes to, to answer its
   * request for receive-pack's advertisement with once a push of the run's has brought the
   * server's capabilities (kept-advertisements.ts); undefined: the server is asked.
   */
  expectPush(refs: readonly KnownRef[] | undefined): void {
    this.kept.expectPush(refs);
  }

  private requestOn(
    upstream: Upstream,
    method: string,
    path: string,
    headers: OutgoingHttpHeaders,
    options: { signal?: AbortSignal; timeout?: number } = {},
  ): ClientRequest {
    const credentials = basicCredentials(this.settings.username, this.settings.password);
    const authorization =
      headers.authorization ?? (credentials === undefined ? undefined : `Basic ${credentials}`);
    // Plain HTTP through a proxy: the request goes to the proxy, naming the whole URL.
    const proxy = this.url.protocol === 'http:' ? this.proxy : undefined;
    const proxyCredentials = basicCredentials(proxy?.username, proxy?.password);
    return upstream.request({
      protocol: this.url.protocol,
      hostname: proxy ? proxy.host : this.url.hostname.replace(/^\[|\]$/g, ''),
      port: proxy ? proxy.port : this.url.port || undefined,
      path: proxy ? `${this.url.origin}${path}` : path,
      method,
      headers: {
        ...headers,
        host: this.url.host,
        ...(authorization === undefined ? {} : { authorization }),
        ...(proxyCredentials === undefined
          ? {}
          : { 'proxy-authorization': `Basic ${proxyCredentials}` }),
      },
      agent: upstream.agent,
      ...options,
    });
  }

  /** One request of git's. */
  handle(req: IncomingMessage, res: ServerResponse): void {
    const target =
      req.headers[RELAY_TOKEN_HEADER.toLowerCase()] === this.token
        ? this.targetOf(req.url ?? '')
        : undefined;
    if (target === undefined || !this.usable) {
      req.resume();
      reply(res, target === undefined ? 404 : 502, {}, Buffer.alloc(0));
      return;
    }
    const kept = this.kept.answer(req, target);
    if (kept) {
      req.resume();
      reply(res, 200, kept.headers, kept.body);
      return;
    }
    readBody(req)
      .then((body) =>
        body
          ? this.forward(req, res, target, body, true)
          : this.turnOff(res, new Error('a request too large to hold')),
      )
      // Nothing of a request's may end the run: what went wrong ends that request.
      .catch(() => res.destroy());
  }

  /** The server's path for a request to the relay, or undefined when it is not below `base`. */
  private targetOf(path: string): string | undefined {
    const prefix = this.base.slice(this.base.indexOf('/', 'http://'.length));
    const rest = path.slice(prefix.length);
    if (!path.startsWith(prefix) || !/^($|[/?])/.test(rest)) return undefined;
    return this.url.pathname.replace(/\/+$/, '') + rest;
  }

  /**
   * Sends a request of git's to the server and its answer back. `again`: whether a kept
   * connection the server had closed meanwhile may be replaced for it, which only requests that
   * change nothing may (not a push's).
   */
  private async forward(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    body: Buffer,
    again: boolean,
  ): Promise<void> {
    let upstream: Upstream;
    try {
      upstream = await this.upstream();
    } catch (error) {
      this.turnOff(res, error);
      return;
    }
    const out = this.requestOn(
      upstream,
      req.method ?? 'GET',
      path,
      requestHeaders(req.headers, body.length),
    );
    // Whether the connection to the server was made: an error before that (or an answer that is
    // not HTTP) is the relay's to report (off, and git goes on its own); after it, the request's.
    let connected = false;
    out.on('socket', (socket) => {
      if (out.reusedSocket) connected = true;
      else
        socket.once(this.url.protocol === 'https:' ? 'secureConnect' : 'connect', () => {
          connected = true;
        });
    });
    out.on('response', (answer) => {
      const status = answer.statusCode ?? 502;
      if (status >= 300 && status < 400) {
        // git follows a redirect of its first request to another address; it does so itself.
        answer.resume();
        this.turnOff(res, new Error(`HTTP ${status} to ${answer.headers.location ?? '?'}`));
        return;
      }
      if (status === 407) {
        // The proxy wants credentials the relay does not have: git's own settings may.
        answer.resume();
        this.turnOff(res, new Error('HTTP 407 from the proxy'));
        return;
      }
      const headers = responseHeaders(answer.headers);
      answer.on('error', () => res.destroy());
      if (status === 200 && this.kept.keeps(req, path)) {
        wholeBody(answer).then(
          (body) => {
            if (body) this.kept.keep(req, path, headers, body);
            if (!body || !reply(res, status, headers, body)) res.destroy();
          },
          () => res.destroy(),
        );
        return;
      }
      if (reply(res, status, headers)) answer.pipe(res);
      else answer.resume();
    });
    out.on('error', (error) => {
      if (res.headersSent) res.destroy();
      else if (out.reusedSocket && again && !changesRefs(path))
        this.forward(req, res, path, body, false).catch(() => res.destroy());
      else if (!connected || speaksNoHttp(error)) this.turnOff(res, error);
      else reply(res, 502, {}, Buffer.alloc(0));
    });
    // git went away (stopped, timed out): so does its request.
    res.on('close', () => {
      if (!res.writableFinished) out.destroy();
    });
    out.end(body);
  }

  private turnOff(res: ServerResponse, error: unknown): void {
    this.failure ??= error;
    reply(res, 502, {}, Buffer.alloc(0));
  }
}

/** An answer's body, whole; undefined when the server broke off. */
async function wholeBody(answer: IncomingMessage): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of answer as AsyncIterable<Buffer>) chunks.push(chunk);
  } catch {
    return undefined;
  }
  return Buffer.concat(chunks);
}
