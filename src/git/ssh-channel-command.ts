// git's clone, fetch and push to an SSH lock repository without git's SSH program: the run starts
// the remote command (git-upload-pack or git-receive-pack, spelled as git spells it) on a channel
// of its shared connection (transport/ssh-mux.ts) and relays it to git's descriptor 3, one end of
// a socket pair, where git's `fd::` transport speaks the protocol. No node starts for the SSH
// program, and git's bytes take one relay fewer.
import { Writable, type Duplex } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { SshInvocation } from '../transport/ssh-args.js';
import type { SshMux } from '../transport/ssh-mux.js';
import { fdCommand, finished, spawnOnFd, type FdCommand } from './fd-command.js';
import { serviceInvocation } from './ssh-refs.js';

/** The SSH lock repository the run's commands reach on channels of its shared connection. */
export interface SshChannels {
  uri: string;
  mux: SshMux;
  /** The remote command of a clone or fetch, and its environment, as git would ask them. */
  upload: { invocation: SshInvocation; env: Record<string, string> };
  /** The same for a push. */
  receive: { invocation: SshInvocation; env: Record<string, string> };
}

/**
 * Channels for `uri` on `mux`, git asking upload-pack for `protocolVersion` (protocol.version);
 * undefined for a URI git does not reach over SSH.
 */
export function sshChannels(
  uri: string,
  mux: SshMux,
  protocolVersion: '0' | '1' | '2',
): SshChannels | undefined {
  const upload = serviceInvocation(uri, 'git-upload-pack');
  const receive = serviceInvocation(uri, 'git-receive-pack');
  if (!upload || !receive) return undefined;
  // As git's connect.c asks: receive-pack has no protocol v2, so a push asks v0 then.
  const pushVersion = protocolVersion === '2' ? '0' : protocolVersion;
  const asking = (version: string): Record<string, string> =>
    version === '0' ? {} : { GIT_PROTOCOL: `version=${version}` };
  return {
    uri,
    mux,
    upload: { invocation: upload, env: asking(protocolVersion) },
    receive: { invocation: receive, env: asking(pushVersion) },
  };
}

/**
 * After git has exited, how long its failure waits for the remote command's last words (its
 * stderr, as git's SSH program would have written them before exiting).
 */
const REMOTE_WORDS_MS = 1_000;

/** `args` as a command on a channel of the run's connection; undefined where git must connect. */
export function sshChannelCommand(
  ssh: SshChannels,
  args: readonly string[],
): FdCommand | undefined {
  return fdCommand(ssh.uri, args, ({ args: replaced, service }, options) => {
    const { invocation, env } = service === 'git-receive-pack' ? ssh.receive : ssh.upload;
    const child = spawnOnFd(replaced, options);
    const remoteWords: Buffer[] = [];
    const stderr = new Writable({
      write(chunk: Buffer, _encoding, done) {
        remoteWords.push(chunk);
        done();
      },
    });
    const connection = child.stdio[3] as Duplex | null;
    const relayed = connection
      ? ssh.mux.attach(invocation, env, connection, stderr)
      : Promise.resolve(0);
    relayed.catch(() => undefined);
    // git gone, nothing is left to relay: the channel ends, and Node's 'close' for git no longer
    // waits on our end of its descriptor (a connection still being made would hold it). A git that
    // never started has no 'exit', only an 'error'.
    const gone = () => connection?.destroy();
    child.once('exit', gone);
    child.once('error', gone);
    // Only a failure needs them, and a command that is over, or stopped, waits on no server.
    const words = async (exitCode: number | null) => {
      if (exitCode !== 0 && !options.signal.aborted)
        await Promise.race([
          relayed,
          sleep(REMOTE_WORDS_MS, undefined, { ref: false, signal: options.signal }).catch(
            () => undefined,
          ),
        ]);
      return Buffer.concat(remoteWords);
    };
    return finished(child, words);
  });
}
