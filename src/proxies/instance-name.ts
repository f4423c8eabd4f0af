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

/** The fleet id of an installation: its key prefix without the hash-tag braces. */
export function fleetOf(prefix: string): string {
  return (
    prefix
      .replace(/[{}]/g, '')
      .replace(/[^a-z0-9-]/g, '-')
      .slice(0, 63) || 'egress'
  );
}
