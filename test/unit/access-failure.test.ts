import { describe, expect, it } from 'vitest';
import { accessFailure } from '../../src/git/access-failure.js';

// stderr of failed git 2.39 commands, as recorded on this machine.
describe('accessFailure', () => {
  it.each([
    [
      'ssh: authentication failed for git@[127.0.0.1]:2222 (private_key)\nfatal: Could not read from remote repository.\n\nPlease make sure you have the correct access rights\nand the repository exists.\n',
      'ssh: authentication failed for git@[127.0.0.1]:2222 (private_key)',
    ],
    [
      'ssh: host key of [h]:22 does not match known_hosts (server offered ssh-ed25519 SHA256:x)\nfatal: Could not read from remote repository.\n',
      'ssh: host key of [h]:22 does not match known_hosts (server offered ssh-ed25519 SHA256:x)',
    ],
    [
      "fatal: Authentication failed for 'http://127.0.0.1:3000/locks.git/'\n",
      "fatal: Authentication failed for 'http://127.0.0.1:3000/locks.git/' (check username and password)",
    ],
    [
      "fatal: could not read Username for 'http://127.0.0.1:3000': terminal prompts disabled\n",
      "fatal: could not read Username for 'http://127.0.0.1:3000': terminal prompts disabled (the server asks for credentials: set username and password)",
    ],
    [
      "Cloning into bare repository '/tmp/x'...\nfatal: transport 'ext' not allowed\n",
      "fatal: transport 'ext' not allowed (git reaches a repository only over file, git, ssh, http or https)",
    ],
    [
      "fatal: '/tmp/nr/plain' does not appear to be a git repository\nfatal: Could not read from remote repository.\n\nPlease make sure you have the correct access rights\nand the repository exists.\n",
      "fatal: '/tmp/nr/plain' does not appear to be a git repository (check uri: there is no git repository at that address)",
    ],
    [
      'fatal: remote error: access denied or repository not exported: /nope.git\n',
      'fatal: remote error: access denied or repository not exported: /nope.git (check uri: git daemon serves no repository at that path)',
    ],
    [
      "fatal: repository 'http://127.0.0.1:3000/nope.git/' not found\n",
      "fatal: repository 'http://127.0.0.1:3000/nope.git/' not found (check uri: there is no git repository at that address)",
    ],
    [
      "fatal: repository '/tmp/nr/none' does not exist\n",
      "fatal: repository '/tmp/nr/none' does not exist (check uri: there is no git repository at that address)",
    ],
  ])('%j is permanent', (stderr, reason) => {
    expect(accessFailure(stderr)).toEqual({
      reason,
      // Only "no repository there" may have been moved back since the run reached it.
      missing: reason.includes('(check uri:'),
    });
  });

  // An untrusted or misnamed certificate, in the words of the git and libcurl builds the
  // resource meets: recorded against `openssl s_server` with a self-signed certificate for
  // 127.0.0.1. git prints libcurl's reason after "unable to access '<url>': ".
  const HINT = ' (set skip_ssl_verification: true to accept it)';
  it.each([
    [
      'git 2.39, libcurl 7.88 GnuTLS (Debian bookworm): not trusted',
      "fatal: unable to access 'https://127.0.0.1:18443/locks.git/': server certificate verification failed. CAfile: none CRLfile: none",
    ],
    [
      'git 2.47, libcurl 8.14 GnuTLS (Debian trixie, the image): not trusted',
      "fatal: unable to access 'https://127.0.0.1:18443/locks.git/': server verification failed: certificate signer not trusted. (CAfile: /etc/ssl/certs/ca-certificates.crt CRLfile: none)",
    ],
    [
      'libcurl 7.88 OpenSSL 3.0: not trusted',
      "fatal: unable to access 'https://127.0.0.1:18443/locks.git/': SSL certificate problem: self-signed certificate",
    ],
    [
      'git 2.39, libcurl 7.88 GnuTLS: name does not match',
      "fatal: unable to access 'https://localhost:18443/locks.git/': SSL: certificate subject name (127.0.0.1) does not match target host name 'localhost'",
    ],
    [
      'git 2.47, libcurl 8.14 GnuTLS: name does not match',
      "fatal: unable to access 'https://localhost:18443/locks.git/': SSL: certificate subject name (127.0.0.1) does not match target hostname 'localhost'",
    ],
    [
      'libcurl 7.88 OpenSSL 3.0: name does not match',
      "fatal: unable to access 'https://localhost:18443/locks.git/': SSL: no alternative certificate subject name matches target host name 'localhost'",
    ],
  ])('a certificate refused by %s is permanent, with the hint', (_build, line) => {
    expect(accessFailure(`${line}\n`)).toEqual({ reason: `${line}${HINT}`, missing: false });
  });

  it.each([
    'ssh: cannot connect to [127.0.0.1]:2222: ECONNREFUSED\nfatal: Could not read from remote repository.\n',
    'ssh: no SSH handshake with [h]:22 within 30s\n',
    "fatal: unable to access 'https://h/': Failed to connect to h port 443: Connection refused\n",
    "fatal: unable to access 'https://h/': The requested URL returned error: 502\n",
  ])('%j may pass on a retry', (stderr) => {
    expect(accessFailure(stderr)).toBeUndefined();
  });
});
