// Go duration strings ("1m30s", "250ms") and integer nanoseconds, as the reference accepts them.

const UNIT_NANOS: Record<string, number> = {
  ns: 1,
  us: 1e3,
  µs: 1e3,
  μs: 1e3,
  ms: 1e6,
  s: 1e9,
  m: 60e9,
  h: 3600e9,
};

const PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;

/**
 * Parses Go's time.ParseDuration syntax into milliseconds (rounded up, so a positive duration
 * never becomes 0). Returns an error string instead of throwing.
 */
export function parseGoDuration(text: string): { ms: number } | { error: string } {
  let rest = text.trim();
  if (rest === '') return { error: 'empty duration' };
  let sign = 1;
  if (rest.startsWith('-') || rest.startsWith('+')) {
    if (rest.startsWith('-')) sign = -1;
    rest = rest.slice(1);
  }
  if (rest === '0') return { ms: 0 };
  let nanos = 0;
  PART.lastIndex = 0;
  let matched = 0;
  while (PART.lastIndex < rest.length) {
    const start = PART.lastIndex;
    const match = PART.exec(rest);
    if (!match || match.index !== start) {
      return {
        error: `invalid duration "${text}" (use Go syntax such as "10s", "1m30s", "250ms")`,
      };
    }
    nanos += Number(match[1]) * (UNIT_NANOS[match[2] ?? ''] ?? NaN);
    matched++;
  }
  if (matched === 0 || !Number.isFinite(nanos)) {
    return { error: `invalid duration "${text}" (use Go syntax such as "10s", "1m30s", "250ms")` };
  }
  return { ms: sign * Math.ceil(nanos / 1e6) };
}

/** Integer nanoseconds, as the reference's own tests send `retry_delay`. */
export function nanosToMs(nanos: number): number {
  return Math.ceil(nanos / 1e6);
}

/** Milliseconds as Go's time.Duration prints them ("250ms", "1.5s", "1m30s", "1h0m5s"). */
export function formatGoDuration(ms: number): string {
  const whole = Math.max(0, Math.round(ms));
  if (whole === 0) return '0s';
  if (whole < 1000) return `${whole}ms`;
  const hours = Math.floor(whole / 3_600_000);
  const minutes = Math.floor((whole % 3_600_000) / 60_000);
  const rest = whole % 60_000;
  const seconds = `${Math.floor(rest / 1000)}${
    rest % 1000
      ? `.${String(rest % 1000)
          .padStart(3, '0')
          .replace(/0+$/, '')}`
      : ''
  }s`;
  if (hours > 0) return `${hours}h${minutes}m${seconds}`;
  if (minutes > 0) return `${minutes}m${seconds}`;
  return seconds;
}
