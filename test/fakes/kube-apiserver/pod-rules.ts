/** Pod validation and defaulting, a subset of the real apiserver's (see server.ts for the deviations). */
import type { FakePod } from './types.ts';
import { invalid } from './status.ts';

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Checks the name (RFC 1123 subdomain) and that every container has a valid name and an image: 422 otherwise. */
export function validatePod(name: string, spec: Partial<FakePod['spec']> | undefined): asserts spec is FakePod['spec'] {
  if (name.length > 253 || !DNS_SUBDOMAIN.test(name)) {
    throw invalid('Pod', name, [
      {
        field: 'metadata.name',
        message: `Invalid value: "${name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`,
      },
    ]);
  }
  const containers = spec?.containers;
  if (!Array.isArray(containers) || containers.length === 0) {
    throw invalid('Pod', name, [{ field: 'spec.containers', message: 'Required value', reason: 'FieldValueRequired' }]);
  }
  const causes: { field: string; message: string; reason?: string }[] = [];
  containers.forEach((c, i) => {
    if (!c.name) causes.push({ field: `spec.containers[${i}].name`, message: 'Required value', reason: 'FieldValueRequired' });
    else if (!DNS_LABEL.test(c.name))
      causes.push({
        field: `spec.containers[${i}].name`,
        message: `Invalid value: "${c.name}": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'`,
      });
    if (!c.image) causes.push({ field: `spec.containers[${i}].image`, message: 'Required value', reason: 'FieldValueRequired' });
  });
  if (causes.length) throw invalid('Pod', name, causes);
}

/** JSON with object keys sorted, for comparisons that ignore key order. */
export function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : x,
  );
}

/** The defaults the apiserver fills into a Pod spec on create (a subset). */
export function applySpecDefaults(spec: FakePod['spec']): FakePod['spec'] {
  const s = structuredClone(spec);
  s.restartPolicy ??= 'Always';
  s.terminationGracePeriodSeconds ??= 30;
  s.dnsPolicy ??= 'ClusterFirst';
  s.schedulerName ??= 'default-scheduler';
  s.enableServiceLinks ??= true;
  s.securityContext ??= {};
  for (const c of s.containers) {
    c.terminationMessagePath ??= '/dev/termination-log';
    c.terminationMessagePolicy ??= 'File';
    const image = c.image ?? '';
    const tagged = /:[^/]+$/.test(image) || image.includes('@');
    c.imagePullPolicy ??= !tagged || image.endsWith(':latest') ? 'Always' : 'IfNotPresent';
    c.resources ??= {};
  }
  return s;
}
