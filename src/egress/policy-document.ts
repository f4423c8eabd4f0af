import ipaddr from 'ipaddr.js';
import type { EchoEndpoint, GuardedEndpoint, ProxyEgressPolicy } from './policy-config.ts';

/**
 * Reads the JSON document a proxy instance receives (ProxyEgressPolicy, version 1), from a file
 * or the `EGRESS_PROXY_POLICY` environment variable. Keys it does not know are ignored (a newer
 * orchestrator may add some); a wrong version or a malformed field rejects the whole document,
 * naming the field.
 *
 * Checked by hand rather than with the configuration's zod schemas: this runs inside every proxy
 * process, and zod would triple the bundled program (1.5 MB instead of 0.5) and add ~13 MB of
 * memory and ~60 ms of start-up to each proxy. The ranges are parsed by ipaddr.js like the
 * configuration's.
 */
export class PolicyDocumentError extends Error {
  override name = 'PolicyDocumentError';
}

const ROLES: ReadonlySet<string> = new Set<GuardedEndpoint['role']>(['api', 'metrics', 'redis', 'proxy']);

function fail(path: string, message: string): never {
  throw new PolicyDocumentError(`egress policy ${path}: ${message}`);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function list(value: unknown, path: string, max: number): unknown[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) fail(path, 'expected an array');
  if (value.length > max) fail(path, `at most ${max} entries`);
  return value;
}

function cidr(value: unknown, path: string): string {
  if (typeof value !== 'string') fail(path, 'expected a CIDR range');
  try {
    const [address, prefix] = value.includes('/') ? ipaddr.parseCIDR(value) : [ipaddr.parse(value), value.includes(':') ? 128 : 32];
    return `${address.toNormalizedString()}/${prefix}`;
  } catch {
    return fail(path, `expected a CIDR range such as 10.0.0.0/8 or fd00::/8, got "${value}"`);
  }
}

function host(value: unknown, path: string): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 253) fail(path, 'expected a host name or address');
  return value;
}

function port(value: unknown, path: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 65535) fail(path, 'expected a port 1-65535');
  return value;
}

function guarded(value: unknown, path: string): GuardedEndpoint {
  if (!isRecord(value)) fail(path, 'expected an object');
  const role = value.role;
  if (typeof role !== 'string' || !ROLES.has(role)) fail(`${path}.role`, `expected one of ${[...ROLES].join(', ')}`);
  return { host: host(value.host, `${path}.host`), port: port(value.port, `${path}.port`), role: role as GuardedEndpoint['role'] };
}

function echo(value: unknown, path: string): EchoEndpoint {
  if (!isRecord(value)) fail(path, 'expected an object');
  const p = value.path;
  if (typeof p !== 'string' || !p.startsWith('/') || p.length > 2048) fail(`${path}.path`, 'expected a path starting with /');
  return { host: host(value.host, `${path}.host`), port: port(value.port, `${path}.port`), path: p };
}

export function parsePolicyDocument(text: string): ProxyEgressPolicy {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new PolicyDocumentError(`egress policy is not JSON: ${(err as Error).message}`);
  }
  if (!isRecord(raw)) fail('(document)', 'expected an object');
  if (raw.version !== 1) fail('version', 'expected 1');
  return {
    version: 1,
    allow: list(raw.allow, 'allow', 256).map((v, i) => cidr(v, `allow.${i}`)),
    deny: list(raw.deny, 'deny', 256).map((v, i) => cidr(v, `deny.${i}`)),
    guarded: list(raw.guarded, 'guarded', 64).map((v, i) => guarded(v, `guarded.${i}`)),
    ...(raw.echo === undefined ? {} : { echo: echo(raw.echo, 'echo') }),
  };
}
