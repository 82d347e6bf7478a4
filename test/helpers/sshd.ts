// A real OpenSSH sshd on 127.0.0.1 (random port) with its own host key, a temporary
// authorized_keys file, and git-upload-pack/git-receive-pack run as the current user; plus
// generated client keys (ssh-keygen) in every format the resource accepts.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort, whenListening } from './net.js';
import { sshdConfig } from './sshd-config.mjs';

const exec = promisify(execFile);
export const SSHD = '/usr/sbin/sshd';

export interface KeyPair {
  privateKey: string;
  publicKey: string;
  path: string;
}

export interface KeyOptions {
  type: 'ed25519' | 'ecdsa' | 'rsa';
  /** `PEM` writes the traditional `BEGIN RSA/EC PRIVATE KEY` form. */
  format?: 'PEM';
  passphrase?: string;
}

export async function generateKey(
  dir: string,
  name: string,
  options: KeyOptions,
): Promise<KeyPair> {
  const path = join(dir, name);
  const args = ['-q', '-t', options.type, '-N', options.passphrase ?? '', '-C', name, '-f', path];
  if (options.format) args.push('-m', options.format);
  if (options.type === 'rsa') args.push('-b', '2048');
  await exec('ssh-keygen', args);
  return {
    privateKey: await readFile(path, 'utf8'),
    publicKey: (await readFile(`${path}.pub`, 'utf8')).trim(),
    path,
  };
}

export interface Sshd {
  port: number;
  /** The listening sshd; each connection is served by processes below it. */
  pid: number;
  user: string;
  dir: string;
  /** `ssh://USER@127.0.0.1:PORT/abs/path` */
  url(path: string): string;
  /** The server's host key as a known_hosts line for this port (`[127.0.0.1]:PORT ssh-ed25519 …`). */
  knownHostsLine: string;
  /** Replaces the authorized_keys file (one line per key, OpenSSH options allowed). */
  authorize(lines: string[]): Promise<void>;
  log(): string;
  stop(): Promise<void>;
}

/** `extraConfig`: more sshd_config lines, e.g. `UnusedConnectionTimeout 1`. */
export async function startSshd(
  authorizedKeys: string[],
  extraConfig: string[] = [],
): Promise<Sshd> {
  const dir = await mkdtemp(join(tmpdir(), 'pool-sshd-'));
  // sshd's privilege separation folder; Debian creates it at boot, containers may not have it.
  await mkdir('/run/sshd', { recursive: true, mode: 0o755 });
  const hostKey = await generateKey(dir, 'host_ed25519', { type: 'ed25519' });
  const authorizedFile = join(dir, 'authorized_keys');
  await writeFile(authorizedFile, authorizedKeys.map((line) => `${line}\n`).join(''));
  const user = userInfo().username;
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const config = join(dir, 'sshd_config');
    await writeFile(
      config,
      sshdConfig({
        port,
        hostKey: hostKey.path,
        authorizedKeysFile: authorizedFile,
        dir,
        extra: ['AllowAgentForwarding yes', ...extraConfig],
      }),
    );
    const child: ChildProcess = spawn(SSHD, ['-D', '-e', '-f', config], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const server = await whenListening(child, port);
    if (!server) continue;
    const [type, key] = hostKey.publicKey.split(' ');
    return {
      port,
      pid: child.pid!,
      user,
      dir,
      url: (path) => `ssh://${user}@127.0.0.1:${port}${path}`,
      knownHostsLine: `[127.0.0.1]:${port} ${type} ${key}`,
      authorize: (lines) => writeFile(authorizedFile, lines.map((line) => `${line}\n`).join('')),
      log: server.log,
      stop: async () => {
        await server.stop();
        await rm(dir, { recursive: true, force: true });
      },
    };
  }
  await rm(dir, { recursive: true, force: true });
  throw new Error('sshd did not start');
}
