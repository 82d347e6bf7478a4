// Recognises, in a failed git command's stderr, the failures that no retry can fix: the server
// refused our credentials, the host key is wrong, the proxy refused us, the certificate is not
// trusted, there is no repository at that address. Lines starting `ssh: ` are written by our own
// SSH program (src/transport), so their wording is ours; the others are git's own words, with
// libcurl's reason after `unable to access`.

/** `missing`: the words say there is no repository at the address (see accessFailure). */
const PERMANENT: { pattern: RegExp; hint?: string; missing?: boolean }[] = [
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
  // No repository there: a local path or an SSH server's path (git's own words on both), git
  // daemon (it never says which of the two), HTTP(S) (a 404), clone of a path that is not there.
  {
    pattern: /^fatal: '.*' does not appear to be a git repository$/,
    hint: 'check uri: there is no git repository at that address',
    missing: true,
  },
  {
    pattern: /^fatal: remote error: access denied or repository not exported: /,
    hint: 'check uri: git daemon serves no repository at that path',
    missing: true,
  },
  {
    pattern: /^fatal: repository '.*' (not found|does not exist)$/,
    hint: 'check uri: there is no git repository at that address',
    missing: true,
  },
  // GIT_ALLOW_PROTOCOL (git/environment.ts) refused where a url.<base>.insteadOf leads.
  {
    pattern: /^fatal: transport '[^']*' not allowed/,
    hint: 'git reaches a repository only over file, git, ssh, http or https',
  },
];

export interface AccessFailure {
  /** git's line, with what to do about it when that is known. */
  reason: string;
  /**
   * No repository at the address: permanent when the run never reached one there (a wrong uri),
   * but a repository that answered earlier in the run and is gone now may be moved back.
   */
  missing: boolean;
}

/** What explains a permanent access failure, or undefined when a retry may help. */
export function accessFailure(stderr: string): AccessFailure | undefined {
  for (const raw of stderr.split('\n')) {
    const line = raw.trim();
    for (const { pattern, hint, missing = false } of PERMANENT) {
      if (pattern.test(line)) return { reason: hint ? `${line} (${hint})` : line, missing };
    }
  }
  return undefined;
}
