// The pool's waiting line as refs on the remote (lock/line-entry.ts says why refs): reading it
// with the branch tip, without fetching, and pushing entries in and out. A ref points at a commit
// the server already has, so these pushes send no objects.
import { GitCommandError } from '../base/errors.js';
import type { KeptRefs } from '../git/kept-refs.js';
import { classifyPush, type PushOutcome, type PushRefused } from '../git/push-outcome.js';
import { entryRef, linePrefix, parseEntryRef, type WaitingEntry } from '../lock/line-entry.js';
import type { BranchCopy } from './branch-copy.js';
import type { FetchedObjects } from './fetched-objects.js';
import type { RemoteRef } from './git-output.js';
import { lineTokenOf } from './line-claims.js';

/**
 * How many of the newest commits at the tip listed with the line are read for claims whose entries
 * the listing may still show (see entries): a listing races the pushes that land while it runs.
 */
const LISTED_CLAIMS = 16;

export interface LineRefsOptions {
  uri: string;
  branch: string;
  pool: string;
  /** Fetch the line with the branch (an acquire keeps its place in it). */
  line?: boolean;
  /** A kept connection to look on (git/kept-refs.ts). */
  refs?: KeptRefs;
}

export class LineRefs {
  constructor(
    private readonly copy: BranchCopy,
    private readonly options: LineRefsOptions,
    /** The commits the run fetched itself, where the claims at a listed tip are read. */
    private readonly fetched?: FetchedObjects,
  ) {}

  private get prefix(): string {
    return linePrefix(this.options.branch, this.options.pool);
  }

  /** The ref of an entry. */
  ref(entry: WaitingEntry): string {
    return entryRef(this.prefix, entry);
  }

  /** What a fetch of the branch adds to bring the line too (none without `line`). */
  get refspecs(): string[] {
    return this.options.line ? [`+${this.prefix}*:refs/pool-resource/line/*`] : [];
  }

  /**
   * The line's entries among `refs`, listed with the branch at `tip`: less the puts whose claims
   * are among its newest commits, as far as the run fetched them. A claim's push takes its put's
   * entry out of the line with it, but a listing taken while that push lands may show the branch
   * after it with the entry still there (git moves the refs of one push one at a time): a put that
   * went by such a line would wait on a put that is gone, until its stall ended.
   */
  entries(refs: readonly RemoteRef[], tip: string | undefined): WaitingEntry[] {
    const line: WaitingEntry[] = [];
    for (const { id, ref } of refs) {
      const entry = parseEntryRef(this.prefix, ref);
      if (entry) line.push({ ...entry, at: id });
    }
    return this.listedAt(tip, line);
  }

  /** `line`, listed with the branch at `tip`, less the puts whose claims it shows (see entries). */
  listedAt(tip: string | undefined, line: WaitingEntry[]): WaitingEntry[] {
    const claims = tip === undefined ? [] : this.fetched?.newestClaimTokens(tip, LISTED_CLAIMS);
    if (!claims?.length) return line;
    const gone = new Set(claims.map(lineTokenOf));
    return line.filter(({ token }) => !gone.has(token));
  }

  /**
   * The branch tip and the pool's waiting line on the remote, without fetching anything: one
   * ls-remote, the same one connection as asking for the tip alone (or one request on the kept
   * connection). Needs no repository: runs in the private home.
   */
  async look(): Promise<{ tip: string | undefined; line: WaitingEntry[] }> {
    const kept = this.options.refs;
    const branch = this.copy.branchRef;
    // A failed kept connection is closed for good: ls-remote from then on (which a stop cancels).
    const refs =
      (kept?.usable
        ? await kept.listRefs([branch, this.prefix]).catch(() => undefined)
        : undefined) ?? (await this.copy.remoteRefs([branch, `${this.prefix}*`]));
    const tip = refs.find(({ ref }) => ref === branch)?.id;
    return { tip, line: this.entries(refs, tip) };
  }

  /** Whether `look` asks on a kept connection: polls may then look, and fetch once it moved. */
  get looksAreCheap(): boolean {
    const refs = this.options.refs;
    return refs !== undefined && refs.usable && refs.cheaperThanFetch;
  }

  /**
   * Puts an entry in the pool's line, or moves it to `at` (the synced tip: a put showing it is
   * alive). Forced: the tip may not descend from where the entry pointed. False when the remote
   * refuses refs outside its branches.
   */
  async join(entry: WaitingEntry, at: string): Promise<boolean> {
    const ref = this.ref(entry);
    const outcome = await this.pushRefs([`+${at}:${ref}`], ref);
    if (outcome === undefined) throw new Error(`git push printed no status for ${ref}`);
    return typeof outcome === 'string';
  }

  /** Takes entries out of the line (deleting one that is already gone is no error). */
  async leave(entries: readonly WaitingEntry[], signal?: AbortSignal): Promise<void> {
    if (entries.length === 0) return;
    const refs = entries.map((entry) => `:${this.ref(entry)}`);
    await this.pushRefs(refs, refs[0]!.slice(1), signal);
  }

  /** One push of `refspecs`; the outcome for `ref`, or undefined when git reported none. */
  private async pushRefs(
    refspecs: readonly string[],
    ref: string,
    signal?: AbortSignal,
  ): Promise<PushOutcome | PushRefused | undefined> {
    let out: string;
    try {
      // Nothing to send: an entry names a commit the server has, or goes (own-push.ts checks).
      out = await this.copy.run(['push', '--porcelain', '--', this.options.uri, ...refspecs], {
        signal,
        sends: [],
      });
    } catch (error) {
      const outcome =
        error instanceof GitCommandError ? classifyPush(error.stdout, ref) : undefined;
      if (outcome === undefined) throw error;
      return outcome;
    }
    return classifyPush(out, ref);
  }
}
