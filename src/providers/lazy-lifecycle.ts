import type { ProxyLifecycle } from './lifecycle.ts';

/** A lifecycle built on first use, for providers whose clients are costly to create. */
export function lazyLifecycle(build: () => ProxyLifecycle): ProxyLifecycle {
  let built: ProxyLifecycle | undefined;
  const get = (): ProxyLifecycle => (built ??= build());
  return {
    ensureInstance: (spec, signal) => get().ensureInstance(spec, signal),
    getInstance: (name, placement, signal) => get().getInstance(name, placement, signal),
    deleteInstance: (name, placement, target, signal) => get().deleteInstance(name, placement, target, signal),
    listInstances: (fleet, signal) => get().listInstances(fleet, signal),
  };
}
