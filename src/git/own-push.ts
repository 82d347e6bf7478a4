// A push to a git:// lock repository made by the run itself, on the receive-pack connection whose
// advertisement it has read (daemon-push.ts): the commands, a pack of the objects the run built (a
// claim's or a release's commits and the folders they changed, repo/moved-commits.ts; none for a
// line entry at a commit the server has), then receive-pack's report (git's
// Documentation/gitprotocol-pack.txt, "Pushing Data To a Server"). git would start `git push` and
// `git pack-objects` for the same bytes: two processes on a busy worker's CPU in every hand-over.
// What `git push --porcelain` prints is made of the report (git's transport.c), for BranchPush and
// LineRefs to read as they read git's. Anything else is git's, as before: refspecs or options the
// run does not use, a server without the capabilities used here, another object format, a commit
// pushed that neither the pack nor an advertised ref holds.
import type { Socket } from 'node:net';
import { isFlush, packets, packetText, pktLine } from './ls-refs.js';
import { packOf, type PackedObject } from './pack-objects.js';
import { SOCKET_REMOTE, type CommandResult } from './fd-command.js';

const ZERO_ID = '0'.repeat(40);

/** The most of a report read: a few lines per ref, and what hooks print. */
const MAX_REPORT_BYTES = 1024 * 1024;

/** A receive-pack connection and what it has advertised, read by the run (daemon-push.ts). */
export interface Advertised {
  socket: Socket;
  /** Everything read from it so far: git reads it first. */
  read: Buffer;
  /** The refs it advertised; undefined where the advertisement could not be read whole. */
  refs: Map<string, string> | undefined;
}

/** One ref a push updates: its refspec's source (empty for a deletion) and its two values. */
interface RefUpdate {
  source: string;
  ref: string;
  old: string;
  new: string;
  forced: boolean;
}

/**
 * The updates git's `push --porcelain [--atomic] -- fd::3 <refspecs>` (`args`) makes: each
 * source a commit's id, sent in `sends` or advertised, a branch moved forward through the commits
 * sent; undefined for any other push, which git makes.
 */
export function ownPushUpdates(
  args: readonly string[],
  refs: ReadonlyMap<string, string>,
  sends: readonly PackedObject[],
): { updates: RefUpdate[]; atomic: boolean } | undefined {
  const end = args.indexOf('--');
  const options = args.slice(1, end);
  if (args[0] !== 'push' || end < 0 || args[end + 1] !== SOCKET_REMOTE) return undefined;
  if (!options.includes('--porcelain')) return undefined;
  if (options.some((option) => option !== '--porcelain' && option !== '--atomic')) return undefined;
  const known = new Set([...refs.values(), ...sends.map(({ id }) => id)]);
  const updates: RefUpdate[] = [];
  for (const refspec of args.slice(end + 2)) {
    const match = /^(\+?)([0-9a-f]{40})?:(refs\/[^\s:]+)$/.exec(refspec);
    if (!match) return undefined;
    const [, force = '', source = '', ref = ''] = match;
    const old = refs.get(ref) ?? ZERO_ID;
    // git says why of a ref that is not there to delete, or already where it goes.
    if (source === '' ? old === ZERO_ID : old === source || !known.has(source)) return undefined;
    // A fast-forward only, through the commits sent: git refuses anything else itself.
    const forced = force === '+';
    if (source !== '' && !forced && old !== ZERO_ID && !descends(sends, source, old))
      return undefined;
    updates.push({ source, ref, old, new: source || ZERO_ID, forced });
  }
  if (updates.length === 0) return undefined;
  return { updates, atomic: options.includes('--atomic') };
}

/**
 * Makes the push `args` on `advertised`'s connection; undefined, having sent nothing, where git is
 * to make it (see ownPushUpdates, and capabilities the server lacks).
 */
export async function ownPush(
  args: readonly string[],
  advertised: Advertised,
  sends: readonly PackedObject[],
  signal: AbortSignal,
): Promise<CommandResult | undefined> {
  if (!advertised.refs) return undefined;
  const push = ownPushUpdates(args, advertised.refs, sends);
  const offered = capabilitiesOf(advertised.read);
  if (!push || !offered) return undefined;
  const { updates, atomic } = push;
  const deletes = updates.some((update) => update.new === ZERO_ID);
  const format = [...offered].find((capability) => capability.startsWith('object-format='));
  if (
    !offered.has('report-status') ||
    (atomic && !offered.has('atomic')) ||
    (deletes && !offered.has('delete-refs')) ||
    (format !== undefined && format !== 'object-format=sha1')
  )
    return undefined;
  const sideBand = offered.has('side-band-64k');
  const asked = [
    'report-status',
    ...(atomic ? ['atomic'] : []),
    ...(sideBand ? ['side-band-64k'] : []),
    ...(offered.has('quiet') ? ['quiet'] : []),
  ];
  const request = [
    ...updates.map(({ old, new: id, ref }, index) =>
      pktLine(`${old} ${id} ${ref}${index === 0 ? `\0 ${asked.join(' ')}` : ''}\n`),
    ),
    Buffer.from('0000'),
    // A pack follows unless every command deletes (send-pack.c's need_pack_data).
    ...(updates.every((update) => update.new === ZERO_ID) ? [] : [packOf(sends)]),
  ];
  const answer = await exchange(advertised.socket, Buffer.concat(request), sideBand, signal);
  return porcelain(updates, answer);
}

/** Whether commit `to` is reached from commit `from` through the first parents of `sends`. */
function descends(sends: readonly PackedObject[], from: string, to: string): boolean {
  const commits = new Map(
    sends.filter(({ type }) => type === 'commit').map(({ id, data }) => [id, data]),
  );
  for (let id = from, steps = 0; steps <= commits.size; steps++) {
    const data = commits.get(id);
    const parent = data && /^parent ([0-9a-f]{40})$/m.exec(data.toString('latin1'))?.[1];
    if (!parent) return false;
    if (parent === to) return true;
    id = parent;
  }
  return false;
}

