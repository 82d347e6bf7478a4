// Key pairs from ssh2's own generator, for unit tests that need a real key without ssh-keygen.
import { utils } from 'ssh2';

/**
 * An ed25519 key pair that reads back. ssh2's generator (lib/keygen.js) strips every leading zero
 * byte of the public key's BIT STRING, not only its padding byte, so about one key in 256 comes out
 * 31 bytes long: neither ssh2 nor OpenSSH can read it. Such a pair is drawn again.
 */
export function ed25519KeyPair(encryption?: { passphrase: string; cipher: string }): {
  private: string;
  public: string;
} {
  for (;;) {
    const pair = encryption
      ? utils.generateKeyPairSync('ed25519', { ...encryption, rounds: 16 })
      : utils.generateKeyPairSync('ed25519');
    if (!(utils.parseKey(pair.private, encryption?.passphrase) instanceof Error)) return pair;
  }
}
