import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    fileParallelism: false,
    globalSetup: ['test/support/global-setup.ts'],
    // Every test file removes the temporary directories it made (test/support/temp-dirs.ts).
    setupFiles: ['test/support/temp-dirs-cleanup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
    // bin/egress.js runs the sources under test, not a dist/ a previous `npm run build` left behind.
    env: { EGRESS_FROM_SOURCE: '1' },
  },
});
