import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  globMatches,
  matchesHost,
  parseKnownHosts,
  pinnedKeyTypes,
  verifyHostKey,
} from '../../src/transport/known-hosts.js';

// Public host keys as ssh-keyscan prints them (blobs are `string type` + key material).
function blob(type: string, fill: number): string {
  const name = Buffer.from(type);
  const header = Buffer.alloc(4);
  header.writeUInt32BE(name.length);
  return Buffer.concat([header, name, Buffer.alloc(32, fill)]).toString('base64');
}
const ED = blob('ssh-ed25519', 1);
const ED_OTHER = blob('ssh-ed25519', 2);
const RSA = blob('ssh-rsa', 3);

function entries(text: string) {
  const parsed = parseKnownHosts(text);
  if ('problem' in parsed) throw new Error(parsed.problem);
  return parsed.entries;
}

describe('known_hosts', () => {
  it.each([
    [['github.com'], 'github.com', 22, true],
    [['github.com'], 'github.com', 2222, false],
    [['[github.com]:2222'], 'github.com', 2222, true],
    [['*.example.com'], 'git.example.com', 22, true],
    [['*.example.com', '!evil.example.com'], 'evil.example.com', 22, false],
    [['git?.example.com'], 'git1.example.com', 22, true],
    [['GitHub.COM'], 'github.com', 22, true],
    [['a.com,b.com'.split(',')].flat(), 'b.com', 22, true],
  ])('%j matches %s port %d: %s', (patterns, host, port, expected) => {
    expect(matchesHost(patterns, host, port)).toBe(expected);
  });

  it.each([
    ['*', '', true],
    ['*', 'host', true],
    ['', '', true],
    ['', 'h', false],
    ['?', '', false],
    ['h?st', 'host', true],
    ['h?st', 'hst', false],
    ['*.example.com', '.example.com', true],
    ['*.example.com', 'example.com', false],
    ['a*b*c', 'aXbYbZc', true],
    ['a*b*c', 'aXbYbZ', false],
    ['*ab', 'aab', true],
    ['a**b', 'ab', true],
    ['*?*', 'x', true],
    ['*?*?', 'x', false],
    ['[h]:22*', '[h]:2222', true],
    ['10.0.0.*', '10.0.0.17', true],
    ['10.0.0.?', '10.0.0.17', false],
  ])('glob %j against %j: %s', (pattern, name, expected) => {
    expect(globMatches(pattern, name)).toBe(expected);
  });

  it('matches a field of thousands of stars in linear time (no backtracking blow-up)', () => {
    const host = 'a'.repeat(250);
    const started = performance.now();
    expect(globMatches(`${'*'.repeat(10_000)}x`, host)).toBe(false);
    expect(globMatches(`${'*a'.repeat(125)}${'*'.repeat(10_000)}`, host)).toBe(true);
    expect(globMatches(`${'*a'.repeat(250)}*b`, host)).toBe(false);
    expect(matchesHost([`${'*'.repeat(100_000)}x`, `!${'*?'.repeat(5_000)}x`], host, 22)).toBe(
      false,
    );
    expect(performance.now() - started).toBeLessThan(200);
  });

  it('matches hashed host names (ssh-keygen -H)', () => {
    const salt = Buffer.alloc(20, 7);
    const hash = createHmac('sha1', salt).update('[10.0.0.1]:2222').digest('base64');
    expect(matchesHost([`|1|${salt.toString('base64')}|${hash}`], '10.0.0.1', 2222)).toBe(true);
    expect(matchesHost([`|1|${salt.toString('base64')}|${hash}`], '10.0.0.1', 22)).toBe(false);
  });

  it('verifies the offered key against the lines for that host', () => {
    const pins = entries(`# pinned\n[h]:2222 ssh-ed25519 ${ED}\nother ssh-ed25519 ${ED_OTHER}\n`);
    expect(verifyHostKey(pins, 'h', 2222, Buffer.from(ED, 'base64'))).toEqual({ ok: true });
    expect(verifyHostKey(pins, 'h', 2222, Buffer.from(ED_OTHER, 'base64'))).toEqual({
      ok: false,
      reason: 'mismatch',
    });
    expect(verifyHostKey(pins, 'h', 22, Buffer.from(ED, 'base64'))).toEqual({
      ok: false,
      reason: 'not-listed',
    });
  });

  it('refuses a key marked @revoked even when also pinned', () => {
    const pins = entries(`h ssh-ed25519 ${ED}\n@revoked * ssh-ed25519 ${ED}\n`);
    expect(verifyHostKey(pins, 'h', 22, Buffer.from(ED, 'base64'))).toEqual({
      ok: false,
      reason: 'revoked',
    });
  });

  it('names the pinned key types for the host (asked for first in the handshake)', () => {
    const pins = entries(`h ssh-rsa ${RSA}\nh ssh-ed25519 ${ED}\nx ssh-ed25519 ${ED_OTHER}\n`);
    expect(pinnedKeyTypes(pins, 'h', 22)).toEqual(['ssh-rsa', 'ssh-ed25519']);
  });

  it.each([
    ['', 'no host key lines found'],
    ['just some words', 'line 1 is not "HOSTS KEYTYPE KEY" (as ssh-keyscan prints)'],
    [`h ssh-rsa ${ED}`, 'line 1 does not hold a valid ssh-rsa key'],
    [`@bogus h ssh-ed25519 ${ED}`, 'line 1 has an unknown marker @bogus'],
  ])('refuses %j', (text, problem) => {
    expect(parseKnownHosts(text)).toEqual({ problem });
  });
});
