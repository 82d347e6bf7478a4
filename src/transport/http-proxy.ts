// The proxy git would take to an HTTP(S) lock repository, read from the same settings by the same
// rules as git (http.c) and libcurl, so that the run's relay (http-relay.ts) goes the way git would
// have gone:
//
// - `http.proxy` in git_config first; else, for https, `https_proxy`, else `HTTPS_PROXY`; for
//   http, `http_proxy` only (curl ignores the upper-case one); else `all_proxy`, else `ALL_PROXY`
//   (which the run does not pass on to git: environment.ts). Set but empty: no proxy.
// - `no_proxy` (else `NO_PROXY`): `*`, or names and addresses separated by commas or blanks; a name
//   matches the host and every host below it (`example.com`, `.example.com`), an address or a
//   network (`10.0.0.0/8`) matches the hosts it covers. Ports are not compared.
// - A proxy without a scheme is an HTTP proxy; without a port, curl's 1080.
import type { Agent } from 'node:http';
import { BlockList, isIP, type Socket } from 'node:net';
import type { ConnectionOptions } from 'node:tls';
import { openTunnel } from './proxy-tunnel.js';

export interface HttpProxy {
  host: string;
  port: number;
  username?: string;
  password?: string;
}

/**
 * How git would reach `url`: straight (`direct`), through an HTTP proxy, or through one the relay
 * does not speak (`unusable`: SOCKS, TLS to the proxy, a setting git would refuse).
 */
export type ProxyRoute = 'direct' | 'unusable' | HttpProxy;

/** curl's default proxy port. */
const DEFAULT_PROXY_PORT = 1080;

/** Longest wait for a tunnel: git, waiting on the relay meanwhile, then goes on its own. */
const TUNNEL_TIMEOUT_MS = 30_000;

/** `configured`: git_config's `http.proxy`, which comes before the variables. */
export function proxyRoute(
  url: URL,
  env: Readonly<Record<string, string | undefined>>,
  configured?: string,
): ProxyRoute {
  const setting = configured ?? proxySetting(url.protocol, env);
  if (!setting) return 'direct';
  if (bypasses(url.hostname, env.no_proxy ?? env.NO_PROXY)) return 'direct';
  return parseProxy(setting);
}

/** The proxy setting git uses for `protocol`: lower case wins, as the last one git reads. */
function proxySetting(
  protocol: string,
  env: Readonly<Record<string, string | undefined>>,
): string | undefined {
  const names =
    protocol === 'https:'
      ? ['https_proxy', 'HTTPS_PROXY']
      : protocol === 'http:'
        ? ['http_proxy']
        : [];
  for (const group of [names, ['all_proxy', 'ALL_PROXY']]) {
    const found = group.find((name) => env[name] !== undefined);
    if (found !== undefined) return env[found];
  }
  return undefined;
}

function parseProxy(setting: string): ProxyRoute {
  let proxy: URL;
  try {
    proxy = new URL(setting.includes('://') ? setting : `http://${setting}`);
  } catch {
    return 'unusable';
  }
  if (proxy.protocol !== 'http:' || !proxy.hostname) return 'unusable';
  try {
    return {
      host: proxy.hostname.replace(/^\[|\]$/g, ''),
      port: proxy.port ? Number(proxy.port) : DEFAULT_PROXY_PORT,
      ...(proxy.username ? { username: decodeURIComponent(proxy.username) } : {}),
      ...(proxy.password ? { password: decodeURIComponent(proxy.password) } : {}),
    };
  } catch {
    // A userinfo that is not valid percent-encoding.
    return 'unusable';
  }
}

/** Whether `no_proxy` sends requests for `hostname` (as URL gives it) past the proxy. */
export function bypasses(hostname: string, noProxy: string | undefined): boolean {
  if (!noProxy) return false;
  if (noProxy.trim() === '*') return true;
  const host = hostname
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '')
    .toLowerCase();
  const family = isIP(host);
  for (const entry of noProxy.split(/[\s,]+/).filter(Boolean)) {
    if (family !== 0) {
      if (coversAddress(entry, host, family)) return true;
      continue;
    }
    const name = entry.replace(/^\./, '').replace(/\.$/, '').toLowerCase();
    if (name && (host === name || host.endsWith(`.${name}`))) return true;
  }
  return false;
}

/** Whether `entry` (an address, or a network with its prefix length) covers `address`. */
function coversAddress(entry: string, address: string, family: number): boolean {
  const [network = '', bits] = entry.replace(/^\[|\]$/g, '').split('/');
  const type = family === 6 ? 'ipv6' : 'ipv4';
  if (isIP(network) !== family) return false;
  const list = new BlockList();
  const prefix = bits === undefined ? (family === 6 ? 128 : 32) : Number(bits);
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > (family === 6 ? 128 : 32)) return false;
  list.addSubnet(network, prefix, type);
  return list.check(address, type);
}

/**
 * Makes `agent` (an https one) reach its server through a CONNECT tunnel of `proxy`'s, TLS inside
 * it. A tunnel that cannot be made fails the request before it is connected; `signal` gives up one
 * still being opened.
 */
export async function tunnelThrough(
  proxy: HttpProxy,
  agent: Agent,
  signal: AbortSignal,
): Promise<void> {
  const { connect } = await import('node:tls');
  const tunnel = {
    proxyHost: proxy.host,
    proxyPort: proxy.port,
    proxyUser: proxy.username,
    proxyPassword: proxy.password,
  };
  // Node's agent takes the socket from the callback when createConnection returns none.
  const createConnection = (
    options: ConnectionOptions & { host: string; port: number },
    done: (error: Error | null, socket?: Socket) => void,
  ): undefined => {
    const timeout = AbortSignal.any([signal, AbortSignal.timeout(TUNNEL_TIMEOUT_MS)]);
    openTunnel(tunnel, options.host, options.port, timeout)
      .then((socket) => done(null, connect({ ...options, socket })))
      .catch((error: Error) => done(error));
    return undefined;
  };
  Object.assign(agent, { createConnection });
}
