import { defineConfig } from 'vitest/config';

/**
 * The tests `npm run mutation` (StrykerJS, stryker.config.json) runs against each mutant: only fast
 * in-process ones covering the mutated modules — no libvirt, no child processes, and none that runs the
 * whole CLI (runCli costs seconds a file, and a mutant re-runs every file covering it). The pick tests use
 * the run's private Redis (global setup), nothing else does. Keep this list in step with `mutate`
 * in stryker.config.json; docs/testing.md has the scores.
 */
export default defineConfig({
  test: {
    include: ['test/mutation-kills/**/*.test.ts', 'test/publisher/next-status.test.ts', 'test/egress/policy.test.ts', 'test/config/gc-delete-rate.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    setupFiles: ['test/support/temp-dirs-cleanup.ts'],
    // One worker for every file and every mutant, its modules kept: a mutant is switched on at run
    // time, so re-importing the module graph for each of ~1 600 mutants is pure cost.
    isolate: false,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    env: { EGRESS_FROM_SOURCE: '1' },
  },
});
