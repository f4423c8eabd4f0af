import { createHash } from 'node:crypto';

/**
 * The instance name of a proxy: deterministic, so every reconcile of the same proxy (retried,
 * duplicated, after a crash) arrives at the same instance. `ep-<proxy>-<hash>`, where the hash
 * covers the fleet and the proxy's uid: a proxy deleted and created again under the same name
 * gets a new instance, and two fleets never collide. At most 63 lower-case characters.
 */
export function instanceNameFor(fleet: string, proxy: { name: string; metadata: { uid: string } }): string {
  const hash = createHash('sha256').update(`${fleet}\0${proxy.metadata.uid}`).digest('hex').slice(0, 8);
  return `ep-${proxy.name.slice(0, 63 - 3 - 1 - 8)}-${hash}`;
}

/** A valid label value on both Kubernetes and Compute: lower-case alphanumerics and `-`, alphanumeric at both ends, at most 63. */
const LABEL_VALUE = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * The fleet id of an installation, from its key prefix: it labels every instance (Kubernetes and
 * Compute label values) and scopes GC, so it is always a valid label value and distinct prefixes
 * give distinct ids. The prefix without its hash-tag braces, other characters as `-`, when that is
 * a valid label value (the ids every earlier version gave, kept); otherwise (a prefix such as
 * `{egress}:` would give `egress-`, which the apiserver refuses) that text trimmed to alphanumeric
 * ends and cut, plus `-` and 8 hex digits of the prefix's SHA-256, so that it cannot take another
 * prefix's id.
 */
export function fleetOf(prefix: string): string {
  const plain = prefix.replace(/[{}]/g, '');
  if (plain === '') return 'egress';
  const legacy = plain.replace(/[^a-z0-9-]/g, '-').slice(0, 63);
  if (LABEL_VALUE.test(legacy)) return legacy;
  const hash = createHash('sha256').update(prefix).digest('hex').slice(0, 8);
  const stem = plain
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '-')
    .replace(/^-+/, '')
    .slice(0, 63 - 1 - hash.length)
    .replace(/-+$/, '');
  return `${stem || 'egress'}-${hash}`;
}
