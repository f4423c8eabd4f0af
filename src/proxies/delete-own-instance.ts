import { ForeignInstanceError, type InstanceOwner, type ProxyLifecycle } from '../providers/lifecycle.ts';

/**
 * A reconcile's delete of its proxy's own instance: the name is the one it derived from its fleet
 * and the proxy's uid (`instanceNameFor`), so parts without an owner of their own may go by it.
 * An object there that carries another owner (or none) is not this proxy's and is left alone:
 * `foreign`, with why — for the proxy, nothing of its own is left at that name.
 */
export async function deleteOwnInstance(
  lifecycle: ProxyLifecycle,
  name: string,
  placement: string | undefined,
  owner: InstanceOwner,
  signal: AbortSignal,
): Promise<{ kind: 'deleted' } | { kind: 'foreign'; why: string }> {
  try {
    await lifecycle.deleteInstance(name, placement, { owner, nameIsOurs: true }, signal);
    return { kind: 'deleted' };
  } catch (err) {
    if (err instanceof ForeignInstanceError) return { kind: 'foreign', why: err.message };
    throw err;
  }
}
