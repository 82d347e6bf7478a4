import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Rebuilds a dist/ older than src/ before any test spawns assets/* (test/stale-build.ts).
    globalSetup: ['test/stale-build.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration tests spawn git, daemons and the resource scripts: two cores, so keep it modest.
    maxWorkers: 2,
    // `--tags-filter=soak` runs only the soak test (size from SOAK_ROUNDS), `--tags-filter='!soak'` skips it.
    tags: [{ name: 'soak', description: 'many workers over few locks through the real scripts' }],
  },
});
