// Finds and stops every process a git command started, however deep. simple-git signals only git
// itself (SIGINT); the programs git starts in turn (git-remote-http, ssh, upload-pack and
// receive-pack for local paths) do not all hear it, and an orphaned remote helper blocked on a
// silent server lives on forever (seen with git 2.39). They all inherit git's environment, whose
// HOME is a private folder unique to this run, so /proc names them even after they are orphaned.
// An immediate exit (second signal) has no time for that and stops the process tree instead.
import { readdirSync, readFileSync } from 'node:fs';
import { kill } from 'node:process';

/**
 * The one signal that stops git and its helpers: the one simple-git sends git on abort. A second,
 * different signal arriving while git's handler for the first still runs interrupts that handler,
 * and `git clone`'s (which removes the half-made repository: opendir, malloc) then waits forever
 * on the malloc lock the interrupted one holds (git 2.39.5: SIGINT and SIGTERM both blocked, two
 * handler frames, futex wait in malloc). The same signal again waits until the handler is done.
 * git removes its lock files on SIGINT as on SIGTERM. SIGKILL comes only after a grace period.
 */
export const GIT_STOP_SIGNAL = 'SIGINT' satisfies NodeJS.Signals;

/** Processes whose environment holds `HOME=home` (Linux /proc; elsewhere none are found). */
export function processesWithHome(home: string): number[] {
  const marker = Buffer.from(`\0HOME=${home}\0`);
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const found: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // A leading NUL makes the first variable match like every other one.
      const environ = Buffer.concat([Buffer.from([0]), readFileSync(`/proc/${entry}/environ`)]);
      if (environ.includes(marker)) found.push(Number(entry));
    } catch {
      // Exited meanwhile, or not ours to read.
    }
  }
  return found;
}

/** Every process below `root` (children, their children, …), from /proc's parent links. */
export function descendantsOf(root: number): number[] {
  const children = new Map<number, number[]>();
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // Fields after the command name, which may itself hold spaces and parentheses.
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(parent, [...(children.get(parent) ?? []), Number(entry)]);
    } catch {
      // Exited meanwhile.
    }
  }
  const found: number[] = [];
  for (let queue = [root]; queue.length > 0;) {
    const next = children.get(queue.pop()!) ?? [];
    found.push(...next);
    queue.push(...next);
  }
  return found;
}

/** Sends `signal` to every process of the run; returns how many were still there. */
export function signalProcessesWithHome(home: string, signal: NodeJS.Signals): number {
  return signalProcesses(processesWithHome(home), signal);
}

export function signalProcesses(pids: readonly number[], signal: NodeJS.Signals): number {
  let count = 0;
  for (const pid of pids) {
    try {
      kill(pid, signal);
      count++;
    } catch {
      // Already gone.
    }
  }
  return count;
}
