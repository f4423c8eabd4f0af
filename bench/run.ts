/**
 * Runs a benchmark by name: `npm run bench -- pipeline`. Each bench prints a Markdown table
 * and one JSON line; docs/benchmarks.md records the figures with the machine and command.
 */
const benches: Record<string, () => Promise<unknown>> = {
  pipeline: async () => (await import('./pipeline.bench.ts')).runPipelineBench(),
  tracing: async () => (await import('./tracing.bench.ts')).runTracingBench(),
  'health-round': async () => (await import('./health-round.bench.ts')).runHealthRoundBench(),
  'proxy-lifecycle': async () => (await import('./proxy-lifecycle.bench.ts')).runProxyLifecycleBench(),
  reconcile: async () => (await import('./reconcile.bench.ts')).runReconcileBench(),
  'kvm-rpc': async () => (await import('./kvm-rpc.bench.ts')).runKvmRpcBench(),
  eviction: async () => (await import('./eviction.bench.ts')).runEvictionBench(),
  cli: async () => (await import('./cli.bench.ts')).runCliBench(),
  'gc-scale': async () => (await import('./gc-scale.bench.ts')).runGcScaleBench(),
  'local-scale': async () => (await import('./local-scale.bench.ts')).runLocalScaleBench(),
  'data-plane': async () => (await import('./data-plane.bench.ts')).runDataPlaneBench(),
  pick: async () => (await import('./pick.bench.ts')).runPickBench(),
  console: async () => (await import('./console.bench.ts')).runConsoleBench(),
};

const name = process.argv[2];
const run = name ? benches[name] : undefined;
if (!run) {
  console.error(`usage: npm run bench -- <${Object.keys(benches).join('|')}>`);
  process.exitCode = 2;
} else {
  await run();
}
