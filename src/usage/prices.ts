/*
 * The price table (the configuration file's optional `prices:` section, docs/usage.md) and the one
 * cost rule: instance hours × the provider's price for the machine type, plus egress GB × the
 * provider's egress price, plus vendor GB × the upstream vendor's price, plus IPv4 hours × the
 * provider's IPv4 price (one address per instance). Pure: no I/O, no clock.
 */
import type { PriceTable } from '../config/usage-config.ts';

export { priceTableSchema, type PriceTable } from '../config/usage-config.ts';

/** Bytes in the GB prices are quoted per (decimal, as clouds bill egress). */
export const BYTES_PER_GB = 1e9;

/** The provider names a price table mentions, with where (`prices.egressGB.gcp`), for checking them against the providers. */
export function pricedProviders(table: PriceTable): { provider: string; path: (string | number)[] }[] {
  const out: { provider: string; path: (string | number)[] }[] = [];
  for (const section of ['instanceHour', 'egressGB', 'vendorGB', 'ipv4Hour'] as const) {
    for (const provider of Object.keys(table[section])) out.push({ provider, path: ['prices', section, provider] });
  }
  return out;
}

/** What a cost is made of, in the table's currency. */
export interface CostBreakdown {
  instances: number;
  egress: number;
  vendor: number;
  ipv4: number;
  total: number;
}

export function zeroCost(): CostBreakdown {
  return { instances: 0, egress: 0, vendor: 0, ipv4: 0, total: 0 };
}

/** What one provider's part of a row used: instance seconds by machine type, and bytes carried both ways. */
export interface CostInput {
  provider: string;
  /** Seconds of instance life by machine type. */
  instanceSeconds: Readonly<Record<string, number>>;
  /** Payload bytes carried, up and down. */
  bytes: number;
}

/** The price of an instance-hour of `machineType` on `provider`: its own, else the provider's `default`, else 0. */
export function instanceHourPrice(prices: PriceTable, provider: string, machineType: string): number {
  const table = prices.instanceHour[provider];
  return table?.[machineType] ?? table?.default ?? 0;
}

/** The cost of one provider's usage; without a price table, every part is 0. */
export function costOf(input: CostInput, prices: PriceTable | undefined): CostBreakdown {
  const cost = zeroCost();
  if (!prices) return cost;
  let seconds = 0;
  for (const [machineType, s] of Object.entries(input.instanceSeconds)) {
    cost.instances += (s / 3600) * instanceHourPrice(prices, input.provider, machineType);
    seconds += s;
  }
  const gb = input.bytes / BYTES_PER_GB;
  cost.egress = gb * (prices.egressGB[input.provider] ?? 0);
  cost.vendor = gb * (prices.vendorGB[input.provider] ?? 0);
  cost.ipv4 = (seconds / 3600) * (prices.ipv4Hour[input.provider] ?? 0);
  cost.total = cost.instances + cost.egress + cost.vendor + cost.ipv4;
  return cost;
}

/** `into` += `more`, part by part. */
export function addCost(into: CostBreakdown, more: CostBreakdown): CostBreakdown {
  into.instances += more.instances;
  into.egress += more.egress;
  into.vendor += more.vendor;
  into.ipv4 += more.ipv4;
  into.total += more.total;
  return into;
}

/** A cost rounded for display and JSON: 6 decimals (a millionth of the currency unit), so sums of floats read cleanly. */
export function roundCost(cost: CostBreakdown): CostBreakdown {
  const r = (n: number): number => Math.round(n * 1e6) / 1e6;
  return { instances: r(cost.instances), egress: r(cost.egress), vendor: r(cost.vendor), ipv4: r(cost.ipv4), total: r(cost.total) };
}
