/**
 * Global firewall rules of the fake Compute API: get, insert, patch and delete, each change a global
 * operation that applies it when it completes (the rule appears, changes or disappears then, as on the
 * real API, where `get` right after an insert may still answer 404). Validation, with the real error
 * shapes: the name (RFC 1035, 400 `invalid`), the network (404 `notFound` when it does not exist),
 * `sourceRanges` (CIDRs, 400 `invalid` naming `resource.sourceRanges[i]`), `allowed`/`denied` (exactly
 * one; protocol names; ports `N` or `N-M` only for tcp, udp and sctp), `targetTags` (RFC 1035),
 * `priority` 0-65535. A duplicate, or an insert while one of that name is pending: 409 `alreadyExists`.
 * A patch replaces the fields it carries (lists wholesale); changing `network` or `name` is 400.
 */
import { isIP } from 'node:net';
import { computeError, invalid, notFound } from './errors.ts';
import { computeTime, nextId, type ComputeState, type FakeFirewall, type FakeOperation } from './state.ts';

const NAME = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;
const PROTOCOLS = new Set(['tcp', 'udp', 'icmp', 'esp', 'ah', 'sctp', 'ipip', 'all']);
const PORTED = new Set(['tcp', 'udp', 'sctp', 'all']);

const pendingInserts = new WeakMap<ComputeState, Set<string>>();

function parseBody(body: string): Record<string, unknown> {
  try {
    const parsed = JSON.parse(body) as unknown;
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // fall through
  }
  throw computeError(400, 'parseError', 'Invalid JSON payload received.');
}

function isCidr(range: string): boolean {
  const [addr, bits, ...rest] = range.split('/');
  if (rest.length || addr === undefined) return false;
  const family = isIP(addr);
  if (!family) return false;
  if (bits === undefined) return true;
  if (!/^\d{1,3}$/.test(bits)) return false;
  return Number(bits) <= (family === 4 ? 32 : 128);
}

/** The network's name from `global/networks/x`, `projects/p/global/networks/x` or a URL; 404 when it does not exist. */
function networkUrl(state: ComputeState, network: unknown): string {
  const given = typeof network === 'string' && network ? network : 'global/networks/default';
  const name = given.slice(given.lastIndexOf('/') + 1);
  if (!/\/?networks\/[^/]+$/.test(given) && given.includes('/')) throw invalid('resource.network', given, 'Must be a network URL.');
  if (!state.networks.has(name)) throw notFound(`projects/${state.project}/global/networks/${name}`);
  return `${state.globalUrl()}/networks/${name}`;
}

function checkRules(field: 'allowed' | 'denied', rules: unknown): void {
  if (!Array.isArray(rules)) throw invalid(`resource.${field}`, String(rules), 'Must be a list.');
  rules.forEach((r: unknown, i) => {
    const rule = (r ?? {}) as { IPProtocol?: unknown; ports?: unknown };
    const proto = typeof rule.IPProtocol === 'string' ? rule.IPProtocol.toLowerCase() : '';
    if (!PROTOCOLS.has(proto) && !/^\d{1,3}$/.test(proto))
      throw invalid(`resource.${field}[${i}].IPProtocol`, String(rule.IPProtocol), 'Must be a protocol name or number.');
    if (rule.ports === undefined) return;
    if (!Array.isArray(rule.ports)) throw invalid(`resource.${field}[${i}].ports`, JSON.stringify(rule.ports), 'Must be a list.');
    if (rule.ports.length && !PORTED.has(proto))
      throw invalid(`resource.${field}[${i}].ports`, String(rule.ports), 'Ports may be given only for tcp, udp, sctp and all.');
    rule.ports.forEach((port: unknown, j) => {
      const m = typeof port === 'string' ? /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(port) : null;
      const ok = m && Number(m[1]) <= 65535 && (m[2] === undefined || (Number(m[2]) <= 65535 && Number(m[2]) >= Number(m[1])));
      if (!ok) throw invalid(`resource.${field}[${i}].ports[${j}]`, String(port), 'Must be a port or a port range such as 80 or 8000-8080.');
    });
  });
}

