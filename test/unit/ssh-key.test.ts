import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { normalizeKey, readPrivateKey } from '../../src/transport/ssh-key.js';

function pkcs8(type: 'rsa' | 'ec' | 'ed25519', passphrase?: string): string {
  const options = {
    ...(type === 'rsa' ? { modulusLength: 2048 } : type === 'ec' ? { namedCurve: 'P-256' } : {}),
    privateKeyEncoding: {
      type: 'pkcs8' as const,
      format: 'pem' as const,
      ...(passphrase ? { cipher: 'aes-256-cbc', passphrase } : {}),
    },
    publicKeyEncoding: { type: 'spki' as const, format: 'pem' as const },
  };
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- overloads per key type
  return (generateKeyPairSync as any)(type, options).privateKey as string;
}

describe('readPrivateKey', () => {
  it('normalises what YAML and copy-paste do to a key', () => {
    expect(normalizeKey('  -----BEGIN X-----\r\n  abc\r\n  -----END X-----')).toBe(
      '-----BEGIN X-----\nabc\n-----END X-----\n',
    );
  });

  it.each([
    ['rsa', 'ssh-rsa'],
    ['ec', 'ecdsa-sha2-nistp256'],
  ] as const)('reads a PKCS#8 %s key (openssl genpkey)', (type, sshType) => {
    const result = readPrivateKey(pkcs8(type), undefined);
    expect('key' in result && result.key.type).toBe(sshType);
  });

  it('reads an encrypted PKCS#8 key with its passphrase, and says which field is wrong', () => {
    const key = pkcs8('rsa', 'open sesame');
    const read = readPrivateKey(key, 'open sesame');
    expect('key' in read && read.key.type).toBe('ssh-rsa');
    expect(readPrivateKey(key, undefined)).toEqual({
      problem: 'private_key is encrypted: set private_key_passphrase',
    });
    expect(readPrivateKey(key, 'nope')).toEqual({
      problem: 'private_key_passphrase does not decrypt private_key',
    });
  });

  it('says what is wrong without quoting the key', () => {
    const ed = pkcs8('ed25519');
    const result = readPrivateKey(ed, undefined);
    expect(result).toEqual({
      problem: 'private_key cannot be read (PKCS#8 ed25519 keys are not supported)',
    });
    expect(readPrivateKey('ssh-ed25519 AAAA fake', undefined)).toEqual({
      problem: 'private_key is a public key (the .pub file), not a private key',
    });
    expect(
      readPrivateKey('-----BEGIN NONSENSE-----\nxyz\n-----END NONSENSE-----', undefined),
    ).toEqual({
      problem: 'private_key is not an OpenSSH or PEM private key',
    });
  });
});
