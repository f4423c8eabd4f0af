/**
 * A worker process with the real providers, for crash tests. For the providers named in
 * PAUSE_AFTER_ENSURE, the lifecycle's real `ensureInstance` runs to completion (the instance
 * exists), then the harness prints `ENSURE_RETURNED <provider>` and never returns, so a test can
 * SIGKILL the process between the create and the status write. Without the variable it is a
 * plain reconcile worker.
 * Run as: node --import tsx test/support/crashing-worker.ts <egress worker flags…>
 */
import { Command } from 'commander';
import { runServerCommand } from '../../src/cli/commands/run-server.ts';
import { addServerOptions } from '../../src/cli/commands/server-commands.ts';
import type { ServerFlags } from '../../src/cli/server-config.ts';
import { createProvider, type ProviderFactory } from '../../src/providers/create-provider.ts';
import type { Instance, ProxyLifecycle } from '../../src/providers/lifecycle.ts';
import type { Provider } from '../../src/providers/types.ts';

const pauseAfterEnsure = (process.env.PAUSE_AFTER_ENSURE ?? '').split(',').filter(Boolean);

function pausing(provider: Provider, lifecycle: ProxyLifecycle): Provider {
  const paused: ProxyLifecycle = {
    async ensureInstance(spec, signal) {
      await lifecycle.ensureInstance(spec, signal);
      process.stdout.write(`ENSURE_RETURNED ${provider.name}\n`);
      return new Promise<Instance>(() => undefined);
    },
    getInstance: (name, placement, signal) => lifecycle.getInstance(name, placement, signal),
    deleteInstance: (name, placement, target, signal) => lifecycle.deleteInstance(name, placement, target, signal),
    listInstances: (fleet, signal) => lifecycle.listInstances(fleet, signal),
  };
  return {
    name: provider.name,
    type: provider.type,
    lifecycle: paused,
    targets: () => provider.targets(),
    check: (signal) => provider.check(signal),
    close: () => provider.close(),
  };
}

const factory: ProviderFactory = async (config, deps) => {
  const provider = await createProvider(config, deps);
  return pauseAfterEnsure.includes(config.name) && provider.lifecycle ? pausing(provider, provider.lifecycle) : provider;
};

const program = addServerOptions(new Command('crashing-worker'), { REDIS_URL: process.env.REDIS_URL }, 'worker');
program.action(async (flags: ServerFlags) => {
  const io = { out: (t: string) => process.stdout.write(t), err: (t: string) => process.stderr.write(t) };
  process.exitCode = await runServerCommand('worker', flags, io, { providerFactory: factory });
});
await program.parseAsync(process.argv);
