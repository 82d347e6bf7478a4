// The proxy the relay takes is the one git would: the same variables, in the same order, and the
// same no_proxy matching as libcurl's.
import { describe, expect, it } from 'vitest';
import { bypasses, proxyRoute } from '../../src/transport/http-proxy.js';

const HTTPS = new URL('https://git.example.com/locks.git');
const HTTP = new URL('http://git.example.com/locks.git');

describe('proxyRoute', () => {
  it.each([
    ['no variable', HTTPS, {}, 'direct'],
    ['https_proxy', HTTPS, { https_proxy: 'http://proxy:3128' }, { host: 'proxy', port: 3128 }],
    ['HTTPS_PROXY', HTTPS, { HTTPS_PROXY: 'http://proxy:3128' }, { host: 'proxy', port: 3128 }],
    [
      'the lower-case one over the upper-case one',
      HTTPS,
      { HTTPS_PROXY: 'http://upper:1', https_proxy: 'http://lower:2' },
      { host: 'lower', port: 2 },
    ],
    [
      'http_proxy for http',
      HTTP,
      { http_proxy: 'http://proxy:8080' },
      { host: 'proxy', port: 8080 },
    ],
    ['HTTP_PROXY, which curl ignores', HTTP, { HTTP_PROXY: 'http://proxy:8080' }, 'direct'],
    ['http_proxy, not for https', HTTPS, { http_proxy: 'http://proxy:8080' }, 'direct'],
    [
      'all_proxy when nothing else',
      HTTP,
      { all_proxy: 'proxy:3128' },
      { host: 'proxy', port: 3128 },
    ],
    ['set but empty: none', HTTPS, { https_proxy: '', all_proxy: 'http://proxy:1' }, 'direct'],
    [
      'no scheme, no port: curl’s 1080',
      HTTPS,
      { https_proxy: 'proxy' },
      { host: 'proxy', port: 1080 },
    ],
    [
      'credentials, percent-encoded',
      HTTPS,
      { https_proxy: 'http://me%40corp:p%3Ass@proxy:3128' },
      { host: 'proxy', port: 3128, username: 'me@corp', password: 'p:ss' },
    ],
    ['an IPv6 proxy', HTTPS, { https_proxy: 'http://[::1]:3128' }, { host: '::1', port: 3128 }],
    ['SOCKS', HTTPS, { https_proxy: 'socks5h://proxy:1080' }, 'unusable'],
    ['TLS to the proxy', HTTPS, { https_proxy: 'https://proxy:443' }, 'unusable'],
    ['bad percent-encoding', HTTPS, { https_proxy: 'http://%zz@proxy:1' }, 'unusable'],
    [
      'no_proxy naming the host',
      HTTPS,
      { https_proxy: 'http://proxy:3128', no_proxy: 'localhost,git.example.com' },
      'direct',
    ],
  ])('%s', (_, url, env: Record<string, string>, expected) => {
    expect(proxyRoute(url, env)).toEqual(expected);
  });
});

describe('bypasses (no_proxy)', () => {
  it.each([
    ['git.example.com', '*', true],
    ['git.example.com', 'example.com', true],
    ['git.example.com', '.example.com', true],
    ['git.example.com', 'other.org, example.com', true],
    ['git.example.com', 'other.org example.com', true],
    ['GIT.example.com.', 'Example.COM', true],
    ['example.com', '.example.com', true],
    ['badexample.com', 'example.com', false],
    ['git.example.com', 'git.example', false],
    ['git.example.com', '', false],
    ['10.1.2.3', '10.1.2.3', true],
    ['10.1.2.3', '10.0.0.0/8', true],
    ['10.1.2.3', '10.0.0.0/16', false],
    ['10.1.2.3', '10.1.2.30', false],
    ['[::1]', '::1', true],
    ['[fd00::5]', 'fd00::/8', true],
    ['[fd00::5]', '10.0.0.0/8', false],
  ])('%s against %j: %s', (host, noProxy, expected) => {
    expect(bypasses(host, noProxy)).toBe(expected);
  });
});
