// The run's own looks at the lock repository's refs, for the branch and the pool's line only:
// HTTP(S) through the relay, on the connection it keeps (http-refs.ts); SSH on the shared
// connection (ssh-refs.ts); git:// with a connection of their own, as git's (daemon-refs.ts).
// Where none applies (an SSH run that could not share its connection, a url.<base>.insteadOf
// that may send git elsewhere), git is asked.
import { rewritesUrls } from '../transport/ssh-args.js';
import type { Git } from './git.js';
import { daemonRefsFor } from './daemon-refs.js';
import { httpRefsFor } from './http-refs.js';
import type { AdvertisedRef } from './ls-refs.js';
import type { PackSource } from './session-pack.js';
import { sshRefsFor } from './ssh-refs.js';

export interface KeptRefs {
  /** False once a look failed (and for good): the caller asks git from then on. */
  readonly usable: boolean;
  /**
   * Whether a look costs so much less than a fetch that the front of the line should look, and
   * fetch once the tip moved: over HTTP(S) a look is one request on the kept connection, over SSH
   * one upload-pack on the shared connection, where git's fetch starts four processes. Over
   * git:// a look is a connection as a fetch is, and fetching at once keeps the hand-over a fetch
   * shorter.
   */
  readonly cheaperThanFetch: boolean;
  /** The refs whose names start with one of `prefixes`. */
  listRefs(prefixes: readonly string[]): Promise<AdvertisedRef[]>;
  /**
   * Where a commit's pack is asked on the same kept connection, without git (over HTTP(S) one
   * request, over SSH one upload-pack); undefined where the transport has none (git://, whose
   * put in line asks its kept session).
   */
  readonly packs?: PackSource;
  close(): void;
}

export function keptRefsFor(
  git: Git,
  settings: {
    uri: string;
    gitTimeoutMs: number;
    gitConfig: readonly { name: string; value: string }[];
  },
  signal: AbortSignal,
): KeptRefs | undefined {
  // A url.<base>.insteadOf (or pushInsteadOf) may send git to another server than the uri names:
  // looking at the uri's would watch a branch nobody pushes to.
  if (rewritesUrls(settings.gitConfig)) return undefined;
  return (
    httpRefsFor(git.relay, settings, signal) ??
    sshRefsFor(git.mux, settings, signal) ??
    daemonRefsFor(settings, signal)
  );
}
