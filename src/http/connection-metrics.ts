import { Counter, type Registry } from 'prom-client';

const refusalsByRegistry = new WeakMap<Registry, Counter<'listener' | 'reason'>>();
const observerByRegistry = new WeakMap<Registry, Counter<'where' | 'code'>>();

/**
 * `proxy_operator_http_connections_refused_total{listener,reason}`: sockets a listener closed at
 * accept past its cap (`over-capacity`) and requests it answered 503 on a reserve socket
 * (`reserved-only`: only /healthz, /readyz and the echo are served there). One per registry.
 */
export function connectionRefusals(registry: Registry): Counter<'listener' | 'reason'> {
  let counter = refusalsByRegistry.get(registry);
  if (!counter) {
    counter = new Counter({
      name: 'proxy_operator_http_connections_refused_total',
      help: 'Connections a listener refused at its cap (over-capacity) and requests refused on a reserve connection (reserved-only), by listener.',
      labelNames: ['listener', 'reason'],
      registers: [registry],
    });
    refusalsByRegistry.set(registry, counter);
  }
  return counter;
}

/**
 * `proxy_operator_observer_errors_total{where,code}`: looks at a proxy (a probe, the proxy host's
 * pid or socket) that failed for want of the observer's own resources (EMFILE, ENFILE, ENOMEM):
 * nothing was concluded about the proxy. One per registry.
 */
export function observerErrors(registry: Registry): Counter<'where' | 'code'> {
  let counter = observerByRegistry.get(registry);
  if (!counter) {
    counter = new Counter({
      name: 'proxy_operator_observer_errors_total',
      help: 'Looks at proxies abandoned because this process ran out of its own resources (EMFILE, ENFILE, ENOMEM); no proxy was judged by them.',
      labelNames: ['where', 'code'],
      registers: [registry],
    });
    observerByRegistry.set(registry, counter);
  }
  return counter;
}
