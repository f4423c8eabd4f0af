/**
 * Spans of provider calls, exported to a real OTLP receiver: the Kubernetes client's HTTP calls
 * (fake apiserver), the Compute client's (fake Compute), and a KVM host dial (each stage) and
 * its libvirt RPCs against the real sshd + libvirtd of the KVM test host.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { dialHost } from '../../src/kvm/host-connection.ts';
import { silentLogger } from '../../src/logging.ts';
import { createGcpProvider, gcpProviderSchema } from '../../src/providers/gcp/index.ts';
import { createKubernetesProvider, kubernetesProviderSchema } from '../../src/providers/kubernetes/index.ts';
import { telemetryFromEnv } from '../../src/telemetry/config.ts';
import { withSpan } from '../../src/telemetry/spans.ts';
import { startTracing, type TracingRuntime } from '../../src/telemetry/tracing.ts';
import { startFakeCompute } from '../fakes/compute/index.ts';
import { generateKeyPair } from '../fakes/ssh/index.ts';
import { startFakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';
import { kvmHostConfigOf, kvmTestHost } from '../support/kvm-host.ts';
import { descendsFrom, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.ts';
import { tempDir } from '../support/temp-dirs.ts';

const KUBE_TOKEN = 'kube-token-8d1f0c3b5e';
const GCP_TOKEN = 'gcp-token-2a7e9f4c1d';
const deps = () => ({ logger: silentLogger(), registry: new Registry(), dataDir: '/nonexistent' });

let receiver: OtlpReceiver;
let tracing: TracingRuntime;
let dir: string;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  tracing = await startTracing(telemetryFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url }), ['worker']);
  dir = await tempDir('egress-provider-spans-');
});
afterAll(async () => {
  await tracing.shutdown();
  await receiver.close();
});

/** Runs `work` under a root span named `root`, exports, and returns that root's trace. */
async function traced(root: string, work: () => Promise<unknown>): Promise<{ root: ReceivedSpan; trace: ReceivedSpan[] }> {
  await withSpan(root, {}, async () => {
    await work().catch(() => undefined);
  });
  await tracing.flush();
  const spans = await receiver.waitFor((all) => all.some((s) => s.name === root));
  const top = spans.find((s) => s.name === root) as ReceivedSpan;
  return { root: top, trace: spans.filter((s) => s.traceId === top.traceId) };
}

