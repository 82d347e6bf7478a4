// `https_tunnel`: reaches the SSH server through an HTTP CONNECT proxy, in-process, optionally
// with proxy basic auth. The answer is the raw socket ssh2 then speaks SSH over.
import type { Socket } from 'node:net';
import { basicCredentials } from '../base/basic-auth.js';
import { nodeHttp } from '../base/lazy-builtins.js';

export interface TunnelOptions {
  proxyHost: string;
  proxyPort: number;
  proxyUser?: string;
  proxyPassword?: string;
}

export class TunnelError extends Error {
  override name = 'TunnelError';
  constructor(
    message: string,
    /** The proxy answered and said no (bad credentials, forbidden target): retrying won't help. */
    readonly refused: boolean,
  ) {
    super(message);
  }
}

export function openTunnel(
  options: TunnelOptions,
  host: string,
  port: number,
  signal: AbortSignal,
): Promise<Socket> {
  const target = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  const proxy = `${options.proxyHost}:${options.proxyPort}`;
  const headers: Record<string, string> = { Host: target };
  const credentials = basicCredentials(options.proxyUser, options.proxyPassword);
  if (credentials !== undefined) headers['Proxy-Authorization'] = `Basic ${credentials}`;
  return new Promise((resolve, reject) => {
    const req = nodeHttp().request({
      host: options.proxyHost,
      port: options.proxyPort,
      method: 'CONNECT',
      path: target,
      headers,
      agent: false,
      signal,
    });
    req.once('connect', (response, socket, head) => {
      if (response.statusCode !== 200) {
        socket.destroy();
        const status = `${response.statusCode ?? '?'} ${response.statusMessage ?? ''}`.trim();
        const hint =
          response.statusCode === 407
            ? ': check https_tunnel.proxy_user and https_tunnel.proxy_password'
            : '';
        reject(
          new TunnelError(
            `proxy ${proxy} refused the tunnel to ${target} (${status})${hint}`,
            true,
          ),
        );
        return;
      }
      if (head.length > 0) socket.unshift(head);
      resolve(socket);
    });
    req.once('error', (error: NodeJS.ErrnoException) => {
      if (signal.aborted)
        return reject(new TunnelError(`no tunnel through proxy ${proxy} in time`, false));
      reject(new TunnelError(`cannot reach proxy ${proxy}: ${error.code ?? error.message}`, false));
    });
    req.end();
  });
}
