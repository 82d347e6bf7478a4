// A look at the refs that is a session of its own with a fresh upload-pack, asked with protocol
// v2's `ls-refs` for the given prefixes only: over SSH an upload-pack on the run's shared
// connection (ssh-refs.ts), over git:// a connection to git daemon (daemon-refs.ts). A server
// that does not take protocol v2 answers with its v0 advertisement, and later looks ask only
// that; a sha256 repository says its object format before it refuses a request that names none,
// and is asked again in it. Anything else unexpected ends the looks for the run: the caller asks
// git instead, which reports the problem in its own words.
//
// Over SSH a tip a look saw move is asked the same way, a session whose request is protocol v2's
// `fetch` of that commit beyond the copy's tip, its pack written by the run (session-pack.ts):
// git's fetch starts four processes on the worker.
import type { KeptRefs } from './kept-refs.js';
import { lsRefsRequest, objectFormat, parseSessionAnswer, type AdvertisedRef } from './ls-refs.js';
import { PackRequests, packRequest, sessionPackOf, type PackSource } from './session-pack.js';

/**
 * One session with a fresh upload-pack: `input` is all of its stdin. Resolves with what it wrote
 * (bounded: ls-refs.ts's MAX_ANSWER_BYTES) and its exit status, 0 where the transport has none;
 * `signal` ends it.
 */
export type UploadPackSession = (
  input: Buffer,
  signal: AbortSignal,
) => Promise<{ status: number; stdout: Buffer }>;

export class SessionRefs implements KeptRefs, PackSource {
  private failed = false;
  private readonly packRequests = new PackRequests();
  /** The protocol the server answered the first look in. */
  private version: 0 | 2 | undefined;
  /** The repository's object format, once a look learnt it is not sha1. */
  private format: string | undefined;

  /**
   * Over git:// a look costs a connection as a fetch does: the front of the line fetches at once,
   * a hand-over a fetch shorter. Over SSH (`packs`) a look is one upload-pack on the shared
   * connection and so is the pack of a moved tip, neither a process on the worker, where git's
   * fetch at each poll starts four: the front looks, and asks for the pack once the tip moved.
   */
  get cheaperThanFetch(): boolean {
    return this.packs !== undefined;
  }

  readonly packs: PackSource | undefined;

  constructor(
    private readonly session: UploadPackSession,
    private readonly settings: { gitTimeoutMs: number },
    private readonly signal: AbortSignal,
    options: { packs?: boolean } = {},
  ) {
    this.packs = options.packs ? this : undefined;
  }

  /** The pack of what `want` has beyond `haves`, one upload-pack (see PackRequests). */
  async pack(
    want: string,
    haves: readonly string[],
    signal?: AbortSignal,
  ): Promise<Buffer | undefined> {
    if (!this.packs || !this.usable) return undefined;
    const speaks = { version: this.version, objectFormat: this.format };
    const stop = [this.signal, AbortSignal.timeout(this.settings.gitTimeoutMs)];
    return this.packRequests.ask(speaks, [signal, this.signal], async () => {
      const { status, stdout } = await this.session(
        packRequest(want, haves),
        AbortSignal.any(signal ? [...stop, signal] : stop),
      );
      if (status !== 0) throw new Error(`upload-pack exited with ${status}`);
      return sessionPackOf(stdout);
    });
  }

  get usable(): boolean {
    return !this.failed && !this.signal.aborted;
  }

  close(): void {
    this.failed = true;
  }

  /** The refs whose names start with one of `prefixes`. */
  async listRefs(prefixes: readonly string[]): Promise<AdvertisedRef[]> {
    if (!this.usable) throw new Error('the looks ended for this run');
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
    const { status, stdout } = await this.session(
      input,
      AbortSignal.any([this.signal, AbortSignal.timeout(this.settings.gitTimeoutMs)]),
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
