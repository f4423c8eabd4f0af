/**
 * A kube-apiserver that misbehaves on command (the fake's standing `misbehaviour` switches), driving the
 * real provider and store code through client-node: a `continue` token that repeats, a watch line far
 * past any object's size, a watch that sends headers and then nothing, a check answer of many MiB.
 * Each case asserts what a user would see (a clear error, a restarted watch, a failed check), never RSS.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { proxyCrd } from '../../src/crds/definitions.ts';
import { createLogger, silentLogger } from '../../src/logging.ts';
import { ListingPagesError } from '../../src/clients/page-bound.ts';
import { createKubernetesLifecycle } from '../../src/providers/kubernetes/lifecycle.ts';
import { createKubernetesProvider, kubernetesProviderSchema, MANAGED_LABELS } from '../../src/providers/kubernetes/index.ts';
import { KubernetesProxyStore } from '../../src/store/kubernetes/proxy-store.ts';
import { ProxyWatch } from '../../src/store/kubernetes/proxy-watch.ts';
import { startFakeKubeApiserver, type FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';
import { encodeContinue } from '../fakes/kube-apiserver/lists.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { waitFor } from '../support/wait.ts';

const PROXIES = '/apis/egress-proxies.io/v1alpha1/namespaces/default/proxies';
const MiB = 1024 * 1024;

let kube: FakeKubeApiserver;

beforeEach(async () => {
  kube = await startFakeKubeApiserver();
  kube.store.namespaces.add('proxies');
});

afterEach(async () => {
  await kube.close();
});

describe('a kube-apiserver whose continue token repeats', () => {
  it('fails the Pod listing with a clear error at the second occurrence, after two requests', async () => {
    kube.seedPod({ metadata: { name: 'p1', namespace: 'proxies', labels: { ...MANAGED_LABELS, 'egress-proxies.io/fleet': 'f' } } });
    // A token the fake accepts (its epoch 1, from the start): the server is stuck on the same page.
    const stuck = encodeContinue({ e: 1, rv: '1', k: '' });
    kube.misbehaviour = { repeatPageToken: stuck };
    const lifecycle = createKubernetesLifecycle({ kubeConfig: kube.kubeConfig(), namespace: 'proxies', logger: silentLogger() });

    const listed: unknown[] = [];
    const run = async (): Promise<void> => {
      for await (const i of lifecycle.listInstances('f', new AbortController().signal)) listed.push(i);
    };
    const err = await run().then(
      () => undefined,
      (e: unknown) => e,
    );

    expect(err).toBeInstanceOf(ListingPagesError);
    expect((err as Error).message).toBe(
      `listing proxy Pods: the server sent the same page token twice (${JSON.stringify(stuck)}) (after 2 pages); the listing was stopped`,
    );
    expect(kube.requests.filter((r) => r.path === '/api/v1/pods')).toHaveLength(2);
  });
});

describe('a kube-apiserver that breaks the store watch', () => {
  let stop: AbortController;
  let running: Promise<void> | undefined;
  const lines: string[] = [];
  const logger = createLogger({ level: 'warn', destination: { write: (line: string) => lines.push(line) } });
  const watches = () => kube.requests.filter((r) => r.path === PROXIES && r.query.watch === 'true');

  beforeEach(() => {
    kube.registerCrd(proxyCrd());
    lines.length = 0;
    stop = new AbortController();
  });
  afterEach(async () => {
    stop.abort();
    await running;
  });

  it('ends a watch whose line passes the bound, says why, and watches again (the process lives on)', async () => {
    await new KubernetesProxyStore(kube.kubeConfig(), 'default').apply({ metadata: { name: 'web', labels: {} }, spec: { provider: 'local' } });
    kube.misbehaviour = { watchLineBytes: 20 * MiB };
    const changes: string[] = [];
    running = new ProxyWatch(kube.kubeConfig(), 'default', logger, { baseBackoffMs: 20, maxBackoffMs: 50 }).run((n) => changes.push(n), stop.signal);

    await waitFor('a second watch request', () => watches().length >= 2 || undefined);
    const warned = lines.find((l) => l.includes('watch line longer than 16777216 bytes'));
    expect(warned, lines.join('')).toBeDefined();
    // Back to a sane server: the watch works again, from the same loop.
    kube.misbehaviour = {};
    await waitFor('the list before the watches', () => changes.includes('web') || undefined);
    await new KubernetesProxyStore(kube.kubeConfig(), 'default').apply({ metadata: { name: 'api', labels: {} }, spec: { provider: 'local' } });
    await waitFor('a change seen by the restarted watch', () => changes.includes('api') || undefined);
  });

  it('restarts a watch that sent headers and then nothing past its silence bound', async () => {
    kube.misbehaviour = { silentWatch: true };
    running = new ProxyWatch(kube.kubeConfig(), 'default', logger, { baseBackoffMs: 20, maxBackoffMs: 50, silentMs: 300 }).run(() => undefined, stop.signal);

    await waitFor('a second watch request', () => watches().length >= 2 || undefined);
    expect(
      lines.some((l) => l.includes('the watch sent nothing (not even a bookmark) for 300 ms')),
      lines.join(''),
    ).toBe(true);
  });
});

describe('a kube-apiserver that answers the health check with many MiB', () => {
  it('fails the check once 1 MiB has been read, with the reason in its message', async () => {
    const dir = await tempDir('egress-peers-');
    const tokenFile = join(dir, 'token');
    await writeFile(tokenFile, 'fake-token\n');
    const config = kubernetesProviderSchema.parse({ name: 'k8s', type: 'kubernetes', server: kube.url, tokenFile, skipTLSVerify: true });
    const provider = createKubernetesProvider(config, { logger: silentLogger(), registry: new Registry(), dataDir: dir });
    kube.misbehaviour = { oversizeBodyBytes: 8 * MiB };

    const [result] = await provider.check(new AbortController().signal);

    expect(result).toMatchObject({ ready: false, reason: 'Error' });
    expect(result!.message).toContain('the response body was larger than 1048576 bytes');
    await provider.close();
  });
});
