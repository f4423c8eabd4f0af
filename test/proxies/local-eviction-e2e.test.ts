import { afterEach, describe, expect, test } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import type { AppConfig } from '../../src/config/app.ts';
import { silentLogger } from '../../src/logging.ts';
import type { ProxyView } from '../../src/proxies/discovery.ts';
import { testConfig, uniquePrefix } from '../support/config.ts';
import { waitFor } from '../support/wait.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { childrenOf } from '../support/process-children.ts';

/**
 * Eviction on the local provider with every part real: the roles in one process, the detached
 * proxy processes, the probe loop and the exit watch. The resync is off, so nothing but these
 * two can take a proxy out of discovery or bring it back.
 */

interface Stack {
  roles: RunningRoles;
  api: string;
}

async function start(config: AppConfig): Promise<Stack> {
  const roles = await runRoles(config, ['publisher', 'worker', 'scheduler', 'api'], silentLogger());
  return { roles, api: roles.api?.url ?? '' };
}

async function proxyOf(api: string, name: string): Promise<ProxyView> {
  return (await (await fetch(`${api}/v1/proxies/${name}`)).json()) as ProxyView;
}

async function readyNames(api: string): Promise<string[]> {
  const { items } = (await (await fetch(`${api}/v1/proxies?ready=true`)).json()) as { items: ProxyView[] };
  return items.map((p) => p.name);
}

async function apply(api: string, name: string): Promise<ProxyView> {
  const res = await fetch(`${api}/v1/proxies`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ metadata: { name }, spec: { provider: 'local' } }),
  });
  expect(res.status).toBe(200);
  return waitFor(
    `${name} to be Ready`,
    async () => {
      const p = await proxyOf(api, name);
      return p.status?.phase === 'Ready' ? p : undefined;
    },
    30_000,
  );
}

function metric(text: string, line: string): number {
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? 0 : Number(found.slice(line.length + 1));
}

describe('eviction on the local provider', () => {
  const stacks: Stack[] = [];
  const stopped: number[] = [];
  afterEach(async () => {
    for (const pid of stopped.splice(0)) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {
        // gone
      }
    }
    const last = stacks.at(-1);
    if (last) {
      const { items } = (await (await fetch(`${last.api}/v1/proxies`)).json()) as { items: ProxyView[] };
      for (const p of items) await fetch(`${last.api}/v1/proxies/${p.name}`, { method: 'DELETE' });
      await waitFor(
        'every proxy gone',
        async () => ((await (await fetch(`${last.api}/v1/proxies`)).json()) as { items: unknown[] }).items.length === 0,
        30_000,
      );
    }
    for (const s of stacks.splice(0).reverse()) await s.roles.close();
  });

  test('a killed proxy process leaves discovery at once and is restarted, also by a worker that adopted it, without a probe', async () => {
    const dataDir = await tempDir('egress-evict-');
    const prefix = uniquePrefix();
    // Probes every minute only: what happens here is the exit watch's doing.
    const config = testConfig({ queues: ['reconcile'], resyncMs: 0, dataDir, prefix, readiness: { intervalMs: 60_000, timeoutMs: 2000 } });
    let stack = await start(config);
    stacks.push(stack);
    const first = await apply(stack.api, 'kill-1');
    // The instance id is `<proxy host pid>:<port>`: the host serving the proxy is what is killed.
    const pid1 = Number(first.status.instanceId?.split(':')[0]);
    process.kill(pid1, 'SIGKILL');
    const second = await waitFor(
      'a new process behind kill-1',
      async () => {
        const p = await proxyOf(stack.api, 'kill-1');
        return p.status.phase === 'Ready' && p.status.instanceId !== first.status.instanceId ? p : undefined;
      },
      30_000,
    );
    expect(second.status.url).toBe(first.status.url);
    expect(second.status.conditions[0]?.lastTransitionTime).not.toBe(first.status.conditions[0]?.lastTransitionTime);
    let metrics = await (await fetch(`${stack.api}/metrics`)).text();
    expect(metric(metrics, 'proxy_operator_proxy_evictions_total{provider="local",cause="process-exited"}')).toBe(1);

    // A new worker adopts the running process (it did not spawn it) and still notices its exit.
    await stack.roles.close();
    stacks.pop();
    stack = await start(config);
    stacks.push(stack);
    // The new worker learns of the process from the data directory when it starts watching.
    const pid2 = Number(second.status.instanceId?.split(':')[0]);
    process.kill(pid2, 'SIGKILL');
    const third = await waitFor(
      'a new process behind kill-1 after adoption',
      async () => {
        const p = await proxyOf(stack.api, 'kill-1');
        return p.status.phase === 'Ready' && p.status.instanceId !== second.status.instanceId ? p : undefined;
      },
      30_000,
    );
    expect(third.status.url).toBe(first.status.url);
    metrics = await (await fetch(`${stack.api}/metrics`)).text();
    expect(metric(metrics, 'proxy_operator_proxy_evictions_total{provider="local",cause="process-exited"}')).toBe(1);
  });

  test('a stopped (SIGSTOP) proxy process leaves discovery on its first timed-out probe and returns after SIGCONT', async () => {
    const config = testConfig({ queues: ['reconcile'], resyncMs: 0, readiness: { intervalMs: 1000, timeoutMs: 3000 } });
    const stack = await start(config);
    stacks.push(stack);
    const ready = await apply(stack.api, 'stop-1');
    const pid = Number(ready.status.instanceId?.split(':')[0]);
    // The host and its relay processes all accept the proxy's connections: the proxy hangs only when every one is stopped.
    const serving = [pid, ...(await childrenOf(pid))];
    for (const p of serving) process.kill(p, 'SIGSTOP');
    stopped.push(...serving);
    const evicted = await waitFor(
      'stop-1 out of discovery',
      async () => !(await readyNames(stack.api)).includes('stop-1') && (await proxyOf(stack.api, 'stop-1')),
      30_000,
    );
    expect(evicted.status).toMatchObject({ phase: 'Provisioning', instanceId: ready.status.instanceId });
    expect(evicted.status.lastError).toMatch(/no answer within 3000 ms/);
    const metrics = await (await fetch(`${stack.api}/metrics`)).text();
    expect(metric(metrics, 'proxy_operator_proxy_evictions_total{provider="local",cause="timeout"}')).toBe(1);
    for (const p of serving) process.kill(p, 'SIGCONT');
    stopped.splice(0);
    const back = await waitFor(
      'stop-1 back in discovery',
      async () => (await readyNames(stack.api)).includes('stop-1') && (await proxyOf(stack.api, 'stop-1')),
      30_000,
    );
    // The same process came back (it was never replaced).
    expect(back.status.instanceId).toBe(ready.status.instanceId);
  });
});
