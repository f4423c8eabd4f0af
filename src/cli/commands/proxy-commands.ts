import { UsageError } from '../../errors.ts';
import type { ProxyView } from '../../proxies/discovery.ts';
import type { ApiClient } from '../api-client.ts';
import { age, renderStructured, renderTable, type CliIO } from '../output.ts';
import { parseOutput } from './client-commands.ts';

export async function getProxies(client: ApiClient, io: CliIO, name: string | undefined, output: string | undefined, signal: AbortSignal): Promise<number> {
  const format = parseOutput(output, ['table', 'json', 'yaml', 'wide']);
  const items = name
    ? [await client.request<ProxyView>('GET', `/v1/proxies/${encodeURIComponent(name)}`, signal)]
    : (await client.request<{ items: ProxyView[] }>('GET', '/v1/proxies', signal)).items;
  if (format === 'json' || format === 'yaml') {
    io.out(renderStructured(name ? items[0] : { items }, format));
    return 0;
  }
  if (items.length === 0) {
    io.err('No proxies found\n');
    return 0;
  }
  const wide = format === 'wide';
  const headers = ['NAME', 'PROVIDER', 'PHASE', 'URL', 'AGE', ...(wide ? ['PLACEMENT', 'INSTANCE', 'EGRESS IP', 'LABELS', 'LAST ERROR'] : [])];
  const rows = items.map((p) => [
    p.name,
    p.spec.provider,
    p.status.phase,
    p.status.url ?? '',
    age(p.metadata.createdAt),
    ...(wide
      ? [
          p.spec.placement ?? '',
          p.status.instanceName ?? '',
          p.status.egressIp ?? '',
          Object.entries(p.labels)
            .map(([k, v]) => `${k}=${v}`)
            .join(','),
          p.status.lastError ?? '',
        ]
      : []),
  ]);
  io.out(renderTable(headers, rows));
  return 0;
}

export async function deleteProxy(
  client: ApiClient,
  io: CliIO,
  kind: string,
  name: string,
  options: { orphan?: boolean },
  signal: AbortSignal,
): Promise<number> {
  if (kind !== 'proxy' && kind !== 'proxies') throw new UsageError(`delete: unknown resource type "${kind}" (known: proxy, pool)`);
  await client.request('DELETE', `/v1/proxies/${encodeURIComponent(name)}${options.orphan ? '?orphan=true' : ''}`, signal);
  io.out(options.orphan ? `proxy/${name} deletion requested (its instance is left in place)\n` : `proxy/${name} deletion requested\n`);
  return 0;
}
