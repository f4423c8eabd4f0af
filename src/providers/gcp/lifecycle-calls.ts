/**
 * Cancellable Compute calls for the gcp lifecycle.
 *
 * gax call options take no AbortSignal, and the public client methods wrap gax's cancellable promise in
 * `.then()`, which drops `cancel()`. So, as the health check's first-page call does, these go through the
 * client's page calls in `innerApiCalls` (declared public by the generated client) and cancel the promise
 * when the signal ends: gax then aborts the underlying fetch and the socket closes. Side benefit: the
 * public methods' request logging (GOOGLE_SDK_NODE_LOGGING) never sees a request, so instance metadata
 * holding proxy credentials cannot reach it.
 */
import type { protos } from '@google-cloud/compute';
import { raceAbort } from '../../abort.ts';
import { withSpan } from '../../telemetry/spans.ts';

export type Operation = protos.google.cloud.compute.v1.IOperation;

/** A gax API call: a promise with `cancel()`, resolving to `[response, nextRequest, rawResponse]`. */
type CancellableCall = Promise<[unknown, unknown, unknown]> & { cancel(): void };
type InnerCall = (request: object, options: object) => CancellableCall;

/** What the lifecycle needs of a generated Compute client. */
export interface GaxClient {
  initialize(): Promise<unknown>;
  innerApiCalls: Record<string, unknown>;
}

/**
 * Calls `method` with `request`, sending the routing header the public method would send
 * (`x-goog-request-params`, built from `routing`). Rejects with the signal's reason once it ends.
 */
export function gaxCall<T>(
  client: GaxClient,
  method: string,
  request: object,
  routing: Record<string, string>,
  signal: AbortSignal,
): Promise<{ response: T; raw: unknown }> {
  // One span per REST call: the client and method, and the routing parameters (project, zone,
  // resource names); never the request body.
  const attributes: Record<string, string> = { 'rpc.system': 'google_compute', 'rpc.service': computeService(client), 'rpc.method': method };
  for (const [key, value] of Object.entries(routing)) attributes[`egress.gcp.${key}`] = value;
  return withSpan(`compute ${method}`, attributes, () => call<T>(client, method, request, routing, signal));
}

/** `InstancesClient` → `instances`. */
function computeService(client: GaxClient): string {
  const name = (client as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name.endsWith('Client') ? name.slice(0, 1).toLowerCase() + name.slice(1, -'Client'.length) : 'compute';
}

async function call<T>(
  client: GaxClient,
  method: string,
  request: object,
  routing: Record<string, string>,
  signal: AbortSignal,
): Promise<{ response: T; raw: unknown }> {
  await raceAbort(client.initialize(), signal);
  signal.throwIfAborted();
  const call = client.innerApiCalls[method];
  if (typeof call !== 'function') throw new Error(`Compute client has no "${method}" call (client library changed?)`);
  const pending = (call as InnerCall)(request, {
    autoPaginate: false,
    otherArgs: { headers: { 'x-goog-request-params': new URLSearchParams(routing).toString() } },
  });
  const cancel = (): void => pending.cancel();
  signal.addEventListener('abort', cancel, { once: true });
  try {
    const [response, , raw] = await raceAbort(pending, signal);
    return { response: response as T, raw };
  } finally {
    signal.removeEventListener('abort', cancel);
  }
}

export { raceAbort } from '../../abort.ts';

/** Waits `ms`, or rejects with the signal's reason when it ends first. */
export function abortableDelay(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  if (ms <= 0) return Promise.resolve();
  // Each poll of an operation waits here: the listener goes with the wait, not with the job.
  return new Promise<void>((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason as Error);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** The client leaves numeric enums off, so `status` is the string the API sends; the number is for safety. */
const DONE = 2104194; // google.cloud.compute.v1.Operation.Status.DONE
export const isDone = (op: Operation): boolean => String(op.status) === 'DONE' || Number(op.status) === DONE;

/**
 * Polls an operation (zone or global: `wait` is the scope's `operations.wait`) until DONE, at least
 * `pollMs` apart when `wait` answers early (the real one blocks up to ~2 minutes per call).
 */
export async function awaitOperation(
  op: Operation,
  wait: (name: string, signal: AbortSignal) => Promise<Operation>,
  pollMs: number,
  signal: AbortSignal,
): Promise<Operation> {
  let current = op;
  while (!isDone(current)) {
    const started = Date.now();
    current = await wait(current.name ?? '', signal);
    if (!isDone(current)) await abortableDelay(pollMs - (Date.now() - started), signal);
  }
  return current;
}
