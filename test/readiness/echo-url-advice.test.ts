import { describe, expect, test } from 'vitest';
import { providerSchema, type ProviderConfig } from '../../src/providers/config.ts';
import { echoUrlAdvice } from '../../src/readiness/echo-url-advice.ts';

function providers(yaml: unknown): ProviderConfig[] {
  return (yaml as unknown[]).map((p) => providerSchema.parse(p));
}

describe('echo URL advice for readiness probes', () => {
  const local = { name: 'local', type: 'local' };
  const k8s = { name: 'k8s', type: 'kubernetes', namespace: 'proxies', proxies: { image: 'proxy:1' } };
  const k8sChecksOnly = { name: 'k8s-health', type: 'kubernetes' };

  test('a loopback echo URL is fine for local proxies and for providers that host none', () => {
    expect(echoUrlAdvice(providers([local, k8sChecksOnly]), 'http://127.0.0.1:8080/v1/echo')).toBeUndefined();
  });

  test('a loopback echo URL with proxies on a remote provider names the providers and the flag', () => {
    const advice = echoUrlAdvice(providers([local, k8s]), 'http://localhost:8080/v1/echo');
    expect(advice).toMatch(/^readiness probes of proxies on "k8s" request http:\/\/localhost:8080\/v1\/echo through each proxy/);
    expect(advice).toContain('set --echo-url');
  });

  test('a routable echo URL is fine', () => {
    expect(echoUrlAdvice(providers([k8s]), 'http://10.0.0.5:8080/v1/echo')).toBeUndefined();
  });
});
