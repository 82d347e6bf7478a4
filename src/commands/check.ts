// `check`: the commits on the branch that touched the pool, oldest first.
import { join } from 'node:path';
import type { CommandContext } from '../context.js';
import { parseCheckRequest } from '../request.js';
import { requestSecrets } from '../request-secrets.js';
import { openSession, registerSecrets } from '../session.js';
import { BranchHistory } from '../branch-history.js';

export async function runCheck(ctx: CommandContext) {
  for (const secret of requestSecrets(ctx.stdin)) ctx.log.addSecret(secret);
  const { request, warnings } = parseCheckRequest(ctx.stdin);
  registerSecrets(request.source, ctx);
  for (const warning of warnings) ctx.log.info(warning);
  const { source, version } = request;
  const { git, environment } = await openSession(source, ctx);
  const history = new BranchHistory(
    git,
    join(environment.home, 'repository'),
    source.uri,
    source.branch,
  );
  await history.fetch();
  const tip = history.trackingRef;
  const pool = `${source.pool}/`;
  let range: string[] = ['-1', tip];
  if (version) {
    const commit = await history.tryResolve(version);
    if (commit && (await history.isAncestor(commit, tip))) {
      // Everything after the version's parents: the version itself (if it touched the pool) and
      // what came later. A root commit has no parents, so the whole history.
      range = ['--reverse', tip, '--not', `${commit}^@`];
    }
  }
  const out = await history.run(['log', '--format=%H', ...range, '--', pool]);
  return out
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean)
    .map((ref) => ({ ref }));
}
