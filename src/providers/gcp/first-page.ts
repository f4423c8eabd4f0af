import type { InstancesClient, protos } from '@google-cloud/compute';
import { raceAbort } from '../../abort.ts';
import { withSpan } from '../../telemetry/spans.ts';

type ScopedList = protos.google.cloud.compute.v1.IInstancesScopedList;

export interface AggregatedPage {
  /** `zones/<zone>` → instances or a NO_RESULTS_ON_PAGE warning. */
  items: Record<string, ScopedList>;
  nextPageToken: string | undefined;
}

export interface FirstPageRequest {
  project: string;
  filter: string;
  maxResults: number;
}

/** A gax API call: a promise with `cancel()`, resolving to `[resources, nextRequest, rawResponse]`. */
type CancellableCall = Promise<[unknown, unknown, unknown]> & { cancel(): void };
type InnerCall = (request: object, options: object) => CancellableCall;

/**
 * Fetches exactly one page of `instances.aggregatedList`, aborting the HTTP request when `signal` ends.
 *
 * Why not `aggregatedListAsync`: its iterator fetches further pages while a page is empty, so "one page"
 * can become several requests, and it cannot be cancelled. gax call options take no AbortSignal either.
 * The client's page call with `autoPaginate: false` sends one request and returns gax's cancellable
 * promise, whose `cancel()` aborts the underlying fetch (the socket closes). That call lives in
 * `innerApiCalls`, which the generated client declares public; the check's tests pin its behaviour.
 */
export function aggregatedListFirstPage(client: InstancesClient, request: FirstPageRequest, signal: AbortSignal): Promise<AggregatedPage> {
  const attributes = { 'rpc.system': 'google_compute', 'rpc.service': 'instances', 'rpc.method': 'aggregatedList', 'egress.gcp.project': request.project };
  return withSpan('compute aggregatedList', attributes, () => firstPage(client, request, signal));
}

async function firstPage(client: InstancesClient, request: FirstPageRequest, signal: AbortSignal): Promise<AggregatedPage> {
  await raceAbort(client.initialize(), signal);
  signal.throwIfAborted();
  const call = (client.innerApiCalls as Record<string, unknown>).aggregatedList;
  if (typeof call !== 'function') throw new Error('InstancesClient has no aggregatedList page call (client library changed?)');
  const pending = (call as InnerCall)(
    { ...request, returnPartialSuccess: true },
    {
      autoPaginate: false,
      otherArgs: { headers: { 'x-goog-request-params': new URLSearchParams({ project: request.project }).toString() } },
    },
  );
  // Cancelling aborts the fetch, but the call settles only once the auth client is done too (an ADC
  // metadata-server probe can take seconds), so the check also stops waiting as soon as the signal ends.
  const cancel = (): void => pending.cancel();
  signal.addEventListener('abort', cancel, { once: true });
  try {
    const [items, , raw] = await raceAbort(pending, signal);
    const token = (raw as { nextPageToken?: string | null } | null)?.nextPageToken;
    return { items: (items ?? {}) as Record<string, ScopedList>, nextPageToken: token || undefined };
  } finally {
    signal.removeEventListener('abort', cancel);
  }
}

/** How many instances a page holds across its zones. */
export function countInstances(page: AggregatedPage): number {
  return Object.values(page.items).reduce((n, scoped) => n + (scoped.instances?.length ?? 0), 0);
}
