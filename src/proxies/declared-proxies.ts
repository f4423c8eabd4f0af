/**
 * Proxies a provider declares itself (an `upstream` provider: one per endpoint it lists), kept in
 * the store while they are declared. Level-triggered and idempotent: each run applies every
 * declared proxy (created when missing, its labels put back when changed) and asks for the deletion
 * of the proxies this provider declared before and no longer does; a reconcile of each one changed
 * is asked for. A proxy being deleted is left to finish (the next run makes it again if declared).
 */
import type { Logger } from '../logging.ts';
import type { ProxyReader, ProxySpecWriter } from '../store/proxy-store.ts';
import { ProxyTerminatingError } from '../store/proxy-store.ts';

/** The label that marks a Proxy as declared by a provider (its value: the provider's name). */
export const DECLARED_BY_LABEL = 'egress-proxies.io/declared-by';

export interface DeclaredProxySpec {
  name: string;
  labels: Record<string, string>;
}

export interface DeclaredProxiesDeps {
  proxies: ProxyReader & ProxySpecWriter;
  requestReconcile: (proxy: string) => Promise<void>;
  logger: Logger;
}

export interface DeclaredSync {
  created: string[];
  configured: string[];
  deleted: string[];
}

/** Makes the store hold exactly the proxies `provider` declares now (`declared`), among those it declared. */
export async function syncDeclaredProxies(
  provider: string,
  declared: readonly DeclaredProxySpec[],
  deps: DeclaredProxiesDeps,
  signal: AbortSignal,
): Promise<DeclaredSync> {
  const out: DeclaredSync = { created: [], configured: [], deleted: [] };
  const wanted = new Set(declared.map((d) => d.name));
  for (const d of declared) {
    signal.throwIfAborted();
    try {
      const { outcome } = await deps.proxies.apply(
        { metadata: { name: d.name, labels: { ...d.labels, [DECLARED_BY_LABEL]: provider } }, spec: { provider } },
        signal,
      );
      if (outcome === 'unchanged') continue;
      (outcome === 'created' ? out.created : out.configured).push(d.name);
      await deps.requestReconcile(d.name);
    } catch (err) {
      if (!(err instanceof ProxyTerminatingError)) throw err;
    }
  }
  for (const p of await deps.proxies.list(signal)) {
    if (p.labels[DECLARED_BY_LABEL] !== provider || wanted.has(p.name) || p.metadata.deletionRequestedAt !== undefined) continue;
    signal.throwIfAborted();
    await deps.proxies.requestDeletion(p.name, {}, signal);
    await deps.requestReconcile(p.name);
    out.deleted.push(p.name);
  }
  if (out.created.length + out.configured.length + out.deleted.length > 0) deps.logger.info({ provider, ...out }, 'declared proxies synced');
  return out;
}
