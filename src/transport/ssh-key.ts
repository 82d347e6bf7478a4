// Reads `private_key` in-process (no agent, no key file): OpenSSH and PEM keys, Ed25519, ECDSA
// and RSA, as pasted into a pipeline (with or without a trailing newline, CRLF, indentation).
import { createHash, createPrivateKey } from 'node:crypto';
import ssh2, { type ParsedKey } from 'ssh2';

// ssh2 is CommonJS; Node's ESM loader does not see `utils` among its named exports.
const { utils } = ssh2;

/** `text` is the key as ssh2 reads it (normalised, PKCS#8 converted). */
export type KeyResult = { key: ParsedKey; text: string } | { problem: string };

/** Undoes what YAML and copy-paste do to a key: CRLF, indentation, a missing final newline. */
export function normalizeKey(text: string): string {
  const lines = text
    .replace(/\r\n?/g, '\n')
    .split('\n')
    .map((line) => line.trim());
  return `${lines.join('\n').trim()}\n`;
}

/**
 * ssh2 reads OpenSSH and traditional PEM keys; PKCS#8 (`BEGIN PRIVATE KEY`, what `openssl
 * genpkey` writes) is turned into the traditional form first for RSA and ECDSA.
 */
function traditionalPem(text: string, passphrase: string | undefined): string {
  if (!/^-----BEGIN (ENCRYPTED )?PRIVATE KEY-----/.test(text)) return text;
  const key = createPrivateKey({ key: text, format: 'pem', passphrase });
  if (key.asymmetricKeyType === 'rsa') return String(key.export({ type: 'pkcs1', format: 'pem' }));
  if (key.asymmetricKeyType === 'ec') return String(key.export({ type: 'sec1', format: 'pem' }));
  throw new Error(`PKCS#8 ${key.asymmetricKeyType ?? ''} keys are not supported`);
}

/** Parses a private key; the problem, if any, is a sentence that names the field to fix. */
export function readPrivateKey(text: string, passphrase: string | undefined): KeyResult {
  let normalized = normalizeKey(text);
  if (/^(ssh-|ecdsa-|sk-)\S+ /.test(normalized))
    return { problem: 'private_key is a public key (the .pub file), not a private key' };
  try {
    normalized = traditionalPem(normalized, passphrase);
  } catch (error) {
    const encrypted = normalized.includes('ENCRYPTED');
    if (encrypted && passphrase === undefined)
      return { problem: 'private_key is encrypted: set private_key_passphrase' };
    if (encrypted) return { problem: 'private_key_passphrase does not decrypt private_key' };
    return { problem: `private_key cannot be read (${firstWords(error)})` };
  }
  const parsed = utils.parseKey(normalized, passphrase);
  if (parsed instanceof Error) return { problem: explain(parsed.message, passphrase) };
  const key = Array.isArray(parsed) ? (parsed[0] as ParsedKey | undefined) : parsed;
  if (!key) return { problem: 'private_key holds no key' };
  if (!key.isPrivateKey()) return { problem: 'private_key is a public key, not a private key' };
  return { key, text: normalized };
}

function explain(message: string, passphrase: string | undefined): string {
  if (/no passphrase given/i.test(message))
    return 'private_key is encrypted: set private_key_passphrase';
  if (/passphrase/i.test(message) && passphrase !== undefined)
    return 'private_key_passphrase does not decrypt private_key';
  if (/unsupported key format/i.test(message))
    return 'private_key is not an OpenSSH or PEM private key';
  return `private_key cannot be read (${message})`;
}

function firstWords(error: unknown): string {
  // Node's messages never quote the key, but keep only the first line in any case.
  return (error instanceof Error ? error.message : String(error)).split('\n')[0] ?? '';
}

/** `SHA256:…` as `ssh-keygen -l` prints it, for messages about host keys. */
export function fingerprint(blob: Buffer): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}
