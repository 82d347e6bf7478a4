// @ts-check
// The sshd_config of the OpenSSH sshd the tests (sshd.ts) and the bench (scripts/bench/servers.mjs)
// start on 127.0.0.1: key logins only, and commands run as a git host runs them.

/**
 * The config's text. `dir`: the server's own folder, the commands' HOME; `extra`: more lines.
 *
 * @param {{ port: number, hostKey: string, authorizedKeysFile: string, dir: string,
 *   extra?: string[] }} options
 * @returns {string}
 */
export function sshdConfig({ port, hostKey, authorizedKeysFile, dir, extra = [] }) {
  return [
    `Port ${port}`,
    'ListenAddress 127.0.0.1',
    `HostKey ${hostKey}`,
    'PidFile none',
    `AuthorizedKeysFile ${authorizedKeysFile}`,
    'StrictModes no',
    'PubkeyAuthentication yes',
    'PasswordAuthentication no',
    'KbdInteractiveAuthentication no',
    'PermitRootLogin prohibit-password',
    'UsePAM no',
    'AcceptEnv GIT_PROTOCOL',
    // The user's shell runs each command, and bash run by sshd reads ~/.bashrc, which on a
    // developer's machine may start anything (pyenv init: ~80 ms a command, a third of an
    // acquire). A git host runs git alone: HOME is the server's folder, without one.
    `SetEnv HOME=${dir}`,
    'LogLevel VERBOSE',
    ...extra,
    '',
  ].join('\n');
}
