/** The cost rule (src/usage/prices.ts), row by row, and the price table's validation. */
import { describe, expect, it } from 'vitest';
import { parseConfigDocument } from '../../src/config/file.ts';
import { costOf, instanceHourPrice, priceTableSchema, type CostInput } from '../../src/usage/prices.ts';

const prices = priceTableSchema.parse({
  currency: 'USD',
  instanceHour: { gcp: { default: 0.04, 'e2-micro': 0.01 }, kvm: { small: 0.002 } },
  egressGB: { gcp: 0.12 },
  vendorGB: { brightdata: 8 },
  ipv4Hour: { gcp: 0.005 },
});

const HOUR = 3600;

describe('costOf', () => {
  const rows: [string, CostInput, { instances: number; egress: number; vendor: number; ipv4: number }][] = [
    ['nothing used', { provider: 'gcp', instanceSeconds: {}, bytes: 0 }, { instances: 0, egress: 0, vendor: 0, ipv4: 0 }],
    [
      'a machine type of its own',
      { provider: 'gcp', instanceSeconds: { 'e2-micro': 10 * HOUR }, bytes: 0 },
      { instances: 0.1, egress: 0, vendor: 0, ipv4: 0.05 },
    ],
    [
      'the provider default',
      { provider: 'gcp', instanceSeconds: { 'n2-standard-2': HOUR / 2 }, bytes: 0 },
      { instances: 0.02, egress: 0, vendor: 0, ipv4: 0.0025 },
    ],
    [
      'two machine types, one IPv4 per instance-hour',
      { provider: 'gcp', instanceSeconds: { 'e2-micro': HOUR, other: HOUR }, bytes: 0 },
      { instances: 0.05, egress: 0, vendor: 0, ipv4: 0.01 },
    ],
    ['egress per GB (10^9 bytes)', { provider: 'gcp', instanceSeconds: {}, bytes: 2.5e9 }, { instances: 0, egress: 0.3, vendor: 0, ipv4: 0 }],
    [
      'a vendor per GB, no egress or IPv4 price',
      { provider: 'brightdata', instanceSeconds: { upstream: HOUR }, bytes: 5e8 },
      { instances: 0, egress: 0, vendor: 4, ipv4: 0 },
    ],
    [
      'no default and another type: free',
      { provider: 'kvm', instanceSeconds: { large: HOUR, small: 2 * HOUR }, bytes: 1e9 },
      { instances: 0.004, egress: 0, vendor: 0, ipv4: 0 },
    ],
    [
      'a provider the table does not name',
      { provider: 'local', instanceSeconds: { local: HOUR }, bytes: 1e9 },
      { instances: 0, egress: 0, vendor: 0, ipv4: 0 },
    ],
  ];
  it.each(rows)('%s', (_name, input, expected) => {
    const cost = costOf(input, prices);
    for (const [part, value] of Object.entries(expected)) expect(cost[part as keyof typeof expected]).toBeCloseTo(value, 9);
    expect(cost.total).toBeCloseTo(expected.instances + expected.egress + expected.vendor + expected.ipv4, 9);
  });

  it('costs nothing without a price table', () => {
    expect(costOf({ provider: 'gcp', instanceSeconds: { 'e2-micro': HOUR }, bytes: 1e12 }, undefined)).toEqual({
      instances: 0,
      egress: 0,
      vendor: 0,
      ipv4: 0,
      total: 0,
    });
  });

  it('looks up a machine type, then the default', () => {
    expect(instanceHourPrice(prices, 'gcp', 'e2-micro')).toBe(0.01);
    expect(instanceHourPrice(prices, 'gcp', 'e2-large')).toBe(0.04);
    expect(instanceHourPrice(prices, 'nowhere', 'e2-large')).toBe(0);
  });
});

describe('the price table', () => {
  it('defaults the currency and every section', () => {
    expect(priceTableSchema.parse({})).toEqual({ currency: 'USD', instanceHour: {}, egressGB: {}, vendorGB: {}, ipv4Hour: {} });
  });
  it.each([
    [{ egressGB: { gcp: -1 } }, ['egressGB', 'gcp']],
    [{ currency: 'US dollars' }, ['currency']],
    [{ instanceHour: { gcp: 0.1 } }, ['instanceHour', 'gcp']],
    [{ perGB: 1 }, []],
  ])('refuses %j', (table, path) => {
    const result = priceTableSchema.safeParse(table);
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.path).toEqual(path);
  });
});

describe('the configuration file', () => {
  const providers = [{ name: 'gcp', type: 'local' }];
  it('reads prices and usage settings', () => {
    const file = parseConfigDocument(
      { providers, prices: { currency: 'EUR', egressGB: { gcp: 0.1 } }, usage: { domainsPerPoolHour: 10, retentionDays: 30, collectInterval: '30s' } },
      'egress.yaml',
    );
    expect(file.prices).toMatchObject({ currency: 'EUR', egressGB: { gcp: 0.1 } });
    expect(file.usage).toEqual({ maxDomainsPerPoolHour: 10, retentionMs: 30 * 86_400_000, collectIntervalMs: 30_000 });
    expect(parseConfigDocument({ providers, usage: {} }, 'egress.yaml').usage?.collectIntervalMs).toBe(60_000);
  });
  it.each([
    [{ prices: { ipv4Hour: { nowhere: 0.005 } } }, /prices\.ipv4Hour\.nowhere: no provider is named "nowhere"/],
    [{ prices: { egressGB: { gcp: 'cheap' } } }, /prices\.egressGB\.gcp/],
    [{ usage: { retentionDays: 0 } }, /usage\.retentionDays/],
    [{ usage: { collectInterval: '500ms' } }, /usage\.collectInterval/],
    [{ usage: { collectInterval: '2h' } }, /usage\.collectInterval/],
    [{ usage: { domains: 3 } }, /usage.*domains/],
  ])('names the field at fault in %j', (extra, message) => {
    expect(() => parseConfigDocument({ providers, ...extra }, 'egress.yaml')).toThrow(message);
  });
});
