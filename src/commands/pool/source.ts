// Builds the resource's `source` object from the pool command's flags (over an optional JSON
// file) and validates it with the very schema check, in and out use.
import { readFile } from 'node:fs/promises';
import { ConfigurationError } from '../../base/errors.js';
import { printable } from '../../base/lock-name.js';
import { parseSourceObject, type Parsed, type Source } from '../../protocol/request.js';
import type { SourceFlags } from './arguments.js';

export async function sourceFromFlags(flags: SourceFlags): Promise<Parsed<Source>> {
  const raw: Record<string, unknown> = flags.sourceFile
    ? await readSourceFile(flags.sourceFile)
    : {};
  const set = (field: string, value: unknown) => {
    if (value !== undefined) raw[field] = value;
  };
  set('uri', flags.uri);
  set('branch', flags.branch);
  set('pool', flags.pool);
  set('private_key', await fileText(flags.privateKeyFile, '--private-key-file'));
  set(
    'private_key_passphrase',
    stripNewline(await fileText(flags.privateKeyPassphraseFile, '--private-key-passphrase-file')),
  );
  set('private_key_user', flags.privateKeyUser);
  set('forward_agent', flags.forwardAgent);
  set('username', flags.username);
  set('password', stripNewline(await fileText(flags.passwordFile, '--password-file')));
  set('known_hosts', await fileText(flags.knownHostsFile, '--known-hosts-file'));
  set('skip_ssl_verification', flags.skipSslVerification);
  set('retry_delay', flags.retryDelay);
  set('git_timeout', flags.gitTimeout);
  set('lease', flags.lease);
  set('lease_grace', flags.leaseGrace);
  if (flags.gitConfig.length > 0) {
    const entries = flags.gitConfig.map((entry) => {
      const equals = entry.indexOf('=');
      if (equals <= 0)
        throw new ConfigurationError([
          `error: --git-config needs NAME=VALUE, got "${printable(entry)}"`,
        ]);
      return { name: entry.slice(0, equals), value: entry.slice(equals + 1) };
    });
    const fromFile = Array.isArray(raw.git_config) ? (raw.git_config as unknown[]) : [];
    raw.git_config = [...fromFile, ...entries];
  }
  try {
    return await parseSourceObject(raw);
  } catch (error) {
    if (error instanceof ConfigurationError)
      throw new ConfigurationError(error.lines.map(commandLine));
    throw error;
  }
}

/** The resource's wording names JSON fields; here the flag is what the person typed. */
function commandLine(line: string): string {
  const missing = /^invalid payload \(missing (uri|branch|pool)\)$/.exec(line);
  if (missing) return `error: missing --${missing[1]} (or "${missing[1]}" in the --source file)`;
  const inner = /^invalid payload \((.*)\)$/s.exec(line);
  return inner ? `error: source ${inner[1]}` : line;
}

async function readSourceFile(path: string): Promise<Record<string, unknown>> {
  const text = await fileText(path, '--source');
  let value: unknown;
  try {
    value = JSON.parse(text ?? '');
  } catch {
    // JSON.parse quotes the input, which may hold secrets: say only what is wrong.
    throw new ConfigurationError([`error: --source file "${printable(path)}" is not valid JSON`]);
  }
  // A pipeline's resource definition ({"source": {...}}) works as well as the bare object.
  if (isObject(value) && isObject(value.source) && value.uri === undefined) value = value.source;
  if (!isObject(value))
    throw new ConfigurationError([
      `error: --source file "${printable(path)}" must hold a JSON object with the source fields`,
    ]);
  return { ...value };
}

async function fileText(path: string | undefined, flag: string): Promise<string | undefined> {
  if (path === undefined) return undefined;
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    const code = (error as { code?: string }).code ?? 'unreadable';
    throw new ConfigurationError([`error: cannot read ${flag} "${printable(path)}" (${code})`]);
  }
}

function stripNewline(text: string | undefined): string | undefined {
  return text?.replace(/\r?\n$/, '');
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
