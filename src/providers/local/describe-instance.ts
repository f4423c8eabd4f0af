/**
 * A local instance as an Instance, from its files and the processes serving it: running on the proxy
 * host (or on a proxy process of the earlier model), provisioning, or failed with the reason. Every
 * running proxy described is watched for its exit, one adopted from an earlier worker too.
 */
import { observerFailure } from '../../observer-errors.ts';
import type { Instance } from '../lifecycle.ts';
import type { InstanceRecord, IntentRecord } from './instance-files.ts';
import { failure, hostedWatched, hostInstanceId } from './instance-state.ts';
import { legacyAlive, legacyInstanceId, legacyProcessFor, legacyWatched } from './legacy-proxies.ts';
import { watchUnlessDeleted, type LocalContext } from './lifecycle-context.ts';
import { isHostProcess } from './process-table.ts';

/**
 * `mark`: the deletion mark of the name read before the look began (deletion-marks.ts); `hostPid`: the
 * host that just answered for the proxy, when known (spares looking it up).
 */
export async function describeInstance(
  ctx: LocalContext,
  dir: string,
  intent: IntentRecord,
  record: InstanceRecord | undefined,
  mark: number | undefined,
  hostPid?: number,
): Promise<Instance> {
  const { dataDir } = ctx;
  const base = {
    name: intent.name,
    owner: intent.owner,
    createdAt: intent.createdAt,
    ...(intent.placement === undefined ? {} : { placement: intent.placement }),
  };
  if (record?.host === true && (hostPid === record.pid || (await isHostProcess(record.pid, dataDir)))) {
    // Every running proxy we describe is watched, so one adopted from an earlier worker is too.
    watchUnlessDeleted(ctx, hostedWatched(dataDir, intent, record), mark);
    return { ...base, id: hostInstanceId(record), state: 'running', endpoint: { host: '127.0.0.1', port: record.port } };
  }
  if (await legacyAlive(dir, record)) {
    watchUnlessDeleted(ctx, legacyWatched(dir, intent.name, intent.owner, record!), mark);
    return { ...base, id: legacyInstanceId(record!), state: 'running', endpoint: { host: '127.0.0.1', port: record!.port } };
  }
  const starting = await legacyProcessFor(dir);
  if (starting !== undefined) return { ...base, id: String(starting), state: 'provisioning' };
  // Out of descriptors here says nothing about the proxy: the look fails (retried), it is not "failed".
  const running = await ctx.host.running(AbortSignal.timeout(5000)).catch((err: unknown) => {
    if (observerFailure('the proxy host', err)) throw err;
    return undefined;
  });
  if (running && record) {
    // The host that served it is gone and a new one runs: it brings the proxy back (or the next ensure asks it to).
    return { ...base, id: '', state: 'provisioning', message: `proxy host ${record.pid} is no longer running; host ${running.pid} restarts the proxy` };
  }
  const { id, message } = await failure(dataDir, dir, intent, record);
  return { ...base, id, state: 'failed', message };
}
