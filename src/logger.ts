// The one writer of human-readable output: stderr, with every registered secret masked.

export type Write = (text: string) => void;

export class Logger {
  private readonly secrets = new Set<string>();

  constructor(private readonly write: Write) {}

  /** Registers a value that must never be shown; very short values are ignored (they would mask noise). */
  addSecret(value: string | undefined): void {
    if (value === undefined) return;
    for (const candidate of [value, value.trim(), encodeURIComponent(value)]) {
      if (candidate.length >= 3) this.secrets.add(candidate);
    }
    // Multi-line secrets (keys) are also masked line by line, in case a tool prints one line.
    for (const line of value.split(/\r?\n/)) {
      if (line.trim().length >= 8) this.secrets.add(line.trim());
    }
  }

  redact(text: string): string {
    let result = text;
    // Longest first, so a secret containing another is masked whole.
    for (const secret of [...this.secrets].sort((a, b) => b.length - a.length)) {
      if (result.includes(secret)) result = result.split(secret).join('***');
    }
    return result;
  }

  info(message: string): void {
    this.write(`${this.redact(message)}\n`);
  }

  error(message: string): void {
    this.write(`${this.redact(message)}\n`);
  }
}

/** Removes credentials from a URI for display: `https://user:pass@host` → `https://user:***@host`. */
export function displayUri(uri: string): string {
  return uri.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/@:]*):[^/@]*@/i, '$1:***@');
}

/** The password inside a URI's userinfo, if any. */
export function uriPassword(uri: string): string | undefined {
  const match = /^[a-z][a-z0-9+.-]*:\/\/[^/@:]*:([^/@]*)@/i.exec(uri);
  if (!match?.[1]) return undefined;
  try {
    return decodeURIComponent(match[1]);
  } catch {
    return match[1];
  }
}