/** The capabilities on the first line of a v0 advertisement (after its NUL). */
function capabilitiesOf(read: Buffer): Set<string> | undefined {
  try {
    for (const packet of packets(read)) {
      if (isFlush(packet)) return undefined;
      const text = packetText(packet);
      const nul = text.indexOf('\0');
      return nul < 0
        ? undefined
        : new Set(
            text
              .slice(nul + 1)
              .split(' ')
              .filter(Boolean),
          );
    }
  } catch {
    return undefined;
  }
  return undefined;
}

/** What receive-pack answered: its report's lines (undefined where it never came whole). */
interface Answer {
  report: string[] | undefined;
  /** What the server said on the side band (hooks, progress), a line each. */
  remote: string[];
  /** Stopped by the run's signal. */
  stopped: boolean;
}

/**
 * Writes `request` on `socket` and reads receive-pack's report, within side-band packets where
 * asked (band 1 the report, band 2 what the server says, band 3 its fatal error), until the server
 * ends the connection, as git does (hooks may still speak after the report).
 */
function exchange(
  socket: Socket,
  request: Buffer,
  sideBand: boolean,
  signal: AbortSignal,
): Promise<Answer> {
  return new Promise((resolve) => {
    let received = Buffer.alloc(0);
    let report = Buffer.alloc(0);
    let lines: string[] | undefined;
    let said = '';
    const done = (stopped = false) => {
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.off('close', onEnd);
      socket.off('error', onEnd);
      signal.removeEventListener('abort', onAbort);
      socket.destroy();
      const remote = said.split(/\r?\n|\r/).filter(Boolean);
      resolve({ report: stopped ? undefined : lines, remote, stopped });
    };
    const onData = (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (received.length > MAX_REPORT_BYTES) return done();
      try {
        if (!sideBand) {
          lines ??= reportLines(received);
          return;
        }
        let used = 0;
        for (const packet of packets(received)) {
          used += packet.length;
          if (isFlush(packet)) continue;
          const band = packet[4];
          const data = packet.subarray(5);
          if (band === 1) report = Buffer.concat([report, data]);
          else said += data.toString('utf8');
          // Band 3: the server's fatal error, and the end of the answer.
          if (band !== 1 && band !== 2) return done();
        }
        received = received.subarray(used);
        lines ??= reportLines(report);
      } catch {
        done();
      }
    };
    const onEnd = () => done();
    const onAbort = () => done(true);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    socket.on('data', onData);
    socket.once('end', onEnd);
    socket.once('close', onEnd);
    socket.on('error', onEnd);
    socket.ref();
    socket.resume();
    socket.write(request);
  });
}

/** A report's lines once its flush came; undefined before. */
function reportLines(data: Buffer): string[] | undefined {
  const lines: string[] = [];
  for (const packet of packets(data)) {
    if (isFlush(packet)) return lines;
    lines.push(packetText(packet));
  }
  return undefined;
}

/**
 * What `git push --porcelain` prints of `updates` given receive-pack's `answer`, and its exit code
 * (git's transport.c, print_ref_status, and send-pack.c).
 */
function porcelain(updates: readonly RefUpdate[], answer: Answer): CommandResult {
  const remote = answer.remote.map((line) => `remote: ${line}\n`).join('');
  if (answer.stopped)
    return {
      exitCode: null,
      signal: 'SIGTERM',
      stdout: Buffer.alloc(0),
      stderr: Buffer.from(remote),
    };
  if (!answer.report)
    return {
      exitCode: 128,
      signal: null,
      stdout: Buffer.from(`To ${SOCKET_REMOTE}\n`),
      stderr: Buffer.from(`${remote}fatal: the remote end hung up unexpectedly\n`),
    };
  const statuses = new Map<string, string | undefined>();
  for (const line of answer.report) {
    const ok = /^ok (\S+)$/.exec(line);
    const ng = /^ng (\S+) (.*)$/.exec(line);
    if (ok) statuses.set(ok[1]!, undefined);
    else if (ng) statuses.set(ng[1]!, ng[2]!);
  }
  let failed = false;
  const lines = updates.map(({ source, ref, old, new: id, forced }) => {
    const refs = `${source}:${ref}`;
    if (!statuses.has(ref)) {
      failed = true;
      return `!\t${refs}\t[remote failure] (remote failed to report status)`;
    }
    const reason = statuses.get(ref);
    if (reason !== undefined) {
      failed = true;
      return `!\t${refs}\t[remote rejected] (${reason})`;
    }
    if (id === ZERO_ID) return `-\t${refs}\t[deleted]`;
    if (old === ZERO_ID)
      return `*\t${refs}\t[new ${ref.startsWith('refs/heads/') ? 'branch' : 'reference'}]`;
    return forced
      ? `+\t${refs}\t${old.slice(0, 7)}...${id.slice(0, 7)} (forced update)`
      : ` \t${refs}\t${old.slice(0, 7)}..${id.slice(0, 7)}`;
  });
  const unpack = answer.report[0]?.replace(/^unpack /, '');
  const unpacked = unpack === 'ok' ? '' : `error: remote unpack failed: ${unpack}\n`;
  return {
    exitCode: failed ? 1 : 0,
    signal: null,
    stdout: Buffer.from(`To ${SOCKET_REMOTE}\n${lines.join('\n')}\n${failed ? '' : 'Done\n'}`),
    stderr: Buffer.from(
      `${remote}${unpacked}${failed ? `error: failed to push some refs to '${SOCKET_REMOTE}'\n` : ''}`,
    ),
  };
}
