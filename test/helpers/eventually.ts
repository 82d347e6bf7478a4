// Waiting in tests for something another process does: look every 50 ms, up to a bound.

/** Whether `condition` held within `ms` (looked at once more at the end). */
export async function eventually(
  condition: () => boolean | Promise<boolean>,
  ms: number,
): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (await condition()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return condition();
}
