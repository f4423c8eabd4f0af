import { Hono, type Context } from 'hono';
import { EgressError, NotFoundError } from '../../errors.ts';
import { noEvents, type EventSink } from '../../events/event-sink.ts';
import { poolApplied, poolDeletionRequested } from '../../events/pool-events.ts';
import { callerName } from '../../http/auth.ts';
import type { PoolDocument } from '../../model/pool-resource.ts';
import type { MemberReplacements } from '../../pools/member-replacements.ts';
import { memberSummary } from '../../pools/member-summary.ts';
import { parsePoolDocuments, validatePoolDocuments } from '../../pools/parse-pool-documents.ts';
import { poolOf } from '../../pools/reconcile-pool.ts';
import type { WorkRequests } from '../../work/work-requests.ts';
import { PoolTerminatingError, type PoolApiStore } from '../../store/pool-store.ts';
import type { ProxyReader } from '../../store/proxy-store.ts';
import { readDocumentBody } from '../document-body.ts';
import { dryRun } from './proxies.ts';
import { fencedWrite, writeApplied } from '../write-deadline.ts';

export interface PoolRouteDeps {
  pools: PoolApiStore;
  /** Members, for a pool's summary and `rotate`. */
  proxies: ProxyReader;
  /** Where `rotate` asks for every member's replacement. */
  replacements: MemberReplacements;
  providers: readonly string[];
  /** Where applies, deletions and rotations ask for their pool's reconcile. */
  work: Pick<WorkRequests, 'reconcilePool'>;
  events?: EventSink;
}

/** Several documents of one apply name pools being deleted: nothing of it is applied (409, like one). */
class PoolsTerminatingError extends EgressError {
  constructor(names: readonly string[]) {
    super(
      'ERR_POOL_TERMINATING',
      `rejected, nothing applied: pools ${names.map((n) => `"${n}"`).join(', ')} are being deleted; apply again once they are gone`,
    );
  }
}

function readDocuments(c: Context, providers: readonly string[]): Promise<PoolDocument[]> {
  return readDocumentBody(
    c,
    (value) => validatePoolDocuments(value, { providers }),
    (text) => parsePoolDocuments(text, { providers }),
  );
}

/** `/v1/pools`: apply, list, get (with a member summary), delete, rotate. Same guards as `/v1/proxies`. */
export function poolRoutes(deps: PoolRouteDeps): Hono {
  const app = new Hono();
  const events = deps.events ?? noEvents;

  app.post('/pools', async (c) => {
    const signal = fencedWrite(c);
    // Every error of every document at once, unknown providers included; all or nothing.
    const docs = await readDocuments(c, deps.providers);
    const current = await Promise.all(docs.map((d) => deps.pools.get(d.metadata.name, signal)));
    const terminating = current.flatMap((p) => (p?.metadata.deletionRequestedAt ? [p.name] : []));
    if (terminating.length === 1 && docs.length === 1) throw new PoolTerminatingError(terminating[0] as string);
    if (terminating.length > 0) throw new PoolsTerminatingError(terminating);
    if (dryRun(c)) return c.json({ items: docs.map((d) => ({ name: d.metadata.name, outcome: 'valid' })), dryRun: true });
    const items = [];
    for (const doc of docs) {
      const { pool, outcome } = await deps.pools.apply(doc, signal);
      const item = { name: pool.name, outcome, generation: pool.metadata.generation };
      writeApplied(c, item);
      items.push(item);
      if (outcome !== 'unchanged') {
        events.record(poolApplied(pool, outcome, callerName(c)));
        // Unfenced (BullMQ), and harmless if late: the pool reconcile is level-triggered, deduplicated by name.
        await deps.work.reconcilePool(pool.name);
      }
    }
    return c.json({ items });
  });

  app.get('/pools', async (c) => c.json({ items: await deps.pools.list() }));

  app.get('/pools/:name', async (c) => {
    const name = c.req.param('name');
    const pool = await deps.pools.get(name);
    if (!pool) throw new NotFoundError('pool', name);
    const members = (await deps.proxies.list()).filter((p) => poolOf(p) === name);
    return c.json({ ...pool, members: memberSummary(members) });
  });

  app.delete('/pools/:name', async (c) => {
    const pool = await deps.pools.requestDeletion(c.req.param('name'), fencedWrite(c));
    writeApplied(c, { name: pool.name, deletionRequestedAt: pool.metadata.deletionRequestedAt });
    events.record(poolDeletionRequested(pool, callerName(c)));
    await deps.work.reconcilePool(pool.name);
    return c.json(pool, 202);
  });

  /** Replace every current member, surge-first (as at maxAge): `egress rotate pool NAME`. */
  app.post('/pools/:name/rotate', async (c) => {
    const name = c.req.param('name');
    const signal = fencedWrite(c);
    const pool = await deps.pools.get(name, signal);
    if (!pool) throw new NotFoundError('pool', name);
    if (pool.metadata.deletionRequestedAt) throw new PoolTerminatingError(name);
    const members = (await deps.proxies.list(signal)).filter((p) => poolOf(p) === name && !p.metadata.deletionRequestedAt);
    const reason = `rotation requested by ${callerName(c)}`;
    let requested = 0;
    for (const m of members) {
      if (await deps.replacements.request(name, m.name, reason, signal)) requested++;
      writeApplied(c, { member: m.name, replacement: 'requested' });
    }
    await deps.work.reconcilePool(name);
    return c.json({ name, members: members.length, requested }, 202);
  });
  return app;
}
