/** Pods as the fake stores them, request-log entries and fault descriptions of the fake apiserver. */
import type { FaultMatch } from '../http-plumbing.ts';

export interface KubeRequest {
  method: string;
  path: string;
  /** Decoded query parameters (last value wins) and the raw query string. */
  query: Record<string, string>;
  rawQuery: string;
  contentType: string | undefined;
  accept: string | undefined;
  authorization: string | undefined;
  body: string;
  /** The HTTP status written, once written. */
  status?: number;
  /** The response body written (JSON text), once written. */
  responseBody?: string;
  /**
   * `served`, `streaming` (a watch), `client-aborted` (the client closed the socket before the answer),
   * `destroyed` (a fault).
   */
  outcome: 'pending' | 'served' | 'streaming' | 'client-aborted' | 'destroyed';
}

export interface KubeFault {
  /** Only requests matching these apply; the first matching fault is used once and removed. */
  match?: FaultMatch;
  /** Delay before answering (the answer is the fault status if any, otherwise the normal one). */
  latencyMs?: number;
  /**
   * `before-headers`: destroy the socket without answering; `mid-body`: send chunked headers and half a
   * body; `mid-body-fixed-length`: the same with a Content-Length (node-fetch 2 then never settles).
   */
  destroySocket?: 'before-headers' | 'mid-body' | 'mid-body-fixed-length';
  /** Answer with this status and a Status body (reason and message given or derived). */
  status?: number;
  reason?: string;
  message?: string;
  /** Answer 200 with exactly this JSON body instead (a broken or hostile server: a list without items, a repeated continue). */
  body?: unknown;
}

/** The ObjectMeta every stored object has: what the client sent plus what the apiserver sets. */
export interface FakeObjectMeta {
  name: string;
  namespace: string;
  uid: string;
  resourceVersion: string;
  creationTimestamp: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  [k: string]: unknown;
}

/** A Pod as JSON. The fake keeps whatever the client sent, plus the fields the apiserver sets. */
export interface FakePod {
  apiVersion?: string;
  kind?: string;
  metadata: FakeObjectMeta & {
    generation?: number;
    finalizers?: string[];
    deletionTimestamp?: string;
    deletionGracePeriodSeconds?: number;
    generateName?: string;
    [k: string]: unknown;
  };
  spec: { containers: { name: string; image?: string; [k: string]: unknown }[]; nodeName?: string; [k: string]: unknown };
  status: {
    phase?: string;
    podIP?: string;
    podIPs?: { ip: string }[];
    conditions?: { type: string; status: string; lastTransitionTime?: string; [k: string]: unknown }[];
    [k: string]: unknown;
  };
}
