// Pushing a copy's commits to the branch (LockRepository's last step): one `git push
// --porcelain`, classified by its status flags; with the waiting line's entry leaving in the same
// atomic push when there is one; and, when the push got no answer, a look at the remote to learn
// whether it landed all the same.
import { CancelledError, GitCommandError, OperationError } from '../base/errors.js';
import {
  classifyPush,
  remoteLines,
  type PushOutcome,
  type PushRefused,
} from '../git/push-outcome.js';
import type { PackedObject } from '../git/pack-objects.js';
import type { WaitingEntry } from '../lock/line-entry.js';
import type { BranchCopy } from './branch-copy.js';
import type { LineRefs } from './line-refs.js';

export class BranchPush {
  /** The server cannot take an --atomic push: a claim leaves the line in a push of its own. */
  private atomicRefused = false;

  constructor(
    private readonly copy: BranchCopy,
    private readonly line: LineRefs,
    private readonly options: { uri: string; branch: string },
  ) {}

  /**
   * Pushes `commit`, made on the synced tip, to the branch. With `leaving` (and where its entry
   * points on the remote, when the sync saw it), the same push takes that entry out of the line,
   * atomically: a claim that lost its race keeps its place in line.
   */
  async push(
    commit: string,
    signal?: AbortSignal,
    leaving?: WaitingEntry,
    sends?: readonly PackedObject[],
  ): Promise<PushOutcome> {
    if (!leaving || this.atomicRefused) {
      const outcome = await this.pushCommit(commit, [], signal, sends);
      if (leaving && outcome === 'pushed')
        await this.line.leave([leaving], signal).catch(() => undefined);
      return outcome;
    }
    try {
      const entry = { ref: this.line.ref(leaving), id: leaving.at };
      return await this.pushCommit(commit, [entry], signal, sends);
    } catch (error) {
      // send-pack.c dies with this before sending anything when the server does not advertise
      // `atomic` (git 2.39); there is no other sign of it. Claim first, then leave the line.
      if (!(
        error instanceof GitCommandError && /does not support --atomic push/.test(error.stderr)
      ))
        throw error;
      this.atomicRefused = true;
      return this.push(commit, signal, leaving, sends);
    }
  }

  /**
   * Pushes `commit` (and those before it since the sync: `sends`, where the run built them),
   * deleting the refs `also` (where each points on the remote, if known) in the same atomic push.
   */
  private async pushCommit(
    commit: string,
    also: readonly { ref: string; id?: string }[],
    signal?: AbortSignal,
    sends?: readonly PackedObject[],
  ): Promise<PushOutcome> {
    const branchRef = this.copy.branchRef;
    const refspecs = [`${commit}:${branchRef}`, ...also.map(({ ref }) => `:${ref}`)];
    const leaving = also.length > 0;
    // The refs as the sync saw them, for the run's relay to advertise (git/git.ts): all, or none.
    const known = [{ ref: branchRef, id: this.copy.fetched }, ...also];
    const pushesTo = known.every((ref): ref is { ref: string; id: string } => ref.id !== undefined)
      ? known
      : undefined;
    let out: string;
    try {
      out = await this.copy.run(
        [
          'push',
          '--porcelain',
          ...(leaving ? ['--atomic'] : []),
          '--',
          this.options.uri,
          ...refspecs,
        ],
        { signal, pushesTo, sends },
      );
    } catch (error) {
      // Without a verdict for our ref the push may or may not have landed: a transient failure.
      if (error instanceof GitCommandError) {
        const outcome = classifyPush(error.stdout, branchRef);
        if (outcome) return this.verdict(outcome, error.stderr);
      }
      // No answer (timed out, connection lost) does not mean no push: the server may have moved
      // the branch before the client gave up. Retrying a release or an add that landed would
      // fail with "not claimed" or "already exists".
      if (!(error instanceof CancelledError) && (await this.landed(commit))) return 'pushed';
      throw error;
    }
    const outcome = classifyPush(out, branchRef);
    if (outcome === undefined) throw new Error(`git push printed no status for ${branchRef}`);
    return this.verdict(outcome);
  }

  /**
   * A push the remote refused (hook, protection) will be refused again: retrying would spin. What
   * the remote said about it (`remote:` lines on git's `stderr`: a hook's reason, a host's rule)
   * goes with it, on the same line.
   */
  private verdict(outcome: PushOutcome | PushRefused, stderr = ''): PushOutcome {
    if (typeof outcome === 'string') return outcome;
    const said = remoteLines(stderr);
    throw new OperationError(
      `the lock repository refused the push to branch "${this.options.branch}": ${outcome.refused}${said ? ` (remote: ${said})` : ''}`,
    );
  }

  /** Whether the remote branch tip is the commit we just tried to push. */
  private async landed(commit: string): Promise<boolean> {
    try {
      return (await this.line.look()).tip === commit;
    } catch {
      return false;
    }
  }
}
