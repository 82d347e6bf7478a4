// What the resource hands its SSH command, named by an environment variable so no secret is in
// argv: the socket of the run's shared connections, or else a JSON file of these settings in the
// request's private folder (mode 0600, removed with the folder).

/** `source.https_tunnel`: an HTTP CONNECT proxy the SSH connection goes through. */
export interface HttpsTunnel {
  proxyHost: string;
  proxyPort: number;
  proxyUser?: string;
  proxyPassword?: string;
}

/**
 * Set when the run cannot share its connections (no socket: see ssh-mux.ts): the settings
 * themselves, as JSON. In git's environment, never in a file: a run that is SIGKILLed removes no
 * file, and the key would stay on disk.
 */
export const SSH_CONFIG_ENV = 'POOL_RESOURCE_SSH_CONFIG';
/** Set instead when the run shares one connection per server: the Unix socket of ssh-mux.ts. */
export const SSH_MUX_ENV = 'POOL_RESOURCE_SSH_MUX';

/** Exit status for our own failures, the one OpenSSH uses; git reports it as a failed connection. */
export const SSH_FAILED = 255;

export interface SshTransportConfig {
  privateKey?: string;
  passphrase?: string;
  /** `private_key_user`: the user when the URI names none. */
  user?: string;
  forwardAgent: boolean;
  /** The caller's SSH_AUTH_SOCK, used when no private_key is configured. */
  agentSocket?: string;
  knownHosts?: string;
  tunnel?: HttpsTunnel;
  /** Bound on TCP connect + proxy + handshake + authentication. */
  connectTimeoutMs: number;
}

export function parseSshConfig(text: string): SshTransportConfig {
  const value: unknown = JSON.parse(text);
  if (typeof value !== 'object' || value === null) throw new Error('malformed configuration');
  const config = value as Partial<SshTransportConfig>;
  return {
    ...config,
    forwardAgent: config.forwardAgent === true,
    connectTimeoutMs:
      typeof config.connectTimeoutMs === 'number' ? config.connectTimeoutMs : 30_000,
  };
}
