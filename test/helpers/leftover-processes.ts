// Finds processes a script run left behind: every process the run started (git and whatever git
// starts) inherits the run's unique TMPDIR, so /proc/*/environ names them even once orphaned.
import { readdir, readFile } from 'node:fs/promises';

export interface LeftoverProcess {
  pid: number;
  command: string;
}

export async function processesWithTmpdir(tmpdir: string): Promise<LeftoverProcess[]> {
  const marker = Buffer.from(`TMPDIR=${tmpdir}\0`);
  const found: LeftoverProcess[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const environ = await readFile(`/proc/${entry}/environ`);
      if (!environ.includes(marker)) continue;
      const stat = await readFile(`/proc/${entry}/stat`, 'utf8');
      // A zombie has exited; only its parent has not collected it yet.
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue;
      const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8');
      found.push({ pid: Number(entry), command: cmdline.split('\0').join(' ').trim() });
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return found;
}
