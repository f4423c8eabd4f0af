/**
 * The firewall rule a gcp provider manages so that crawlers reach its proxies: one rule per provider,
 * named `egress-proxies-<provider>-allow`, allowing TCP on the proxy port from the configured source
 * ranges to the instances carrying the network tag `egress-proxy-<provider>`. Names longer than
 * Compute's 63 characters keep a prefix of the provider name and a hash of all of it.
 *
 * Ensuring it: get → insert when missing (409 alreadyExists: another worker made it) → await the global
 * operation; an existing rule whose port, ranges, tag or enabled state differ is patched back. Once per
 * process: the first success is remembered; a failure is forgotten, so the next create tries again.
 * Deleting proxies never removes the rule.
 */
import { createHash } from 'node:crypto';
import type { protos } from '@google-cloud/compute';
import type { Logger } from '../../logging.ts';
import { ProvisioningError } from '../lifecycle.ts';
import type { ComputeClients } from './clients.ts';
import { httpStatus } from './classify.ts';
import { gaxCall, raceAbort, type Operation } from './lifecycle-calls.ts';
import { mapComputeError } from './lifecycle-errors.ts';
import { lastSegment } from './lifecycle-instance.ts';
import { failedOperation, operationFailure } from './operations.ts';

type Firewall = protos.google.cloud.compute.v1.IFirewall;

const MAX_NAME = 63;

/** `<prefix><name><suffix>`, or, when that is longer than 63 characters, a cut name and a hash of the whole name. */
export function boundedName(prefix: string, name: string, suffix: string): string {
  const full = `${prefix}${name}${suffix}`;
  if (full.length <= MAX_NAME) return full;
  const hash = createHash('sha256').update(name).digest('hex').slice(0, 8);
  const room = MAX_NAME - prefix.length - suffix.length - hash.length - 1;
  return `${prefix}${name.slice(0, room).replace(/-+$/, '')}-${hash}${suffix}`;
}

/** The network tag every proxy instance of `provider` carries when its firewall rule is managed. */
export const proxyNetworkTag = (provider: string): string => boundedName('egress-proxy-', provider, '');

/** The name of the firewall rule managed for `provider`. */
export const firewallRuleName = (provider: string): string => boundedName('egress-proxies-', provider, '-allow');

export interface FirewallSettings {
  provider: string;
  sourceRanges: string[];
  /** `global/networks/<n>` or a URL. */
  network: string;
  port: number;
}

/** The rule as we want it. */
export function firewallResource(s: FirewallSettings): Firewall {
  return {
    name: firewallRuleName(s.provider),
    description: `Managed by egress-proxies for provider "${s.provider}": lets crawlers reach the proxies' port. Rewritten when it drifts; never deleted with the proxies.`,
    network: s.network,
    direction: 'INGRESS',
    priority: 1000,
    sourceRanges: [...s.sourceRanges],
    targetTags: [proxyNetworkTag(s.provider)],
    allowed: [{ IPProtocol: 'tcp', ports: [String(s.port)] }],
  };
}

const sameSet = (a: readonly string[] | null | undefined, b: readonly string[]): boolean => {
  const x = new Set(a ?? []);
  return x.size === new Set(b).size && b.every((v) => x.has(v));
};

/** What differs between the rule found and the rule wanted, in words (empty: nothing to patch). */
export function firewallDrift(found: Firewall, wanted: Firewall): string[] {
  const drift: string[] = [];
  const allowed = found.allowed ?? [];
  const wantPort = wanted.allowed?.[0]?.ports?.[0] ?? '';
  const allowsPort = allowed.length === 1 && String(allowed[0]?.IPProtocol).toLowerCase() === 'tcp' && sameSet(allowed[0]?.ports, [wantPort]);
  if (!allowsPort) drift.push(`allows ${JSON.stringify(allowed)}, not tcp:${wantPort}`);
  if (!sameSet(found.sourceRanges, wanted.sourceRanges ?? [])) drift.push(`source ranges ${(found.sourceRanges ?? []).join(',')}`);
  if (!sameSet(found.targetTags, wanted.targetTags ?? [])) drift.push(`target tags ${(found.targetTags ?? []).join(',')}`);
  if (found.disabled) drift.push('disabled');
  return drift;
}

export interface FirewallEnsurer {
  /** Makes sure the rule is in place; after the first success in this process, returns at once. */
  ensure(signal: AbortSignal): Promise<void>;
}

export interface FirewallEnsurerOptions {
  clients: ComputeClients;
  project: string;
  settings: FirewallSettings;
  logger: Logger;
  operationPollMs: number;
}

