// Recognises, in a failed git command's stderr, the failures that no retry can fix: the server
// refused our credentials, the host key is wrong, the proxy refused us, the certificate is not
// trusted. Lines starting `ssh: ` are written by our own SSH program (src/transport), so their
// wording is ours; the others are git's own words, with libcurl's reason after `unable to access`.

const PERMANENT: { pattern: RegExp; hint?: string }[] = [
  { pattern: /^ssh: (authentication failed|host key |proxy .* refused|private_key|known_hosts:)/ },
  { pattern: /^fatal: Authentication failed for /, hint: 'check username and password' },
  {
    pattern: /^fatal: could not read (Username|Password) for .*terminal prompts disabled/,
    hint: 'the server asks for credentials: set username and password',
  },
  {
    // libcurl words an untrusted certificate by its TLS library and version: OpenSSL says "SSL
    // certificate problem"; GnuTLS (Debian's git) says "server certificate verification failed"
    // up to curl 7.x (bookworm) and "server verification failed: <cause>" from curl 8 (trixie).
    // A name that does not match is "SSL: certificate subject name … does not match" (GnuTLS) or
    // "SSL: no alternative certificate subject name matches" (OpenSSL).
    pattern:
      /^fatal: unable to access .*(SSL certificate problem|server (certificate )?verification failed|SSL: (no alternative )?certificate subject name)/,
    hint: 'set skip_ssl_verification: true to accept it',
  },
  { pattern: /^fatal: unable to access .*The requested URL returned error: 40[13]\b/ },
];

/** The line explaining a permanent access failure, or undefined when a retry may help. */
export function accessFailure(stderr: string): string | undefined {
  for (const raw of stderr.split('\n')) {
    const line = raw.trim();
    for (const { pattern, hint } of PERMANENT) {
      if (pattern.test(line)) return hint ? `${line} (${hint})` : line;
    }
  }
  return undefined;
}
