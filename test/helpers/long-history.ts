// Long histories for lock repositories, written straight into the bare repository with
// git fast-import (thousands of commits in well under a second).
import { execFile } from 'node:child_process';
import { GIT_TEST_ENV, git } from './lock-repo.js';

export interface FastCommit {
  message: string;
  /** fast-import file commands: `R from to`, `D path`, `M 100644 inline path` + `data`. */
  changes: string[];
  /** The commit's time (seconds since the epoch); by default one second after the one before. */
  time?: number;
}

/** Appends commits to `branch` of the bare repository; returns their ids, oldest first. */
export async function appendCommits(
  bare: string,
  branch: string,
  commits: readonly FastCommit[],
): Promise<string[]> {
  const parent = (await git(bare, 'rev-parse', `refs/heads/${branch}`)).trim();
  let time = Math.floor(Date.now() / 1000) - commits.length;
  const parts: string[] = [];
  commits.forEach((commit, index) => {
    const body = `${commit.message}\n`;
    parts.push(
      `commit refs/heads/${branch}\nmark :${index + 1}\n`,
      `committer Fixture <fixture@localhost> ${commit.time ?? time++} +0000\n`,
      `data ${Buffer.byteLength(body)}\n${body}`,
      index === 0 ? `from ${parent}\n` : '',
      ...commit.changes.map((line) => `${line}\n`),
      '\n',
    );
  });
  parts.push(...commits.map((_, index) => `get-mark :${index + 1}\n`));
  const out = await new Promise<string>((resolve, reject) => {
    const child = execFile(
      'git',
      ['fast-import', '--quiet', '--done'],
      { cwd: bare, env: GIT_TEST_ENV, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout) => (error ? reject(error) : resolve(stdout)),
    );
    child.stdin!.end(`${parts.join('')}done\n`);
  });
  return out.split('\n').filter(Boolean);
}

/** The fast-import commit of a claim of `name` in `pool`. */
export function claimCommit(pool: string, name: string): FastCommit {
  return {
    message: `claiming: ${name}`,
    changes: [`R ${pool}/unclaimed/${name} ${pool}/claimed/${name}`],
  };
}

/** The fast-import commit of a release of `name` in `pool`. */
export function releaseCommit(pool: string, name: string): FastCommit {
  return {
    message: `unclaiming: ${name}`,
    changes: [`R ${pool}/claimed/${name} ${pool}/unclaimed/${name}`],
  };
}

/** `count` commits that only touch another pool's lock (claim and release taking turns). */
export function otherPoolCommits(pool: string, name: string, count: number): FastCommit[] {
  return Array.from({ length: count }, (_, index) =>
    index % 2 === 0 ? claimCommit(pool, name) : releaseCommit(pool, name),
  );
}
