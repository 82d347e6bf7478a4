// Classifies `git push --porcelain` by its ref-line flags (git-push(1), "OUTPUT"), never by
// the human words around them.

export type PushOutcome = 'pushed' | 'rejected' | 'up-to-date';

/**
 * `!` rejected (remote moved: fetch first / non-fast-forward), `=` nothing to push,
 * ` `, `+`, `*`, `-` an update that landed. Undefined when the output has no ref line
 * (the push failed before reaching refs, e.g. a broken connection).
 */
export function classifyPush(porcelain: string, ref: string): PushOutcome | undefined {
  for (const line of porcelain.split('\n')) {
    const match = /^([ +\-*=!])\t([^\t]*)\t/.exec(line);
    if (!match) continue;
    const [, flag, refs] = match;
    const destination = refs?.split(':').pop();
    if (destination !== ref) continue;
    if (flag === '!') return 'rejected';
    if (flag === '=') return 'up-to-date';
    return 'pushed';
  }
  return undefined;
}
