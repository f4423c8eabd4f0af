/**
 * A worker process whose checks of the providers named in HANG_PROVIDERS never return. It
 * prints `CHECK_STARTED <provider>` when such a check starts, so a test can kill it mid-job.
 * Run as: node --import tsx test/support/hanging-worker.ts <egress worker flags…>
 */
import { Command } from 'commander';
import { runServerCommand } from '../../src/cli/commands/run-server.ts';
import { addServerOptions } from '../../src/cli/commands/server-commands.ts';
import type { ServerFlags } from '../../src/cli/server-config.ts';
import { factoryWithHanging } from './providers.ts';

const hang = (process.env.HANG_PROVIDERS ?? '').split(',').filter(Boolean);
const program = addServerOptions(new Command('hanging-worker'), { REDIS_URL: process.env.REDIS_URL }, 'worker');
program.action(async (flags: ServerFlags) => {
  const io = { out: (t: string) => process.stdout.write(t), err: (t: string) => process.stderr.write(t) };
  process.exitCode = await runServerCommand('worker', flags, io, {
    providerFactory: factoryWithHanging(hang, (provider) => process.stdout.write(`CHECK_STARTED ${provider}\n`)),
  });
});
await program.parseAsync(process.argv);
