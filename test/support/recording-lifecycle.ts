import type { Instance, InstanceSpec, ProvisioningError, ProxyLifecycle } from '../../src/providers/lifecycle.ts';

/**
 * An in-memory lifecycle for the reconcile logic's own rules (idempotency, failure, deletion).
 * The providers' real lifecycles are tested against their real or faithful backends.
 */
export class RecordingLifecycle implements ProxyLifecycle {
  /** Instances by `placement/name`: the same name at two placements is two instances. */
  readonly instances = new Map<string, Instance>();
  creates = 0;
  failNext: ProvisioningError | undefined;
  startAs: Instance['state'] = 'running';
  deleteTakes = 0;
  static key(name: string, placement?: string): string {
    return `${placement ?? ''}/${name}`;
  }
  async ensureInstance(spec: InstanceSpec): Promise<Instance> {
    const existing = this.instances.get(RecordingLifecycle.key(spec.name, spec.placement));
    if (existing) return existing;
    if (this.failNext) throw this.failNext;
    this.creates++;
    const inst: Instance = {
      name: spec.name,
      id: `id-${this.creates}`,
      state: this.startAs,
      owner: spec.owner,
      createdAt: new Date().toISOString(),
      endpoint: { host: '127.0.0.1', port: 3000 + this.creates },
      ...(spec.placement ? { placement: spec.placement } : {}),
    };
    this.instances.set(RecordingLifecycle.key(spec.name, spec.placement), inst);
    return inst;
  }
  async getInstance(name: string, placement?: string): Promise<Instance | undefined> {
    return this.instances.get(RecordingLifecycle.key(name, placement));
  }
  async deleteInstance(name: string, placement?: string): Promise<void> {
    if (this.deleteTakes-- > 0) return;
    this.instances.delete(RecordingLifecycle.key(name, placement));
  }
  async *listInstances(): AsyncIterable<Instance> {
    yield* this.instances.values();
  }
}
