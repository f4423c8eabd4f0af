import { UsageError } from '../../errors.ts';
import type { Pool } from '../../model/pool-resource.ts';
import type { MemberSummary } from '../../pools/member-summary.ts';
import { documentList, yamlValues } from '../../proxies/parse-documents.ts';
import { ApiRequestError, type ApiClient } from '../api-client.ts';
import { age, renderStructured, renderTable, type CliIO } from '../output.ts';
import { parseOutput } from './client-commands.ts';

/** The documents of a file by kind, each with its number in the file (from 1). */
export interface DocumentsByKind {
  proxies: { value: unknown; number: number }[];
  pools: { value: unknown; number: number }[];
}

function isPool(value: unknown): boolean {
  return typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'ProxyPool';
}

/**
 * Splits a file of Proxy and ProxyPool documents by `kind` (none: Proxy, as always). Undefined when
 * the text is not YAML the CLI can read: the API then says what is wrong with it.
 */
export function splitByKind(text: string): DocumentsByKind | undefined {
  let read: ReturnType<typeof yamlValues>;
  try {
    read = yamlValues(text, (lines) => new UsageError(lines.join('; ')));
  } catch {
    return undefined;
  }
  const values = read.kind === 'set' ? documentList(read.value).map((value, i) => ({ value, number: i + 1 })) : read.values;
  return { proxies: values.filter((v) => !isPool(v.value)), pools: values.filter((v) => isPool(v.value)) };
}

/** A server's error line about the k-th document of a group, renumbered as the file counts it. */
function renumber(line: string, group: readonly { number: number }[]): string {
  if (group.length === 1) return `document ${group[0]?.number ?? 1}: ${line}`;
  return line.replace(/^document (\d+):/, (whole, k: string) => {
    const doc = group[Number(k) - 1];
    return doc ? `document ${doc.number}:` : whole;
  });
}

interface ApplyReply {
  items: { name: string; outcome: string }[];
}

/**
 * `egress apply -f` of a file holding ProxyPool documents (alone or mixed with Proxies). Pools
 * alone go as written. A mixed file is checked whole first (each kind by its own route with
 * `?dryRun=true`, every error of both reported together, numbered as in the file) and applied only
 * when both pass: Proxies, then ProxyPools. An object deleted between the check and the apply can
 * still refuse its part; the CLI then says what was applied.
 */
export async function applyWithPools(client: ApiClient, io: CliIO, text: string, docs: DocumentsByKind, signal: AbortSignal): Promise<number> {
  if (docs.proxies.length === 0) {
    const reply = await client.request<ApplyReply>('POST', '/v1/pools', signal, undefined, { body: text, contentType: 'application/yaml' });
    for (const item of reply.items) io.out(`proxypool/${item.name} ${item.outcome}\n`);
    return 0;
  }
  const groups = [
    { path: '/v1/proxies', kind: 'proxy', docs: docs.proxies },
    { path: '/v1/pools', kind: 'proxypool', docs: docs.pools },
  ] as const;
  const errors: string[] = [];
  for (const g of groups) {
    try {
      await client.request<ApplyReply>(
        'POST',
        `${g.path}?dryRun=true`,
        signal,
        g.docs.map((d) => d.value),
      );
    } catch (err) {
      if (!(err instanceof ApiRequestError) || err.status >= 500) throw err;
      if (err.errors.length > 0) errors.push(...err.errors.map((line) => renumber(line, g.docs)));
      else errors.push(err.message);
    }
  }
  if (errors.length > 0) {
    io.err(`error: rejected, nothing applied:\n  ${errors.join('\n  ')}\n`);
    return 1;
  }
  for (const g of groups) {
    const reply = await client.request<ApplyReply>(
      'POST',
      g.path,
      signal,
      g.docs.map((d) => d.value),
    );
    for (const item of reply.items) io.out(`${g.kind}/${item.name} ${item.outcome}\n`);
  }
  return 0;
}

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
    String(p.metadata.deletionRequestedAt ? 0 : p.spec.replicas),
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

/** How a pool is named on the command line: `pool`, `pools`, `proxypool`, `proxypools`. */
export const POOL_TYPES: readonly string[] = ['pool', 'pools', 'proxypool', 'proxypools'];
