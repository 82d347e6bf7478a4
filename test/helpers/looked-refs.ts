// What a put waiting in line looks at (the branch and the pool's line), and lock repositories
// shaped around it as a hosted one is: shared by the tests of the looks over HTTP(S), SSH and
// git:// (http-refs, ssh-refs, daemon-refs).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { git, type LockRepo } from './lock-repo.js';

/** What a put waiting in pool "pool" on branch master looks at: the branch and the line. */
export const LOOKED = ['refs/heads/master', 'refs/pool-resource/waiting/master/pool/'];

/** The ref of a waiting-line entry in pool "pool". */
export const LINE_ENTRY = `${LOOKED[1]}1-1000-abc`;

/**
 * Puts one entry in `repo`'s line (LINE_ENTRY, at the tip) and `pulls` pull requests' refs, as a
 * hosted repository advertises a pair per pull request; returns the tip they point at.
 */
export async function withHostedRefs(repo: LockRepo, pulls: number): Promise<string> {
  const tip = await repo.tip();
  await git(repo.bare, 'update-ref', LINE_ENTRY, tip);
  await new Promise<void>((resolve, reject) => {
    const child = spawn('git', ['update-ref', '--stdin'], { cwd: repo.bare });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`exit ${code}`))));
    child.stdin.end(
      Array.from({ length: pulls }, (_, n) => `create refs/pull/${n}/head ${tip}\n`).join(''),
    );
  });
  return tip;
}

/** A sha256 bare repository in `root` with one commit on master: its path and that commit. */
export async function sha256Repository(root: string): Promise<{ bare: string; tip: string }> {
  const bare = join(root, 'sha256.git');
  await git(root, 'init', '--quiet', '--bare', '--object-format=sha256', bare);
  const work = join(root, 'sha256-work');
  await git(root, 'init', '--quiet', '--object-format=sha256', work);
  await git(work, 'commit', '--quiet', '--allow-empty', '-m', 'initial pools');
  await git(work, 'push', '--quiet', bare, 'HEAD:refs/heads/master');
  return { bare, tip: (await git(bare, 'rev-parse', 'master')).trim() };
}
