// Finds and stops every process a git command started, however deep. simple-git signals only git
// itself (SIGINT); the programs git starts in turn (git-remote-http, ssh, upload-pack and
// receive-pack for local paths) do not all hear it, and an orphaned remote helper blocked on a
// silent server lives on forever (seen with git 2.39). They all inherit git's environment, whose
// HOME is a private folder unique to this run, so /proc names them even after they are orphaned.
import { readdirSync, readFileSync } from 'node:fs';
import { kill } from 'node:process';

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

/** Sends `signal` to every process of the run; returns how many were still there. */
export function signalProcessesWithHome(home: string, signal: NodeJS.Signals): number {
  let count = 0;
  for (const pid of processesWithHome(home)) {
    try {
      kill(pid, signal);
      count++;
    } catch {
      // Already gone.
    }
  }
  return count;
}
