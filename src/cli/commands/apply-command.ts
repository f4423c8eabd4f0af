import { readFile } from 'node:fs/promises';
import { UsageError } from '../../errors.ts';
import { documentList, yamlValues } from '../../proxies/parse-documents.ts';
import { ApiRequestError, type ApiClient } from '../api-client.ts';
import type { CliIO } from '../output.ts';

/**
 * `egress apply -f FILE` (`-` for standard input): one or many Proxy documents, all or nothing; a
 * file holding ProxyPool documents (`kind: ProxyPool`, alone or mixed with Proxies) goes through
 * `applyWithPools`.
 */
export async function applyProxies(
  client: ApiClient,
  io: CliIO,
  file: string | undefined,
  readStdin: () => Promise<string>,
  signal: AbortSignal,
): Promise<number> {
  if (!file) throw new UsageError('apply: -f/--filename is required');
  let text: string;
  try {
    text = file === '-' ? await readStdin() : await readFile(file, 'utf8');
  } catch (err) {
    throw new UsageError(`-f ${file}: cannot read: ${(err as Error).message}`);
  }
  const byKind = splitByKind(text);
  if (byKind && byKind.pools.length > 0) return applyWithPools(client, io, text, byKind, signal);
  const reply = await client.request<{ items: { name: string; outcome: string }[] }>('POST', '/v1/proxies', signal, undefined, {
    body: text,
    contentType: 'application/yaml',
  });
  for (const item of reply.items) io.out(`proxy/${item.name} ${item.outcome}\n`);
  return 0;
}

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
