/**
 * Tells an admission refusal from an authorization refusal. The API server answers both a missing RBAC
 * permission and an exceeded ResourceQuota (or a policy admission plugin) with 403 Forbidden, and their
 * messages are free text. So after a 403 on a create, the lifecycle asks the server itself with a
 * SelfSubjectAccessReview whether this identity may create that resource in that namespace: if it may,
 * admission refused the object → ProvisioningError (the proxy ends Failed with the server's message);
 * if it may not, or the review cannot be made → KubernetesAccessError (retried with backoff once access
 * is fixed).
 */
import { AuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '../../logging.ts';
import { ProvisioningError } from '../lifecycle.ts';
import { KubernetesAccessError } from './lifecycle-errors.ts';
import { raceAbort, withSignal } from '../../clients/kubernetes/request-options.ts';
import { statusMessage } from '../../clients/kubernetes/status.ts';

export interface CreateRefusal {
  /** The resource plural that was refused (pods, secrets, services). */
  resource: string;
  namespace: string;
  /** What was being done, for the message (`creating Pod "x" in namespace "y"`). */
  what: string;
}

/** A function that classifies a 403 answered to a create. */
export type ForbiddenCreateExplainer = (err: unknown, refusal: CreateRefusal, signal: AbortSignal) => Promise<Error>;

export function forbiddenCreateExplainer(kc: KubeConfig, logger: Logger): ForbiddenCreateExplainer {
  const api = kc.makeApiClient(AuthorizationV1Api);
  return async (err, { resource, namespace, what }, signal) => {
    const body = (err as { body?: unknown }).body;
    const text = `${what}: ${statusMessage(body) ?? 'HTTP 403'}`;
    let allowed = false;
    try {
      const review = await raceAbort(
        api.createSelfSubjectAccessReview(
          {
            body: {
              apiVersion: 'authorization.k8s.io/v1',
              kind: 'SelfSubjectAccessReview',
              spec: { resourceAttributes: { namespace, verb: 'create', group: '', resource } },
            },
          },
          withSignal(signal),
        ),
        signal,
      );
      allowed = review.status?.allowed === true && review.status.denied !== true;
    } catch (reviewErr) {
      if (signal.aborted) return signal.reason as Error;
      // Cannot tell: keep the conservative answer (an access problem, retried later).
      logger.debug({ err: reviewErr, resource, namespace }, 'SelfSubjectAccessReview failed; treating the 403 as an access error');
    }
    if (allowed) return new ProvisioningError(text, { cause: err });
    return new KubernetesAccessError(text, 403, { cause: err });
  };
}
