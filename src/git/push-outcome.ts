// Classifies `git push --porcelain` by its ref-line flags and the summary's bracketed status
// (git-push(1), "OUTPUT"), never by the human words around them.

export type PushOutcome = 'pushed' | 'rejected' | 'up-to-date';

/** A push the remote turned down for a reason of its own (a hook, a protected branch). */
export interface PushRefused {
  refused: string;
}

/**
 * Reasons receive-pack gives when its compare-and-swap on the ref failed: another push landed
 * between our ref advertisement and our update, so this is a lost race like `[rejected]`.
 * ("failed to lock" is what older git, before ref transactions, said for the same; an `--atomic`
 * push checks every ref in one transaction at commit and reports its failure on every ref as
 * "atomic transaction failed", builtin/receive-pack.c in git 2.39.)
 */
const LOST_RACE_REASONS = new Set([
  'failed to update ref',
  'failed to lock',
  'atomic transaction failed',
]);

/**
 * `!` with `[rejected]` (remote moved: fetch first / non-fast-forward) or a lost race on the
 * server: rejected. `!` with `[remote rejected] (reason)` for any other reason: refused. `=`
 * nothing to push; ` `, `+`, `*`, `-` an update that landed. Undefined when the output has no
 * verdict for the ref: the push failed before reaching refs (a broken connection), or the remote
 * never reported (`[remote failure]`) so it may or may not have landed.
 */
export function classifyPush(
  porcelain: string,
  ref: string,
): PushOutcome | PushRefused | undefined {
  for (const line of porcelain.split('\n')) {
    const match = /^([ +\-*=!])\t([^\t]*)\t(.*)$/.exec(line);
    if (!match) continue;
    const [, flag, refs, summary = ''] = match;
    const destination = refs?.split(':').pop();
    if (destination !== ref) continue;
    if (flag === '=') return 'up-to-date';
    if (flag !== '!') return 'pushed';
    if (summary.startsWith('[rejected]')) return 'rejected';
    const remote = /^\[remote rejected\] \((.*)\)$/.exec(summary);
    if (!remote) return undefined;
    const reason = remote[1] ?? '';
    return LOST_RACE_REASONS.has(reason) ? 'rejected' : { refused: reason };
  }
  return undefined;
}

/** The most of the remote's words a refusal quotes: a hook may print pages. */
const MAX_REMOTE_CHARS = 500;

/** The `remote:` lines of a push's stderr, joined into one: what the server said, in its words. */
export function remoteLines(stderr: string): string {
  const said = stderr
    .split(/\r?\n|\r/)
    .map((line) => /^remote: ?(.*)$/.exec(line)?.[1]?.trim())
    .filter((line): line is string => !!line)
    .join('; ');
  return said.length > MAX_REMOTE_CHARS ? `${said.slice(0, MAX_REMOTE_CHARS)}…` : said;
}
