// "did you mean": the known field a misspelled one was most likely meant to be. A put with
// `aquire: true` otherwise fails with only "missing acquire, release, …", which names every field
// but the one the user got wrong.

/** Edits (insert, delete, substitute, swap two neighbours) between `a` and `b`, at most `limit + 1`. */
function distance(a: string, b: string, limit: number): number {
  if (Math.abs(a.length - b.length) > limit) return limit + 1;
  let before: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        best = Math.min(best, before[j - 2]! + 1);
      current.push(best);
    }
    before = previous;
    previous = current;
  }
  return previous[b.length]!;
}

/**
 * The known name closest to `field`, when it is close enough to be a slip of the keyboard: one
 * edit for short names, one per three letters for longer ones, ignoring case and `-` for `_`.
 */
export function suggestField(field: string, known: readonly string[]): string | undefined {
  const typed = field.toLowerCase().replace(/-/g, '_');
  // Names longer than any field are not worth comparing (a request may carry a huge key).
  if (typed.length > 64) return undefined;
  const limit = Math.max(1, Math.floor(typed.length / 3));
  let best: { name: string; edits: number } | undefined;
  for (const name of known) {
    const edits = distance(typed, name, limit);
    if (edits <= limit && (best === undefined || edits < best.edits)) best = { name, edits };
  }
  return best?.name;
}
