import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration tests spawn git, daemons and the resource scripts: two cores, so keep it modest.
    maxWorkers: 2,
  },
});
