// Looking at an SSH lock repository's refs on the run's shared SSH connection (ssh-mux.ts), as
// http-refs.ts looks on the HTTP(S) relay's. A put at the back of the line polls with a look;
// `git ls-remote` would start git and git's SSH program (a Node process) each time, and asks
// the server for every ref, patterns or not: a hosted repository advertises a pair per pull
// request. Here each look is one upload-pack on the shared connection (session-refs.ts), spelled
// as git spells it, and so is the fetch of a tip a look saw move; a URI git would spell otherwise
// is left to git.
import type { SshInvocation } from '../transport/ssh-args.js';
import type { SshMux } from '../transport/ssh-mux.js';
import { MAX_ANSWER_BYTES } from './ls-refs.js';
import { SessionRefs } from './session-refs.js';

/**
 * The upload-pack command git runs over SSH for `uri` (ssh://, git+ssh://, ssh+git:// or
 * scp-like `[user@]host:path`), quoted as git quotes it; undefined for anything else.
 */
export function uploadPackInvocation(uri: string): SshInvocation | undefined {
  return serviceInvocation(uri, 'git-upload-pack');
}

/** The command git runs over SSH for `service` at `uri` (see uploadPackInvocation). */
export function serviceInvocation(
  uri: string,
  service: 'git-upload-pack' | 'git-receive-pack',
): SshInvocation | undefined {
  let user: string | undefined;
  let host: string;
  let port = 22;
  let path: string;
  const url =
    /^(?:ssh|git\+ssh|ssh\+git):\/\/(?:([^@/]*)@)?(\[[^\]/]*\]|[^:/]*)(?::(\d*))?(\/.*)$/i.exec(
      uri,
    );
  if (url) {
    [, user, host = '', , path = ''] = url;
    if (url[3]) port = Number(url[3]);
    // git reads ssh://host/~user/path as a path below a home folder.
    if (path.startsWith('/~')) path = path.slice(1);
  } else {
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(uri)) return undefined;
    const scp = /^(?:([^@/]*)@)?(\[[^\]/]*\]|[^:/]+):(.+)$/.exec(uri);
    if (!scp) return undefined;
    [, user, host = '', path = ''] = scp;
  }
  host = host.replace(/^\[|\]$/g, '');
  if (!host || !path || port < 1 || port > 65535) return undefined;
  return {
    ...(user ? { user } : {}),
    host,
    port,
    command: `${service} ${shellQuote(path)}`,
    sendEnv: ['GIT_PROTOCOL'],
  };
}

/** git's sq_quote_buf: single quotes, with `'` and `!` outside them. */
function shellQuote(text: string): string {
  return `'${text.replace(/['!]/g, (char) => `'\\${char}'`)}'`;
}

export interface SshRefsSettings {
  uri: string;
  gitTimeoutMs: number;
}

/** Looks for a run whose SSH connections are shared; undefined otherwise (git is asked). */
export function sshRefsFor(
  mux: SshMux | undefined,
  settings: SshRefsSettings,
  signal: AbortSignal,
): SessionRefs | undefined {
  const invocation = uploadPackInvocation(settings.uri);
  if (!mux || !invocation) return undefined;
  return new SessionRefs(
    (input, session) =>
      mux.exec(invocation, { GIT_PROTOCOL: 'version=2' }, input, session, MAX_ANSWER_BYTES),
    settings,
    signal,
    { packs: true },
  );
}
