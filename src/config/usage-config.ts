/*
 * The configuration file's usage sections (docs/usage.md#instances-prices-and-the-usage-api):
 * `prices:`, the table costs are computed from (src/usage/prices.ts), and `usage:`, how much the
 * usage store keeps. Schemas only; what they mean is src/usage's.
 */
import { z } from 'zod';
import { parseDuration } from '../schema/duration.ts';
import { resourceName } from '../schema/zod-helpers.ts';

const price = z.number().nonnegative().finite();
/** Prices by provider name. */
const byProvider = z.record(resourceName, price);
/** Per instance-hour of one provider: by machine type, `default` for any other. */
const machinePrices = z.record(z.string().min(1).max(128), price);

export const priceTableSchema = z.strictObject({
  /** What the prices are in (ISO 4217 letters, or any short word): shown beside every cost. */
  currency: z
    .string()
    .regex(/^[A-Za-z]{1,8}$/, 'expected a currency code such as USD or EUR')
    .default('USD'),
  /** Per instance-hour, by provider, then by machine type (`default`: every other type). */
  instanceHour: z.record(resourceName, machinePrices).default({}),
  /** Per GB (10^9 bytes) carried by the provider's proxies, both ways. */
  egressGB: byProvider.default({}),
  /** Per GB an upstream vendor charges (an `upstream` provider's traffic), both ways. */
  vendorGB: byProvider.default({}),
  /** Per public IPv4 address and hour: one per instance of the providers named. */
  ipv4Hour: byProvider.default({}),
});

export type PriceTable = z.infer<typeof priceTableSchema>;

/** How much the usage store keeps (`usage:`; every field optional). */
export interface UsageSettings {
  /** Distinct destination domains kept per pool and hour; the rest are summed into `other`. */
  maxDomainsPerPoolHour: number;
  /** How long traffic buckets and ended lives are kept. */
  retentionMs: number;
  /** How often the worker hands the proxies' traffic counts to the store (the traffic collector). */
  collectIntervalMs: number;
}

export const DEFAULT_USAGE_SETTINGS: UsageSettings = Object.freeze({ maxDomainsPerPoolHour: 50, retentionMs: 400 * 24 * 3_600_000, collectIntervalMs: 60_000 });

export const usageSectionSchema = z
  .strictObject({
    /** Distinct domains kept per pool and hour (default 50). */
    domainsPerPoolHour: z.number().int().min(1).max(10_000).default(DEFAULT_USAGE_SETTINGS.maxDomainsPerPoolHour),
    /** How many days usage is kept (default 400). */
    retentionDays: z.number().int().min(1).max(3650).default(400),
    /** How often the worker stores the proxies' traffic counts (a duration from 1s to 1h; default 1m). */
    collectInterval: z
      .string()
      .refine((t) => {
        const ms = parseDuration(t) ?? -1;
        return ms >= 1000 && ms <= 3_600_000;
      }, 'expected a duration from 1s to 1h, such as 30s or 5m')
      .optional(),
  })
  .transform((u): UsageSettings => ({
    maxDomainsPerPoolHour: u.domainsPerPoolHour,
    retentionMs: u.retentionDays * 24 * 3_600_000,
    collectIntervalMs: u.collectInterval === undefined ? DEFAULT_USAGE_SETTINGS.collectIntervalMs : (parseDuration(u.collectInterval) ?? 60_000),
  }));
