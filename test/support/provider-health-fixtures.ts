import type { ProviderHealth } from '../../src/health/provider-health.ts';

/**
 * ProviderHealth objects as the publisher writes them (valid) and broken ones, for the zod schema
 * and the generated CRD (test/crds/crd-fixtures.test.ts). `zod` and `crd` say what each does with an
 * invalid one: a CRD list-map also refuses two targets of one name, which zod does not check (the
 * publisher never writes one: it keys targets by name).
 */
const T0 = '2026-11-01T10:00:00.000Z';

function target(name: string, overrides: Record<string, unknown> = {}): ProviderHealth['status']['targets'][number] {
  return {
    name,
    ready: true,
    reason: 'Ok',
    message: 'libvirt 9.0.0 on beelink, pool default running',
    lastTransitionTime: T0,
    lastCheckTime: T0,
    durationSeconds: 0.004,
    details: { host: name },
    ...overrides,
  };
}

function health(targets: unknown[], overrides: Record<string, unknown> = {}): ProviderHealth {
  return { name: 'kvm-home', status: { ready: true, lastTransitionTime: T0, lastCheckTime: T0, targets, ...overrides } as ProviderHealth['status'] };
}

export const VALID_PROVIDER_HEALTH: readonly { what: string; health: ProviderHealth }[] = [
  { what: 'one ready target', health: health([target('beelink')]) },
  {
    what: 'a target not ready with a message of 1024 characters',
    health: health([target('beelink'), target('nuc', { ready: false, reason: 'SSHHandshakeFailed', message: 'm'.repeat(1024) })], { ready: false }),
  },
  { what: 'no targets', health: health([]) },
];

export const INVALID_PROVIDER_HEALTH: readonly { what: string; health: ProviderHealth; zod: 'rejects' | 'accepts'; crd: 'rejects' | 'accepts' }[] = [
  { what: 'a message of 1025 characters', health: health([target('nuc', { message: 'm'.repeat(1025) })]), zod: 'rejects', crd: 'rejects' },
  { what: 'an unknown reason', health: health([target('nuc', { reason: 'Sad' })]), zod: 'rejects', crd: 'rejects' },
  { what: 'a lastTransitionTime that is not a time', health: health([target('nuc', { lastTransitionTime: 'yesterday' })]), zod: 'rejects', crd: 'rejects' },
  { what: 'no ready', health: health([target('nuc', { ready: undefined })]), zod: 'rejects', crd: 'rejects' },
  { what: 'a negative duration', health: health([target('nuc', { durationSeconds: -1 })]), zod: 'rejects', crd: 'rejects' },
  { what: 'two targets of one name (a list-map key twice)', health: health([target('nuc'), target('nuc')]), zod: 'accepts', crd: 'rejects' },
];
