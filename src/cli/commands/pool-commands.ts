import { UsageError } from '../../errors.ts';
import type { Pool } from '../../model/pool-resource.ts';
import type { MemberSummary } from '../../pools/member-summary.ts';
import type { ApiClient } from '../api-client.ts';
import { age, renderStructured, renderTable, type CliIO } from '../output.ts';
import { parseOutput } from './client-commands.ts';
import { POOL_TYPES } from '../resource-types.ts';

type PoolView = Pool & { members?: MemberSummary };

/** `egress get pools [NAME]`: NAME DESIRED READY ROTATING FAILED AGE, or the objects (`-o json|yaml`; one pool with its members). */
export async function getPools(client: ApiClient, io: CliIO, name: string | undefined, output: string | undefined, signal: AbortSignal): Promise<number> {
  const format = parseOutput(output, ['table', 'json', 'yaml']);
  const items = name
    ? [await client.request<PoolView>('GET', `/v1/pools/${encodeURIComponent(name)}`, signal)]
    : (await client.request<{ items: PoolView[] }>('GET', '/v1/pools', signal)).items;
  if (format === 'json' || format === 'yaml') {
    io.out(renderStructured(name ? items[0] : { items }, format));
    return 0;
  }
  if (items.length === 0) {
    io.err('No pools found\n');
    return 0;
  }
  const rows = items.map((p) => [
    p.name,
    String(p.metadata.deletionRequestedAt ? 0 : p.spec.autoscale ? p.status.desired : (p.spec.replicas ?? 0)),
    String(p.status.ready),
    String(p.status.rotating),
    String(p.status.failed),
    age(p.metadata.createdAt),
  ]);
  io.out(renderTable(['NAME', 'DESIRED', 'READY', 'ROTATING', 'FAILED', 'AGE'], rows));
  return 0;
}

export async function deletePool(client: ApiClient, io: CliIO, name: string, signal: AbortSignal): Promise<number> {
  await client.request('DELETE', `/v1/pools/${encodeURIComponent(name)}`, signal);
  io.out(`proxypool/${name} deletion requested (its members are deleted first)\n`);
  return 0;
}

/** `egress rotate pool NAME`: every current member is replaced, surge-first. */
export async function rotatePool(client: ApiClient, io: CliIO, kind: string, name: string, signal: AbortSignal): Promise<number> {
  if (!POOL_TYPES.includes(kind)) throw new UsageError(`rotate: unknown resource type "${kind.slice(0, 40)}" (known: pool)`);
  const reply = await client.request<{ members: number; requested: number }>('POST', `/v1/pools/${encodeURIComponent(name)}/rotate`, signal);
  io.out(`proxypool/${name} rotation requested (${reply.members} members to replace, surge-first)\n`);
  return 0;
}
