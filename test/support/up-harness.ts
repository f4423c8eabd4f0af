/**
 * `egress up` with test switches, taking the same flags:
 * - NO_PDEATHSIG=1: its private redis-server is started without the parent-death signal (what a
 *   machine without util-linux `setpriv --pdeathsig` gets), so `kill -9` leaves it running;
 * - HANG_PROVIDERS=a,b: checks of these providers never return; `CHECK_STARTED <provider>` is
 *   printed when one starts, so a test can stop the process with a job in flight.
 * Run as: node --import tsx test/support/up-harness.ts [up] <egress up flags…>
 */
import { Command } from 'commander';
import { runServerCommand } from '../../src/cli/commands/run-server.ts';
import { addServerOptions } from '../../src/cli/commands/server-commands.ts';
import type { ServerFlags } from '../../src/cli/server-config.ts';
import { factoryWithHanging } from './providers.ts';

const hang = (process.env.HANG_PROVIDERS ?? '').split(',').filter(Boolean);
const program = addServerOptions(new Command('up-harness'), {}, 'up');
program.action(async (flags: ServerFlags) => {
  const io = { out: (t: string) => process.stdout.write(t), err: (t: string) => process.stderr.write(t) };
  process.exitCode = await runServerCommand('up', flags, io, {
    ...(process.env.NO_PDEATHSIG === '1' ? { privateRedis: { dieWithOwner: false } } : {}),
    ...(hang.length > 0 ? { providerFactory: factoryWithHanging(hang, (provider) => process.stdout.write(`CHECK_STARTED ${provider}\n`)) } : {}),
  });
});
const args = process.argv.slice(2);
await program.parseAsync(args[0] === 'up' ? args.slice(1) : args, { from: 'user' });
