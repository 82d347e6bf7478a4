// Looking at an SSH lock repository's refs on the run's shared SSH connection (ssh-mux.ts), as
// http-refs.ts looks on the HTTP(S) relay's. A put at the back of the line polls with a look;
// `git ls-remote` would start git and git's SSH program (a Node process) each time, and asks
// the server for every ref, patterns or not: a hosted repository advertises a pair per pull
// request. Here each look is one upload-pack on the shared connection, asked with protocol v2's
// `ls-refs` for the branch and the pool's line only; a server that does not take GIT_PROTOCOL
// answers with its v0 advertisement, and later looks ask only that.
//
// Anything unexpected (a path git would spell otherwise, a server that refuses) ends the looks
// for the run; the caller asks git instead, which reports the problem in its own words.
import type { SshInvocation } from '../transport/ssh-args.js';
import type { SshMux } from '../transport/ssh-mux.js';
import {
  lsRefsRequest,
  MAX_ANSWER_BYTES,
  objectFormat,
  parseSessionAnswer,
  type AdvertisedRef,
} from './ls-refs.js';

/**
 * The upload-pack command git runs over SSH for `uri` (ssh://, git+ssh://, ssh+git:// or
 * scp-like `[user@]host:path`), quoted as git quotes it; undefined for anything else.
 */
export function uploadPackInvocation(uri: string): SshInvocation | undefined {
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
    command: `git-upload-pack ${shellQuote(path)}`,
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
): SshRefs | undefined {
  const invocation = uploadPackInvocation(settings.uri);
  return mux && invocation ? new SshRefs(mux, invocation, settings, signal) : undefined;
}

export class SshRefs {
  private failed = false;
  /** The protocol the server answered the first look in. */
  private version: 0 | 2 | undefined;
  /** The repository's object format, once a look learnt it is not sha1. */
  private format: string | undefined;

  constructor(
    private readonly mux: SshMux,
    private readonly invocation: SshInvocation,
    private readonly settings: SshRefsSettings,
    private readonly signal: AbortSignal,
  ) {}

  readonly cheaperThanFetch = false;

  get usable(): boolean {
    return !this.failed && !this.signal.aborted;
  }

  close(): void {
    this.failed = true;
  }

  /** The refs whose names start with one of `prefixes`. */
  async listRefs(prefixes: readonly string[]): Promise<AdvertisedRef[]> {
    if (!this.usable) throw new Error('the shared connection is closed');
    try {
      return await this.look(prefixes);
    } catch (error) {
      this.close();
      throw error;
    }
  }

  private async look(prefixes: readonly string[], again = true): Promise<AdvertisedRef[]> {
    // A v0 server advertises its refs at once; a flush then says we want nothing.
    const input = this.version === 0 ? Buffer.from('0000') : lsRefsRequest(prefixes, this.format);
    const { status, stdout } = await this.mux.exec(
      this.invocation,
      { GIT_PROTOCOL: 'version=2' },
      input,
      AbortSignal.any([this.signal, AbortSignal.timeout(this.settings.gitTimeoutMs)]),
      MAX_ANSWER_BYTES,
    );
    const answer = parseSessionAnswer(stdout);
    // A v0 server may fail on the first look's request, after its advertisement.
    if (!answer || (status !== 0 && (answer.version === 2 || this.version === 0))) {
      // A repository in another object format (sha256) refuses a request that names none, once
      // it has said its capabilities: ask again in its format, and so from then on.
      const format = again && this.format === undefined ? objectFormat(stdout) : undefined;
      if (format !== undefined && format !== 'sha1') {
        this.format = format;
        return this.look(prefixes, false);
      }
      throw new Error(`upload-pack gave no refs (exit ${status})`);
    }
    this.version = answer.version;
    // ls-refs answered only what the prefixes name; v0 advertised everything.
    return answer.version === 2
      ? answer.refs
      : answer.refs.filter(({ ref }) => prefixes.some((prefix) => ref.startsWith(prefix)));
  }
}
