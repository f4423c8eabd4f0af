import { afterEach, describe, expect, it } from 'vitest';
import { PROCEDURES, type ProcedureKey } from '../../src/kvm/libvirt/procedures.ts';
import { RPC_DURATION_METRIC } from '../../src/kvm/libvirt/metrics.ts';
import { openOnFake, type FakeHarness } from '../fakes/libvirt/harness.ts';
import { SAMPLE_ARGS, sampleVol } from '../fakes/libvirt/samples.ts';

let h: FakeHarness | undefined;
afterEach(async () => {
  h?.conn.destroy();
  await h?.server.close();
  h = undefined;
});

interface MetricValue {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

async function countSamples(harness: FakeHarness): Promise<Map<string, number>> {
  const metrics = (await harness.registry.getMetricsAsJSON()) as unknown as { name: string; values: MetricValue[] }[];
  const rpc = metrics.find((m) => m.name === RPC_DURATION_METRIC);
  const counts = new Map<string, number>();
  for (const v of rpc?.values ?? []) {
    if (v.metricName !== `${RPC_DURATION_METRIC}_count`) continue;
    const key = `${v.labels.procedure}/${v.labels.outcome}`;
    counts.set(key, (counts.get(key) ?? 0) + v.value);
  }
  return counts;
}

describe('observability', () => {
  it('every procedure of the table produces a debug log line and a histogram sample', async () => {
    h = await openOnFake();
    const keys = (Object.keys(PROCEDURES) as ProcedureKey[]).sort((a, b) => Number(a === 'connectClose') - Number(b === 'connectClose'));
    expect(keys.at(-1)).toBe('connectClose');
    for (const key of keys) {
      const def = PROCEDURES[key];
      const before = h.log.lines.length;
      const signal = AbortSignal.timeout(10_000);
      // Outcomes do not matter here (many samples fail on the fake's state); observation does.
      const run =
        def.stream === 'upload'
          ? h.conn.storageVolUpload(sampleVol, [Buffer.from('x')], {}, signal)
          : def.stream === 'download'
            ? h.conn.storageVolDownload(sampleVol, () => undefined, {}, signal)
            : h.conn.call(key, SAMPLE_ARGS[key] as never, signal);
      await run.catch(() => undefined);
      const line = h.log.lines.slice(before).find((l) => l.msg === 'libvirt call' && l.procedure === def.name);
      expect(line, `log line for ${key}`).toBeDefined();
      expect(line!.level, `${key} logs at debug`).toBe(20);
      expect(typeof line!.serial, `${key} logs its serial`).toBe('number');
      expect(typeof line!.durationMs, `${key} logs its duration`).toBe('number');
    }
    const counts = await countSamples(h);
    for (const key of keys) {
      const name = PROCEDURES[key].name;
      const total = [...counts].filter(([k]) => k.startsWith(`${name}/`)).reduce((n, [, c]) => n + c, 0);
      expect(total, `histogram samples for ${name}`).toBeGreaterThanOrEqual(1);
    }
  });

  it('labels outcomes by error kind', async () => {
    h = await openOnFake();
    const signal = AbortSignal.timeout(10_000);
    await h.conn.domainLookupByName('missing', signal).catch(() => undefined);
    await h.conn.getHostname(signal);
    const counts = await countSamples(h);
    expect(counts.get('domain_lookup_by_name/not-found')).toBe(1);
    expect(counts.get('connect_get_hostname/ok')).toBe(1);
    expect(counts.get('connect_open/ok')).toBe(1);
  });
});
