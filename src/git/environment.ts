// Builds the one environment every git child gets: a private HOME, no system or user config,
// no prompts, our committer identity and the user's git_config. Credentials and transports
// (SSH, HTTPS) add their variables here, so nothing else decides what git sees.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Source } from '../request.js';

export interface GitEnvironment {
  /** Private folder (HOME of every git child), removed by `dispose`. */
  readonly home: string;
  readonly env: Record<string, string>;
  /** simple-git's unsafe switches, enabled only for variables this module sets itself. */
  readonly unsafe: Record<string, boolean>;
  dispose(): Promise<void>;
}

export const DEFAULT_COMMITTER = { name: 'CI Pool Resource', email: 'ci-pool@localhost' };

/** Variables passed through from our own environment: where to find programs and temp space, proxies. */
const PASS_THROUGH = [
  'PATH',
  'TMPDIR',
  'http_proxy',
  'https_proxy',
  'no_proxy',
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'NO_PROXY',
];

export async function createGitEnvironment(
  source: Source,
  parentEnv: NodeJS.ProcessEnv,
): Promise<GitEnvironment> {
  const home = await mkdtemp(join(parentEnv.TMPDIR || tmpdir(), 'pool-resource-'));
  const env: Record<string, string> = {};
  for (const key of PASS_THROUGH) {
    const value = parentEnv[key];
    if (value !== undefined) env[key] = value;
  }
  env.PATH ??= '/usr/local/bin:/usr/bin:/bin';
  Object.assign(env, {
    HOME: home,
    XDG_CONFIG_HOME: join(home, '.config'),
    LANG: 'C',
    LC_ALL: 'C',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    // Pool and lock names are literal paths, never globs or pathspec magic.
    GIT_LITERAL_PATHSPECS: '1',
  });
  const config: [string, string][] = [
    ['user.name', DEFAULT_COMMITTER.name],
    ['user.email', DEFAULT_COMMITTER.email],
    ['gc.auto', '0'],
    ['advice.detachedHead', 'false'],
    ['init.defaultBranch', 'main'],
    ['commit.gpgSign', 'false'],
    ['protocol.version', '2'],
  ];
  if (source.skipSslVerification) config.push(['http.sslVerify', 'false']);
  // The user's entries come last, so their identity or settings win over our defaults.
  for (const entry of source.gitConfig) config.push([entry.name, entry.value]);
  env.GIT_CONFIG_COUNT = String(config.length);
  config.forEach(([key, value], index) => {
    env[`GIT_CONFIG_KEY_${index}`] = key;
    env[`GIT_CONFIG_VALUE_${index}`] = value;
  });
  return {
    home,
    env,
    // GIT_CONFIG_COUNT carries our settings and the user's git_config without a shell or a
    // config file; simple-git refuses it unless asked, since it can name program-running keys.
    unsafe: { allowUnsafeConfigEnvCount: true },
    dispose: () => rm(home, { recursive: true, force: true }),
  };
}