describe('provider calls as spans', () => {
  test('a Kubernetes health check: one span per HTTP call, with method, path and status, never the token', async () => {
    const kube = await startFakeKubeApiserver({ tokens: { [KUBE_TOKEN]: 'system:serviceaccount:egress:operator' } });
    const tokenFile = join(dir, 'kube-token');
    await writeFile(tokenFile, `${KUBE_TOKEN}\n`);
    const provider = createKubernetesProvider(
      kubernetesProviderSchema.parse({ name: 'k8s', type: 'kubernetes', server: kube.url, tokenFile, skipTLSVerify: true }),
      deps(),
    );
    try {
      const { root, trace } = await traced('k8s-check', () => provider.check(AbortSignal.timeout(20_000)));
      const calls = trace.filter((s) => s.name.startsWith('kubernetes '));
      expect(calls.length).toBeGreaterThan(0);
      for (const call of calls) {
        expect(call.parentSpanId).toBe(root.spanId);
        expect(call.attributes).toMatchObject({ 'server.address': '127.0.0.1', 'http.response.status_code': 200 });
        expect(String(call.attributes['url.path'])).toMatch(/^\/api/);
      }
    } finally {
      await provider.close();
      await kube.close();
    }
    for (const { body } of receiver.requests) expect(body.includes(Buffer.from(KUBE_TOKEN))).toBe(false);
  });

  test('a Compute health check: the aggregatedList call as a span with its project, never the token', async () => {
    const compute = await startFakeCompute({ project: 'egress-test', tokens: [GCP_TOKEN] });
    const accessTokenFile = join(dir, 'gcp-token');
    await writeFile(accessTokenFile, `${GCP_TOKEN}\n`);
    const provider = createGcpProvider(
      gcpProviderSchema.parse({
        name: 'gce',
        type: 'gcp',
        project: 'egress-test',
        accessTokenFile,
        apiEndpoint: '127.0.0.1',
        port: compute.port,
        protocol: 'http',
      }),
      deps(),
    );
    try {
      const { root, trace } = await traced('gcp-check', () => provider.check(AbortSignal.timeout(20_000)));
      const list = trace.find((s) => s.name === 'compute aggregatedList');
      expect(list).toMatchObject({
        parentSpanId: root.spanId,
        attributes: { 'rpc.system': 'google_compute', 'rpc.method': 'aggregatedList', 'egress.gcp.project': 'egress-test' },
        status: { code: 0 },
      });
    } finally {
      await provider.close();
      await compute.close();
    }
    for (const { body } of receiver.requests) expect(body.includes(Buffer.from(GCP_TOKEN))).toBe(false);
  });

  test('a KVM host dial: a span per stage, a span per libvirt RPC named by its procedure', async () => {
    const host = kvmHostConfigOf(await kvmTestHost(), 'traced-host');
    const { root, trace } = await traced('kvm-dial', async () => {
      const conn = await dialHost(host, AbortSignal.timeout(20_000), { logger: silentLogger(), keepalive: false });
      try {
        await conn.libvirt.getLibVersion(AbortSignal.timeout(10_000));
      } finally {
        await conn.close();
      }
    });
    const dial = trace.find((s) => s.name === 'kvm dial') as ReceivedSpan;
    expect(dial).toMatchObject({ parentSpanId: root.spanId, attributes: { 'egress.kvm.host': 'traced-host', 'server.port': host.port } });
    const stages = trace.filter((s) => s.parentSpanId === dial.spanId).map((s) => s.attributes['egress.dial.stage']);
    expect(stages.sort()).toEqual(['libvirt-connect', 'ssh-material', 'tcp', 'ssh-handshake'].sort());
    const connect = trace.find((s) => s.name === 'kvm dial libvirt-connect') as ReceivedSpan;
    const rpcs = trace.filter((s) => s.attributes['rpc.system'] === 'libvirt');
    expect(rpcs.map((s) => s.name)).toEqual(expect.arrayContaining(['libvirt connect_open', 'libvirt connect_get_lib_version']));
    const open = rpcs.find((s) => s.name === 'libvirt connect_open') as ReceivedSpan;
    expect(descendsFrom(trace, open, connect)).toBe(true);
    expect(rpcs.find((s) => s.name === 'libvirt connect_get_lib_version')).toMatchObject({
      parentSpanId: root.spanId,
      attributes: { 'rpc.method': 'connect_get_lib_version' },
    });
  });

  test('a failed dial: the stage’s span records the exception with the error code', async () => {
    const other = join(dir, 'id_other');
    await writeFile(other, generateKeyPair().privateKey, { mode: 0o600 });
    const host = kvmHostConfigOf(await kvmTestHost(), 'refused-key', { privateKeyFile: other });
    const { trace } = await traced('kvm-dial-refused', () => dialHost(host, AbortSignal.timeout(20_000), { logger: silentLogger(), keepalive: false }));
    const failed = trace.find((s) => s.name === 'kvm dial ssh-handshake');
    expect(failed).toMatchObject({ status: { code: 2 }, attributes: { 'egress.error.code': 'ERR_KVM_DIAL', 'egress.dial.failed_stage': 'ssh-handshake' } });
    expect(failed?.events.find((e) => e.name === 'exception')?.attributes).toMatchObject({ 'exception.type': 'DialError' });
    expect(trace.find((s) => s.name === 'kvm dial')).toMatchObject({ status: { code: 2 }, attributes: { 'egress.error.code': 'ERR_KVM_DIAL' } });
  });
});
