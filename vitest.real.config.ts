import { defineConfig } from 'vitest/config';

// `npm run test:real`: the suites that run the project's files for real on this machine (test/real/):
// proxy VMs (scripts/vm-image.sh, the KVM test host: a kvm Proxy through the roles, the gcp user-data), and podman
// building and running the images (root; scripts/container-stand-ins.sh). One file at a time: each is
// mostly boots, builds and container start-ups competing for the same two cores.
export default defineConfig({
  test: {
    include: ['test/real/**/*.test.ts'],
    fileParallelism: false,
    maxWorkers: 1,
    globalSetup: ['test/support/global-setup.ts'],
    setupFiles: ['test/support/temp-dirs-cleanup.ts'],
    testTimeout: 20 * 60_000,
    hookTimeout: 30 * 60_000,
    reporters: ['default'],
    env: { EGRESS_FROM_SOURCE: '1' },
  },
});
