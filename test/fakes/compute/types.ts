/** Request-log entries and fault descriptions of the fake Compute API. */
import type { FaultMatch } from '../http-plumbing.ts';

export interface ComputeRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  rawQuery: string;
  contentType: string | undefined;
  authorization: string | undefined;
  apiKey: string | undefined;
  /** `x-goog-api-client` and `x-goog-request-params`, for contract tests. */
  apiClient: string | undefined;
  requestParams: string | undefined;
  body: string;
  status?: number;
  /** The response body written (JSON text), once written. */
  responseBody?: string;
  outcome: 'pending' | 'served' | 'client-aborted' | 'destroyed';
}

export interface ComputeFault {
  match?: FaultMatch;
  latencyMs?: number;
  /** With `latencyMs`: apply the request first, then hold only the answer (default: hold before applying). */
  afterApply?: boolean;
  destroySocket?: boolean;
  status?: number;
  reason?: string;
  message?: string;
}
