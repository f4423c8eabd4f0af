/**
 * `egress up` whose private redis-server is started without the parent-death signal: what a
 * machine without util-linux `setpriv --pdeathsig` gets. Killing it with -9 leaves the
 * redis-server running, the orphan the next start must deal with.
 * Run as: node --import tsx test/support/up-without-pdeathsig.ts <egress up flags…>
 */
import { Command } from 'commander';
import { runServerCommand } from '../../src/cli/commands/run-server.ts';
import { addServerOptions } from '../../src/cli/commands/server-commands.ts';
import type { ServerFlags } from '../../src/cli/server-config.ts';

const program = addServerOptions(new Command('up-without-pdeathsig'), {}, 'up');
program.action(async (flags: ServerFlags) => {
  const io = { out: (t: string) => process.stdout.write(t), err: (t: string) => process.stderr.write(t) };
  process.exitCode = await runServerCommand('up', flags, io, { privateRedis: { dieWithOwner: false } });
});
// Takes the same arguments as `egress up`, with or without the `up`.
const args = process.argv.slice(2);
await program.parseAsync(args[0] === 'up' ? args.slice(1) : args, { from: 'user' });