/** Validates a complete rule (after defaults, or after a patch was merged in). */
function validate(fw: FakeFirewall): void {
  if (!NAME.test(fw.name)) throw invalid('resource.name', fw.name, "Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'");
  if ((fw.allowed === undefined) === (fw.denied === undefined)) throw computeError(400, 'invalid', 'Exactly one of allowed or denied must be specified.');
  if (fw.allowed !== undefined) checkRules('allowed', fw.allowed);
  if (fw.denied !== undefined) checkRules('denied', fw.denied);
  if (!Number.isInteger(fw.priority) || fw.priority < 0 || fw.priority > 65535)
    throw invalid('resource.priority', String(fw.priority), 'Must be between 0 and 65535.');
  if (fw.direction !== 'INGRESS' && fw.direction !== 'EGRESS') throw invalid('resource.direction', String(fw.direction), 'Must be INGRESS or EGRESS.');
  (fw.sourceRanges ?? []).forEach((r, i) => {
    if (typeof r !== 'string' || !isCidr(r))
      throw invalid(`resource.sourceRanges[${i}]`, String(r), 'Must be a CIDR address range that is contained in the network.');
  });
  (fw.targetTags ?? []).forEach((t, i) => {
    if (typeof t !== 'string' || !NAME.test(t))
      throw invalid(`resource.targetTags[${i}]`, String(t), "Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'");
  });
}

const selfLink = (state: ComputeState, name: string): string => `${state.globalUrl()}/firewalls/${name}`;

export function getFirewall(state: ComputeState, name: string): FakeFirewall {
  const fw = state.firewalls.get(name);
  if (!fw) throw notFound(`projects/${state.project}/global/firewalls/${name}`);
  return structuredClone(fw);
}

export function listFirewalls(state: ComputeState): unknown {
  const items = [...state.firewalls.values()].sort((a, b) => (a.name < b.name ? -1 : 1)).map((f) => structuredClone(f));
  return {
    kind: 'compute#firewallList',
    id: `projects/${state.project}/global/firewalls`,
    ...(items.length ? { items } : {}),
    selfLink: `${state.globalUrl()}/firewalls`,
  };
}

export function insertFirewall(state: ComputeState, body: string): FakeOperation {
  const b = parseBody(body);
  const name = typeof b.name === 'string' ? b.name : '';
  if (!name) throw computeError(400, 'required', "Required field 'resource.name' not specified");
  const fw: FakeFirewall = {
    ...b,
    kind: 'compute#firewall',
    id: '',
    name,
    network: networkUrl(state, b.network),
    priority: typeof b.priority === 'number' ? b.priority : 1000,
    direction: (b.direction ?? 'INGRESS') as FakeFirewall['direction'],
    disabled: b.disabled === true,
    logConfig: { enable: false },
    creationTimestamp: '',
    selfLink: selfLink(state, name),
  };
  validate(fw);
  const pending = pendingInserts.get(state) ?? new Set<string>();
  pendingInserts.set(state, pending);
  if (state.firewalls.has(name) || pending.has(name)) {
    throw computeError(409, 'alreadyExists', `The resource 'projects/${state.project}/global/firewalls/${name}' already exists`);
  }
  pending.add(name);
  const target = { id: nextId(), selfLink: fw.selfLink };
  return state.startOperation(
    undefined,
    'insert',
    target,
    () => {
      pending.delete(name);
      state.firewalls.set(name, { ...fw, id: target.id, creationTimestamp: computeTime() });
    },
    () => void pending.delete(name),
  );
}

export function patchFirewall(state: ComputeState, name: string, body: string): FakeOperation {
  const current = state.firewalls.get(name);
  if (!current) throw notFound(`projects/${state.project}/global/firewalls/${name}`);
  const b = parseBody(body);
  if (b.name !== undefined && b.name !== name) throw invalid('resource.name', JSON.stringify(b.name), 'The name of a firewall cannot be changed.');
  if (b.network !== undefined && networkUrl(state, b.network) !== current.network) {
    throw invalid('resource.network', JSON.stringify(b.network), 'The network of a firewall cannot be changed.');
  }
  const { kind: _k, id: _i, selfLink: _s, creationTimestamp: _c, ...changes } = b;
  const next: FakeFirewall = { ...current, ...changes, network: current.network, name };
  validate(next);
  return state.startOperation(undefined, 'patch', current, () => {
    const live = state.firewalls.get(name);
    if (live) state.firewalls.set(name, { ...live, ...changes, network: live.network, name });
  });
}

export function deleteFirewall(state: ComputeState, name: string): FakeOperation {
  const current = state.firewalls.get(name);
  if (!current) throw notFound(`projects/${state.project}/global/firewalls/${name}`);
  return state.startOperation(undefined, 'delete', current, () => void state.firewalls.delete(name));
}
