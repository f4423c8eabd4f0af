/**
 * What the fake's watch tests share: a client-node Watch that records every event it receives, and a
 * bounded wait on a condition over them (polled, never a fixed sleep).
 */
import { Watch, type KubernetesObject } from '@kubernetes/client-node';
import type { FakeKubeApiserver } from './server.ts';

export interface SeenEvent {
  type: string;
  name?: string;
  /* eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON of any shape, asserted with toMatchObject */
  object: any;
}

export interface RecordedWatch {
  events: SeenEvent[];
  ended: () => boolean;
  /** What the client's done callback got (undefined: a clean end of the stream). */
  endError: () => unknown;
}

/** Watches `path` with `query` on the fake; `stops` gets the abort, for the test's afterEach. */
export async function recordWatch(
  kube: FakeKubeApiserver,
  path: string,
  query: Record<string, string | number | boolean | undefined>,
  stops: (() => unknown)[],
): Promise<RecordedWatch> {
  const events: SeenEvent[] = [];
  let done = false;
  let endError: unknown;
  const ctl = await new Watch(kube.kubeConfig()).watch(
    path,
    query,
    (type, object: KubernetesObject) => events.push({ type, name: object.metadata?.name, object }),
    (err: unknown) => {
      done = true;
      endError = err ?? undefined;
    },
  );
  stops.push(() => ctl.abort());
  return { events, ended: () => done, endError: () => endError };
}

/** Waits (bounded) until `cond` holds; polls, never sleeps a fixed time. */
export async function until(cond: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
