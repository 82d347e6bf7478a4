import { defineConfig } from 'vitest/config';

/**
 * Files that assert timings (a stop within 1 s, EOF within 1 s of a signal, a bounded stall): they run
 * after everything else, one file at a time, so no concurrent suite shares the two cores with
 * them and a slow machine does not fail them for the wrong reason.
 */
const TIMING = [
  'test/integration/stopping.test.ts',
  'test/integration/stdin.test.ts',
  'test/integration/out-line.test.ts',
  'test/integration/pool-cli.test.ts',
  'test/integration/transport-lifecycle.test.ts',
  'test/chroot/**/*.test.ts',
  // How long a lock stands free behind killed puts (one grace and a hand-over), and holds under a
  // 6 s lease: beside another suite on two cores, the hand-over alone can take most of that.
  'test/soak/soak-kills.test.ts',
];

export default defineConfig({
  test: {
    // Rebuilds a dist/ older than src/ before any test spawns assets/* (test/stale-build.ts), and
    // gives the run a TMPDIR of its own (test/own-tmpdir.ts).
    globalSetup: ['test/stale-build.ts', 'test/own-tmpdir.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration tests spawn git, daemons and the resource scripts: two cores, so keep it modest.
    maxWorkers: 2,
    // `--tags-filter=soak` runs only the soak test (size from SOAK_ROUNDS), `--tags-filter='!soak'` skips it.
    tags: [{ name: 'soak', description: 'many workers over few locks through the real scripts' }],
    projects: [
      {
        extends: true,
        test: { name: 'suite', include: ['test/**/*.test.ts'], exclude: TIMING },
      },
      {
        extends: true,
        test: {
          name: 'timing',
          include: TIMING,
          sequence: { groupOrder: 1 },
          fileParallelism: false,
        },
      },
    ],
  },
});
