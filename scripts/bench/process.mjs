// @ts-check
// Programs the bench runs besides the resource: git with a fixed identity, ssh-keygen, sh.
import { spawn } from 'node:child_process';

export const GIT_ENV = {
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  HOME: process.env.HOME ?? '/root',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_AUTHOR_NAME: 'Bench',
  GIT_AUTHOR_EMAIL: 'bench@localhost',
  GIT_COMMITTER_NAME: 'Bench',
  GIT_COMMITTER_EMAIL: 'bench@localhost',
  GIT_TERMINAL_PROMPT: '0',
};

/**
 * Runs a program with pipes; resolves with its output, rejects on a non-zero exit.
 *
 * @param {string} cmd
 * @param {string[]} args
 * @param {{ cwd?: string, env?: NodeJS.ProcessEnv, input?: string | Buffer }} [options]
 * @returns {Promise<{ stdout: string, stderr: string }>}
 */
export function run(cmd, args, { cwd, env = GIT_ENV, input } = {}) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
    const out = [];
    const err = [];
    child.stdout.on('data', (chunk) => out.push(chunk));
    child.stderr.on('data', (chunk) => err.push(chunk));
    child.stdin.on('error', () => undefined);
    if (input !== undefined) child.stdin.end(input);
    else child.stdin.end();
    child.on('error', reject);
    child.on('close', (code) => {
      const stdout = Buffer.concat(out).toString('utf8');
      const stderr = Buffer.concat(err).toString('utf8');
      if (code === 0) resolvePromise({ stdout, stderr });
      else reject(new Error(`${cmd} ${args.join(' ')} exited ${code}: ${stderr}${stdout}`));
    });
  });
}

/**
 * @param {string} cwd
 * @param {string[]} args
 */
export const git = (cwd, ...args) => run('git', ['-c', 'gc.auto=0', ...args], { cwd });
