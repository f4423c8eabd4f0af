import { Hono, type Context } from 'hono';
import { NotFoundError } from '../../errors.ts';
import { matches, etagOf, withProxyUrl, type DiscoveryFilter } from '../../proxies/discovery.ts';
import { parseProxyDocuments, validateProxyDocuments } from '../../proxies/parse-documents.ts';
import type { ProxyDocument } from '../../model/proxy-resource.ts';
import { ProxyTerminatingError, type ProxyApiStore } from '../../store/proxy-store.ts';
import { BadRequestError } from '../http-errors.ts';
import { readDocumentBody } from '../document-body.ts';
import type { WorkRequests } from '../../work/work-requests.ts';
import { noEvents, type EventSink } from '../../events/event-sink.ts';
import { callerName } from '../../http/auth.ts';
import { applied, deletionRequested } from '../../events/proxy-events.ts';
import { fencedWrite, writeApplied } from '../write-deadline.ts';

export interface ProxyRouteDeps {
  proxies: ProxyApiStore;
  providers: readonly string[];
  /** Where applies and deletions ask for their proxy's reconcile. */
  work: Pick<WorkRequests, 'reconcileProxy'>;
  /** Records applies and deletions with the caller's token name. */
  events?: EventSink;
}

function parseFilter(c: Context): DiscoveryFilter {
  const ready = c.req.query('ready');
  if (ready !== undefined && ready !== 'true' && ready !== 'false') throw new BadRequestError(`query parameter "ready" must be true or false, got "${ready}"`);
  const labels = (c.req.queries('label') ?? []).map((l): [string, string] => {
    const eq = l.indexOf('=');
    if (eq <= 0) throw new BadRequestError(`query parameter "label" must be key=value, got "${l}"`);
    return [l.slice(0, eq), l.slice(eq + 1)];
  });
  return { ready: ready === undefined ? undefined : ready === 'true', provider: c.req.query('provider'), labels };
}

/** `?dryRun=true|false` (absent: false). */
export function dryRun(c: Context): boolean {
  const value = c.req.query('dryRun');
  if (value !== undefined && value !== 'true' && value !== 'false')
    throw new BadRequestError(`query parameter "dryRun" must be true or false, got "${value.slice(0, 40)}"`);
  return value === 'true';
}

function readDocuments(c: Context, providers: readonly string[]): Promise<ProxyDocument[]> {
  return readDocumentBody(
    c,
    (value) => validateProxyDocuments(value, { providers }),
    (text) => parseProxyDocuments(text, { providers }),
  );
}

/** `/v1/proxies`: apply, list (discovery), get, delete. */
export function proxyRoutes(deps: ProxyRouteDeps): Hono {
  const app = new Hono();
  const events = deps.events ?? noEvents;
  app.post('/proxies', async (c) => {
    const signal = fencedWrite(c);
    // Every error of every document at once, an unknown provider's included.
    const docs = await readDocuments(c, deps.providers);
    // All or nothing here too: a document naming a proxy still being deleted stops the whole
    // request before anything is written (a deletion racing this check is still refused per proxy).
    const current = await deps.proxies.getMany(
      docs.map((d) => d.metadata.name),
      signal,
    );
    const terminating = current.flatMap((p) => (p?.metadata.deletionRequestedAt ? [p.name] : []));
    if (terminating.length > 0) throw new ProxyTerminatingError(terminating, docs.length);
    // `?dryRun=true`: every check, nothing written (`egress apply` checks a file of Proxies and ProxyPools whole first).
    if (dryRun(c)) return c.json({ items: docs.map((d) => ({ name: d.metadata.name, outcome: 'valid' })), dryRun: true });
    const items = [];
    for (const doc of docs) {
      const { proxy, outcome } = await deps.proxies.apply(doc, signal);
      const item = { name: proxy.name, outcome, generation: proxy.metadata.generation };
      writeApplied(c, item);
      items.push(item);
      if (outcome !== 'unchanged') {
        events.record(applied(proxy, outcome, callerName(c)));
        // Unfenced (BullMQ), and harmless if late: a reconcile is idempotent and carries only the name.
        await deps.work.reconcileProxy(proxy.name);
      }
    }
    return c.json({ items });
  });

  app.get('/proxies', async (c) => {
    const filter = parseFilter(c);
    const format = c.req.query('format') ?? 'json';
    if (format !== 'json' && format !== 'text') throw new BadRequestError(`query parameter "format" must be json or text, got "${format}"`);
    const scheme = c.req.query('scheme') ?? 'http';
    if (scheme !== 'http' && scheme !== 'socks5') throw new BadRequestError(`query parameter "scheme" must be http or socks5, got "${scheme.slice(0, 40)}"`);
    const selected = (await deps.proxies.list()).filter((p) => matches(p, filter));
    const secrets = await deps.proxies.credentialsOf(selected.map((p) => p.name));
    const views = selected.map((p, i) => withProxyUrl(p, secrets[i], scheme));
    const body = format === 'text' ? views.flatMap((v) => (v.proxyUrl ? [`${v.proxyUrl}\n`] : [])).join('') : JSON.stringify({ items: views });
    const etag = etagOf(body);
    c.header('ETag', etag);
    c.header('Cache-Control', 'no-cache');
    if (c.req.header('if-none-match') === etag) return c.body(null, 304);
    return c.body(body, 200, { 'Content-Type': format === 'text' ? 'text/plain; charset=utf-8' : 'application/json' });
  });

  app.get('/proxies/:name', async (c) => {
    const name = c.req.param('name');
    const proxy = await deps.proxies.get(name);
    if (!proxy) throw new NotFoundError('proxy', name);
    return c.json(withProxyUrl(proxy, await deps.proxies.credentials(name)));
  });

  app.delete('/proxies/:name', async (c) => {
    const orphan = c.req.query('orphan');
    if (orphan !== undefined && orphan !== 'true' && orphan !== 'false')
      throw new BadRequestError(`query parameter "orphan" must be true or false, got "${orphan}"`);
    const proxy = await deps.proxies.requestDeletion(c.req.param('name'), { orphan: orphan === 'true' }, fencedWrite(c));
    writeApplied(c, { name: proxy.name, deletionRequestedAt: proxy.metadata.deletionRequestedAt });
    events.record(deletionRequested(proxy, callerName(c)));
    await deps.work.reconcileProxy(proxy.name);
    return c.json(proxy, 202);
  });
  return app;
}
