// Which puts left the waiting line with their claims between two tips of a copy that keeps every
// commit since its first fetch: a claim's push takes its put's entry out of the line in the same
// push (branch-push.ts), and the claim's commit carries the put's `Claim-Token` (SPEC §9),
// from which the entry's token is made (lineTokenOf). A put that watches the branch on a kept
// session (git/daemon-session.ts) reads the line so without asking the server for it.

/** The waiting line's token of a put with this `Claim-Token`: its letters and digits, lower case. */
export function lineTokenOf(claimToken: string): string {
  return claimToken.replace(/[^0-9a-z]/gi, '').toLowerCase();
}

/** Every commit prints this line first, so the log always prints (simple-git waits after none). */
const COMMIT_MARK = '-';

/**
 * The line tokens of the claims among the commits after `from` up to `to` (none without `from`);
 * undefined where git cannot list them (`run` runs git in the copy).
 */
export async function claimsBetween(
  run: (args: string[]) => Promise<string>,
  from: string | undefined,
  to: string,
): Promise<Set<string> | undefined> {
  if (from === undefined) return new Set();
  const format = `--format=${COMMIT_MARK}%n%(trailers:key=Claim-Token,valueonly,unfold)`;
  let out: string;
  try {
    out = await run(['log', format, `${from}..${to}`, '--']);
  } catch {
    return undefined;
  }
  const tokens = new Set<string>();
  for (const line of out.split('\n')) {
    const token = line === COMMIT_MARK ? '' : lineTokenOf(line);
    if (token !== '') tokens.add(token);
  }
  return tokens;
}
