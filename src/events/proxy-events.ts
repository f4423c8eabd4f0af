import type { Instance } from '../providers/lifecycle.ts';
import type { InstanceLocation, Proxy } from '../model/proxy-resource.ts';
import type { InstanceCause, NewEvent } from './event-sink.ts';
import type { ApplyOutcome } from '../store/proxy-store.ts';

/**
 * The events of a proxy's lifecycle, built in one place so that each decision point records one
 * line and every message reads alike. Nothing here takes credentials: a proxy's `status.url`
 * carries none (discovery adds them), instance names and ids are not secret.
 */

function where(location: InstanceLocation): string {
  return location.placement === undefined ? location.provider : `${location.provider}/${location.placement}`;
}

function locationDetails(location: InstanceLocation): Record<string, string> {
  return location.placement === undefined ? { provider: location.provider } : { provider: location.provider, location: location.placement };
}

const CAUSE_WORDS: Record<InstanceCause, string> = {
  apply: 'the proxy was applied',
  replace: 'replaced after being unready',
  move: 'the proxy moved',
  delete: 'the proxy was deleted',
  recreate: 'the previous instance was gone',
  'gc-orphan': 'no proxy owns it',
};

/** An apply through the API created or changed the proxy (`by`: the caller's token name). */
export function applied(proxy: Proxy, outcome: Exclude<ApplyOutcome, 'unchanged'>, by: string): NewEvent {
  return {
    type: 'Normal',
    reason: 'Applied',
    object: { kind: 'Proxy', name: proxy.name },
    provider: proxy.spec.provider,
    message: `${outcome} by ${by} (generation ${proxy.metadata.generation})`,
    details: { outcome, by, generation: proxy.metadata.generation },
  };
}

/** A deletion was asked for through the API. */
export function deletionRequested(proxy: Proxy, by: string): NewEvent {
  return {
    type: 'Normal',
    reason: 'DeletionRequested',
    object: { kind: 'Proxy', name: proxy.name },
    provider: proxy.spec.provider,
    message: `deletion requested by ${by}${proxy.metadata.orphanInstance ? ', leaving its instance (orphan)' : ''}`,
    details: { by, orphan: proxy.metadata.orphanInstance === true },
  };
}

export function instanceCreated(proxy: Proxy, instance: Instance, location: InstanceLocation, cause: InstanceCause): NewEvent {
  return {
    type: 'Normal',
    reason: 'InstanceCreated',
    object: { kind: 'Proxy', name: proxy.name },
    provider: location.provider,
    message: `instance ${instance.name} (${instance.id}) on ${where(location)}: ${CAUSE_WORDS[cause]}`,
    details: { instance: instance.name, instanceId: instance.id, cause, ...locationDetails(location) },
  };
}

export function instanceStarted(proxy: Proxy, instance: Instance, location: InstanceLocation, url: string): NewEvent {
  return {
    type: 'Normal',
    reason: 'InstanceStarted',
    object: { kind: 'Proxy', name: proxy.name },
    provider: location.provider,
    message: `instance ${instance.name} is running at ${url}`,
    details: { instance: instance.name, instanceId: instance.id, url, ...locationDetails(location) },
  };
}

export function instanceDeleted(proxy: Pick<Proxy, 'name'>, instanceName: string, location: InstanceLocation, cause: InstanceCause, why?: string): NewEvent {
  return {
    type: cause === 'replace' ? 'Warning' : 'Normal',
    reason: 'InstanceDeleted',
    object: { kind: 'Proxy', name: proxy.name },
    provider: location.provider,
    message: `instance ${instanceName} on ${where(location)} deleted: ${CAUSE_WORDS[cause]}${why ? ` (${why})` : ''}`,
    details: { instance: instanceName, cause, ...locationDetails(location) },
  };
}

export function becameReady(proxy: Proxy, url: string, egressIp: string): NewEvent {
  return {
    type: 'Normal',
    reason: 'Ready',
    object: { kind: 'Proxy', name: proxy.name },
    provider: proxy.spec.provider,
    message: `ready at ${url}, egress IP ${egressIp}`,
    details: { url, egressIp },
  };
}

export function becameNotReady(proxy: Proxy, cause: string, message: string): NewEvent {
  return {
    type: 'Warning',
    reason: 'NotReady',
    object: { kind: 'Proxy', name: proxy.name },
    provider: proxy.spec.provider,
    message: `out of discovery (${cause}): ${message}`,
    details: { cause },
  };
}

export function failed(proxy: Proxy, message: string): NewEvent {
  return { type: 'Warning', reason: 'Failed', object: { kind: 'Proxy', name: proxy.name }, provider: proxy.spec.provider, message };
}

export function proxyDeleted(proxy: Proxy): NewEvent {
  return {
    type: 'Normal',
    reason: 'Deleted',
    object: { kind: 'Proxy', name: proxy.name },
    provider: proxy.spec.provider,
    message: proxy.metadata.orphanInstance ? 'forgotten; its instance is left in place (orphan)' : 'instance gone; the proxy is removed',
    details: { orphan: proxy.metadata.orphanInstance === true },
  };
}
