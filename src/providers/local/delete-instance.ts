/**
 * The delete path of the local lifecycle: an instance recorded for the expected owner is unwatched,
 * marked as being deleted, stopped (on the proxy host, and any proxy process of the earlier model),
 * and its directory and source address released. A directory with no intent is not ours: only an
 * empty one (a create that died right after making it) is removed.
 */
import { rm, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import { ForeignInstanceError, foreignOwner, type DeleteTarget } from '../lifecycle.ts';
import { LocalInstanceError } from './instance-error.ts';
import { DELETING_FILE, instanceDir, writeFileAtomic } from './instance-files.ts';
import { NAME_PATTERN, readState } from './instance-state.ts';
import { legacyProcesses, stopLegacy } from './legacy-proxies.ts';
import type { LocalContext } from './lifecycle-context.ts';

/** `stopGraceMs`: how long a SIGTERM'd proxy process of the earlier model gets before SIGKILL. */
export async function deleteLocalInstance(ctx: LocalContext, name: string, target: DeleteTarget, stopGraceMs: number, signal: AbortSignal): Promise<void> {
  const { logger } = ctx;
  if (!NAME_PATTERN.test(name)) return;
  const dir = instanceDir(ctx.dataDir, name);
  const { intent, record } = await readState(dir);
  const foreign = intent ? foreignOwner(intent.owner, target.owner) : undefined;
  if (foreign) {
    logger.warn({ instance: name, reason: foreign }, 'local instance is not ours; not deleting it');
    throw new ForeignInstanceError(name, `local instance: ${foreign}`);
  }
  const pids = await legacyProcesses(dir, record);
  if (!intent && !record && pids.size === 0) {
    // No intent recorded: not an instance of ours. Only an empty directory (a create that died
    // right after making it) is removed; anything else there is left as it is.
    await rmdir(dir).catch(() => undefined);
    return;
  }
  // A deletion is not an exit to report; a host restarting meanwhile does not bring it back.
  ctx.deletions.begin(name);
  ctx.exits.unwatch(name);
  await writeFileAtomic(join(dir, DELETING_FILE), `${new Date().toISOString()}\n`);
  await stopLegacy(name, dir, pids, signal, stopGraceMs);
  // Returns once the host closed the listener (no host running: nothing listens).
  const answer = await ctx.host.call('DELETE', `/proxies/${name}`, false, signal);
  if (answer && answer.status !== 200) throw new LocalInstanceError(`the proxy host could not stop "${name}": status ${answer.status}`);
  await rm(dir, { recursive: true, force: true });
  await ctx.addresses?.release(name, intent?.sourceAddress);
  logger.info({ instance: name, port: record?.port, pids: [...pids] }, 'local instance deleted');
}