export function createFirewallEnsurer(o: FirewallEnsurerOptions): FirewallEnsurer {
  const { clients, project } = o;
  const wanted = firewallResource(o.settings);
  const name = wanted.name ?? '';
  const log = o.logger.child({ firewall: name, network: o.settings.network });
  const routing = { project, firewall: name };
  const waitGlobal = async (operation: string, signal: AbortSignal): Promise<Operation> =>
    (await gaxCall<Operation>(clients.globalOperations, 'wait', { project, operation }, { project, operation }, signal)).response;

  async function finish(op: Operation, what: string, signal: AbortSignal): Promise<void> {
    const failure = await operationFailure(op, waitGlobal, o.operationPollMs, signal, (err) => mapComputeError(err, `waiting for ${what}`, signal));
    if (!failure) return;
    // The rule as configured cannot be made (a quota on firewall rules, an invalid field): not fixed by retrying.
    if (failure.code === 'QUOTA_EXCEEDED' || (failure.status ?? 0) === 400) throw new ProvisioningError(`${what}: ${failure.text}`);
    throw failedOperation(what, failure);
  }

  async function read(signal: AbortSignal): Promise<Firewall | undefined> {
    try {
      return (await gaxCall<Firewall>(clients.firewalls, 'get', { project, firewall: name }, routing, signal)).response;
    } catch (err) {
      if (!signal.aborted && httpStatus(err) === 404) return undefined;
      throw mapComputeError(err, `reading firewall rule "${name}"`, signal);
    }
  }

  async function ensureOnce(signal: AbortSignal): Promise<void> {
    const found = await read(signal);
    if (!found) {
      const what = `creating firewall rule "${name}"`;
      let op: Operation;
      try {
        ({ response: op } = await gaxCall<Operation>(clients.firewalls, 'insert', { project, firewallResource: wanted }, { project }, signal));
      } catch (err) {
        if (!signal.aborted && httpStatus(err) === 409) {
          log.debug('firewall rule made by another worker meanwhile');
          return;
        }
        throw mapComputeError(err, what, signal, true);
      }
      await finish(op, `the creation of firewall rule "${name}"`, signal);
      log.info({ sourceRanges: wanted.sourceRanges, port: o.settings.port, tag: wanted.targetTags?.[0] }, 'firewall rule created');
      return;
    }
    if (lastSegment(found.network) !== lastSegment(wanted.network)) {
      throw new ProvisioningError(
        `firewall rule "${name}" exists on network "${lastSegment(found.network)}", not "${lastSegment(wanted.network)}"; delete it or set proxies.firewall.network`,
      );
    }
    if (String(found.direction ?? 'INGRESS') !== 'INGRESS' || (found.denied ?? []).length > 0) {
      throw new ProvisioningError(
        `firewall rule "${name}" exists as another kind of rule (${String(found.direction)}, ${found.denied?.length ? 'deny' : 'allow'}); delete it`,
      );
    }
    const drift = firewallDrift(found, wanted);
    if (drift.length === 0) {
      log.debug('firewall rule in place');
      return;
    }
    const patch: Firewall = {
      description: wanted.description,
      allowed: wanted.allowed,
      sourceRanges: wanted.sourceRanges,
      targetTags: wanted.targetTags,
      disabled: false,
    };
    let op: Operation;
    try {
      ({ response: op } = await gaxCall<Operation>(clients.firewalls, 'patch', { project, firewall: name, firewallResource: patch }, routing, signal));
    } catch (err) {
      throw mapComputeError(err, `updating firewall rule "${name}"`, signal, true);
    }
    await finish(op, `the update of firewall rule "${name}"`, signal);
    log.info({ drift }, 'firewall rule updated');
  }

  interface Attempt {
    promise: Promise<void>;
    /** The signal of the caller that started it: when that caller gives up, the attempt ends. */
    signal: AbortSignal;
  }
  let done = false;
  let attempt: Attempt | undefined;
  function begin(signal: AbortSignal): Attempt {
    const rec: Attempt = {
      signal,
      promise: ensureOnce(signal).then(
        () => void (done = true),
        (err: unknown) => {
          if (attempt === rec) attempt = undefined; // forget a failure: the next create tries again
          throw err;
        },
      ),
    };
    rec.promise.catch(() => undefined); // a caller that gave up no longer listens
    return rec;
  }
  return {
    async ensure(signal) {
      while (!done) {
        signal.throwIfAborted();
        const current = (attempt ??= begin(signal));
        try {
          await raceAbort(current.promise, signal);
          return;
        } catch (err) {
          if (signal.aborted) throw signal.reason as Error;
          // The attempt belonged to a caller whose signal ended: try again under ours.
          if (current.signal !== signal && current.signal.aborted) continue;
          throw err;
        }
      }
    },
  };
}
