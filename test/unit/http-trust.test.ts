import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { caInfoOf, trustedAuthorities } from '../../src/transport/http-trust.js';

const PEM = (n: number) => `-----BEGIN CERTIFICATE-----\nMII${n}\n-----END CERTIFICATE-----\n`;

async function files(entries: Record<string, string>) {
  const dir = await mkdtemp(join(tmpdir(), 'pool-trust-'));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  for (const [name, text] of Object.entries(entries)) await writeFile(join(dir, name), text);
  return (name: string) => join(dir, name);
}

describe('the authorities the relay trusts, as git would', () => {
  it('git_config http.sslCAInfo first, the last entry of any case', () => {
    expect(caInfoOf([])).toBeUndefined();
    expect(
      caInfoOf([
        { name: 'http.sslCAInfo', value: '/a.pem' },
        { name: 'user.name', value: 'x' },
        { name: 'HTTP.SSLCAINFO', value: '/b.pem' },
      ]),
    ).toBe('/b.pem');
  });

  it('reads the file http.sslCAInfo names, whatever the system has', async () => {
    const at = await files({ 'company.pem': PEM(1), 'system.crt': PEM(2) });
    expect(await trustedAuthorities(at('company.pem'), [at('system.crt')])).toBe(PEM(1));
  });

  it('an http.sslCAInfo that cannot be read fails, as it fails git', async () => {
    const at = await files({});
    await expect(trustedAuthorities(at('missing.pem'), [])).rejects.toThrow(/ENOENT/);
  });

  it('else the first system bundle there is, skipping missing and empty ones', async () => {
    const at = await files({ 'empty.crt': '', 'second.crt': PEM(2), 'third.crt': PEM(3) });
    expect(
      await trustedAuthorities(undefined, [
        at('missing.crt'),
        at('empty.crt'),
        at('second.crt'),
        at('third.crt'),
      ]),
    ).toBe(PEM(2));
  });

  it("none at all: Node's own list", async () => {
    const at = await files({});
    expect(await trustedAuthorities(undefined, [at('missing.crt')])).toBeUndefined();
  });
});
