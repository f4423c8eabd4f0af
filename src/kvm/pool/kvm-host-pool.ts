/** The host pool as the KVM provider uses it: KvmHostConfig hosts, HostConnection connections. */
import type { KvmHostConfig } from '../host-config.ts';
import { dialHost, type DialHostOptions, type HostConnection } from '../host-connection.ts';
import { HostPool } from './host-pool.ts';
import type { HostPoolOptions } from './types.ts';

export type KvmHostPool = HostPool<KvmHostConfig, HostConnection>;

export interface KvmHostPoolOptions extends Omit<HostPoolOptions<KvmHostConfig, HostConnection>, 'dial'> {
  /** How connections are dialled (SSH timeouts, libvirt keepalive and metrics). Its logger defaults to the pool's. */
  dialOptions?: Omit<DialHostOptions, 'logger'> & { logger?: DialHostOptions['logger'] };
}

export function createKvmHostPool(options: KvmHostPoolOptions): KvmHostPool {
  const { dialOptions, ...poolOptions } = options;
  const dial: DialHostOptions = { ...dialOptions, logger: dialOptions?.logger ?? options.logger };
  return new HostPool<KvmHostConfig, HostConnection>({ ...poolOptions, dial: (host, signal) => dialHost(host, signal, dial) });
}
