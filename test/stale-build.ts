// Vitest global setup: the end-to-end tests run assets/*, which load dist/. A run after editing
// src/ without `npm run build` would test the old code and pass or fail for the wrong reason, so
// a dist/ older than any source file is rebuilt first. An installed payload
// (POOL_RESOURCE_ASSETS, the image's tests stage) is what it is and is left alone.
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..');

/** The newest modification time of the files below `dir` (0 when there is none). */
function newest(dir: string, suffix: string): number {
  let latest = 0;
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true, recursive: true });
  } catch {
    return 0;
  }
  for (const entry of entries) {
    if (!entry.isFile() || !entry.name.endsWith(suffix)) continue;
    latest = Math.max(latest, statSync(join(entry.parentPath, entry.name)).mtimeMs);
  }
  return latest;
}

/** Whether dist/ misses a build of the current src/ (exported for its test). */
export function isStale(root: string): boolean {
  const built = newest(join(root, 'dist'), '.js');
  return built === 0 || newest(join(root, 'src'), '.ts') > built;
}

export default function setup(): void {
  if (process.env.POOL_RESOURCE_ASSETS || !isStale(ROOT)) return;
  process.stderr.write('dist/ is older than src/: building it before the tests\n');
  execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', ROOT], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
}
