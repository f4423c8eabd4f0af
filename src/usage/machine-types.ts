/*
 * What an instance runs on and where, as usage accounting names it, from its provider's
 * configuration: the price table's machine types (docs/usage.md) and the gauge's labels. The
 * provider's shape is described here rather than imported, so src/usage depends on no provider.
 */

/** The parts of a provider's configuration (src/providers/*\/config.ts) that say what its instances are. */
export interface ProviderShape {
  readonly name: string;
  readonly type: string;
  /** gcp: the default zone. */
  readonly zone?: string;
  /** kubernetes: the default namespace. */
  readonly namespace?: string;
  readonly proxies?:
    | {
        /** gcp */
        readonly machineType?: string | undefined;
        readonly instanceTemplate?: string | undefined;
        /** kvm */
        readonly vcpus?: number;
        readonly memoryMiB?: number;
        /** Every provider's proxies have one (and it keeps this type from being a weak type). */
        readonly egressPolicy?: unknown;
      }
    | undefined;
}

/**
 * gcp: the machine type (`e2-small`), else `template/<name>` of an instance template, else
 * `default`; kvm: `<vcpus>cpu-<memory>mib` (`1cpu-256mib`); kubernetes: `pod`; local: `local`;
 * upstream: `upstream`.
 */
export function machineTypeOf(provider: ProviderShape): string {
  const proxies = provider.proxies;
  switch (provider.type) {
    case 'gcp':
      if (proxies?.machineType) return proxies.machineType;
      if (proxies?.instanceTemplate) return `template/${proxies.instanceTemplate.split('/').pop() ?? ''}`;
      return 'default';
    case 'kvm':
      return `${proxies?.vcpus ?? 1}cpu-${proxies?.memoryMiB ?? 256}mib`;
    case 'kubernetes':
      return 'pod';
    default:
      return provider.type;
  }
}

/** Where an instance is when its event names no placement: gcp's zone, kubernetes' namespace, else the provider's type. */
export function defaultLocationOf(provider: ProviderShape): string {
  if (provider.type === 'gcp' && provider.zone) return provider.zone;
  if (provider.type === 'kubernetes' && provider.namespace) return provider.namespace;
  return provider.type;
}

/** Machine type and default location of every configured provider, by name. */
export function instanceKinds(providers: readonly ProviderShape[]): ReadonlyMap<string, { machineType: string; location: string }> {
  return new Map(providers.map((p) => [p.name, { machineType: machineTypeOf(p), location: defaultLocationOf(p) }]));
}
