// The run's own looks at the lock repository's refs on the connection it keeps to the server:
// HTTP(S) through the relay (http-refs.ts), SSH on the shared connection (ssh-refs.ts). Where
// the run keeps none (git://, or a run that could not share its SSH connection), git is asked.
import type { Git } from './git.js';
import { httpRefsFor } from './http-refs.js';
import type { AdvertisedRef } from './ls-refs.js';
import { sshRefsFor } from './ssh-refs.js';

export interface KeptRefs {
  /** False once a look failed (and for good): the caller asks git from then on. */
  readonly usable: boolean;
  /**
   * Whether a look costs so much less than a fetch that the front of the line should look, and
   * fetch once the tip moved: over HTTP(S) a look is one request on the kept connection. Over SSH
   * a fetch is one upload-pack on the shared connection too, and fetching at once keeps the
   * hand-over a fetch shorter.
   */
  readonly cheaperThanFetch: boolean;
  /** The refs whose names start with one of `prefixes`. */
  listRefs(prefixes: readonly string[]): Promise<AdvertisedRef[]>;
  close(): void;
}

export function keptRefsFor(
  git: Git,
  settings: { uri: string; gitTimeoutMs: number },
  signal: AbortSignal,
): KeptRefs | undefined {
  return httpRefsFor(git.relay, settings, signal) ?? sshRefsFor(git.mux, settings, signal);
}
