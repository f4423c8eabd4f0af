import type { Registry } from 'prom-client';
import type { AppConfig } from '../config/app.ts';
import type { EventSink } from '../events/event-sink.ts';
import type { Logger } from '../logging.ts';
import { createLifeFailureCounter } from '../metrics/usage-metrics.ts';
import type { RedisClient } from '../redis/connections.ts';
import { boundedStep } from '../roles/role-lifecycle.ts';
import type { ShutdownPlan } from '../roles/shutdown-plan.ts';
import type { ProxyReader } from '../store/proxy-store.ts';
import { recordingLives } from '../events/usage-lives.ts';
import { instanceKinds } from '../usage/machine-types.ts';
import { RedisUsageStore } from '../usage/redis-usage-store.ts';
import type { UsageStore } from '../usage/usage-store.ts';

/** How long the shutdown waits for instance lives still being written. */
const SETTLE_MS = 2000;

/** The fleet's usage store (docs/usage.md): in the roles' Redis, under the fleet's prefix, with the configured prices. */
export function createUsageStore(config: Pick<AppConfig, 'redis' | 'prices' | 'usage'>, redis: RedisClient): UsageStore {
  return new RedisUsageStore(redis, config.redis.prefix, { prices: config.prices, ...(config.usage ? { settings: config.usage } : {}) });
}

/**
 * The worker's event sink with instance lives recorded in the usage store as InstanceCreated and
 * InstanceDeleted pass (src/events/usage-lives.ts); the shutdown waits a moment for lives in flight.
 */
export function lifeRecordingSink(
  inner: EventSink,
  parts: { config: AppConfig; usage: UsageStore; proxies: Pick<ProxyReader, 'get'>; logger: Logger; registry: Registry; plan: ShutdownPlan },
): EventSink {
  const sink = recordingLives(inner, {
    lives: parts.usage,
    proxies: parts.proxies,
    kinds: instanceKinds(parts.config.providers),
    logger: parts.logger.child({ component: 'usage' }),
    onFailure: createLifeFailureCounter(parts.registry),
  });
  parts.plan.add(boundedStep('the usage lives in flight', SETTLE_MS, () => sink.settled()));
  return sink;
}
