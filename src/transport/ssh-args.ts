// Reads the arguments git gives its SSH command. With GIT_SSH_VARIANT=ssh git runs
// `CMD [-o SendEnv=GIT_PROTOCOL] [-p PORT] [-4|-6] [user@]host "git-upload-pack '/path'"`.

export interface SshInvocation {
  user?: string;
  host: string;
  port: number;
  /** The remote command, exactly as git wrote it (git quotes the path itself). */
  command: string;
  /** Variables git asks to forward (`-o SendEnv=…`), e.g. GIT_PROTOCOL. */
  sendEnv: string[];
  family?: 4 | 6;
}

export function parseSshArgs(args: readonly string[]): SshInvocation | { problem: string } {
  const sendEnv: string[] = [];
  let port = 22;
  let user: string | undefined;
  let family: 4 | 6 | undefined;
  let index = 0;
  for (; index < args.length; index++) {
    const arg = args[index]!;
    if (!arg.startsWith('-') || arg === '-') break;
    if (arg === '--') {
      index++;
      break;
    }
    if (arg === '-4' || arg === '-6') {
      family = arg === '-4' ? 4 : 6;
      continue;
    }
    const flag = arg.slice(0, 2);
    if (flag !== '-o' && flag !== '-p' && flag !== '-l')
      return { problem: `unsupported option ${arg}` };
    const value = arg.length > 2 ? arg.slice(2) : args[++index];
    if (value === undefined) return { problem: `option ${flag} needs a value` };
    if (flag === '-p') {
      if (!/^\d{1,5}$/.test(value) || Number(value) < 1 || Number(value) > 65535)
        return { problem: `invalid port ${value}` };
      port = Number(value);
    } else if (flag === '-l') {
      user = value;
    } else {
      const match = /^SendEnv[ =](.*)$/i.exec(value);
      if (match) sendEnv.push(...match[1]!.split(/\s+/).filter(Boolean));
      // Other options are OpenSSH client settings that do not apply here.
    }
  }
  const destination = args[index];
  const command = args.slice(index + 1).join(' ');
  if (!destination || !command) return { problem: 'expected a host and a command' };
  const at = destination.lastIndexOf('@');
  let host = at >= 0 ? destination.slice(at + 1) : destination;
  if (at >= 0) user = destination.slice(0, at);
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  if (!host) return { problem: 'expected a host' };
  return { user: user || undefined, host, port, command, sendEnv, family };
}

/** The variables git asked to forward (`-o SendEnv=…`) that are set. */
export function forwardedEnv(
  invocation: SshInvocation,
  env: Readonly<Record<string, string | undefined>>,
): Record<string, string> {
  const forwarded: Record<string, string> = {};
  for (const name of invocation.sendEnv) {
    const value = env[name];
    if (value !== undefined) forwarded[name] = value;
  }
  return forwarded;
}

/** Whether git reaches `uri` over SSH: ssh://, git+ssh://, ssh+git:// or scp-like `[user@]host:path`. */
export function isSshUri(uri: string): boolean {
  if (/^(ssh|git\+ssh|ssh\+git):\/\//i.test(uri)) return true;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(uri)) return false;
  // git's rule: a colon before any slash makes it scp-like, unless it is a path.
  const colon = uri.indexOf(':');
  const slash = uri.indexOf('/');
  return colon > 0 && (slash === -1 || colon < slash);
}

/**
 * Whether git_config entries (checked, or raw from the request) rewrite URLs
 * (url.<base>.insteadOf or pushInsteadOf): then only git knows which server, and over which
 * transport (SSH too), it talks to.
 */
export function rewritesUrls(gitConfig: unknown): boolean {
  return (
    Array.isArray(gitConfig) &&
    gitConfig.some((entry: unknown) => {
      const name = typeof entry === 'object' && entry !== null && 'name' in entry && entry.name;
      return typeof name === 'string' && /^url\./i.test(name);
    })
  );
}
