/**
 * A Compute API that misbehaves on command (the fake's standing `misbehaviour` switches), driving the
 * real gcp provider through @google-cloud/compute built the production way (an access-token file):
 * a `nextPageToken` that repeats, and a health-check answer far larger than any page.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/logging.ts';
import { ListingPagesError } from '../../src/clients/page-bound.ts';
import {
  computeClientOptions,
  createComputeClients,
  createGcpProvider,
  gcpProviderSchema,
  MANAGED_LABELS,
  type ComputeClients,
} from '../../src/providers/gcp/index.ts';
import { createGcpLifecycle, FLEET_LABEL, PROXY_LABEL } from '../../src/providers/gcp/lifecycle.ts';
import { startFakeCompute, type FakeCompute } from '../fakes/compute/index.ts';
import { tempDir } from '../support/temp-dirs.ts';

const ZONE = 'us-central1-a';
const MiB = 1024 * 1024;

let compute: FakeCompute;
let dir: string;
let clients: ComputeClients | undefined;

beforeEach(async () => {
  compute = await startFakeCompute({ project: 'egress-test', tokens: ['good-token'] });
  dir = await tempDir('egress-peers-');
  await writeFile(join(dir, 'token'), 'good-token\n');
});

afterEach(async () => {
  await clients?.close();
  clients = undefined;
  await compute.close();
});

const config = () =>
  gcpProviderSchema.parse({
    name: 'gce',
    type: 'gcp',
    project: 'egress-test',
    accessTokenFile: join(dir, 'token'),
    apiEndpoint: '127.0.0.1',
    port: compute.port,
    protocol: 'http',
  });

describe('a Compute API whose nextPageToken repeats', () => {
  it('fails the instance listing with a clear error at the second occurrence, after two requests', async () => {
    for (const name of ['proxy-a', 'proxy-b']) compute.seedInstance(ZONE, { name, labels: { ...MANAGED_LABELS, [FLEET_LABEL]: 'f', [PROXY_LABEL]: name } });
    clients = createComputeClients(computeClientOptions(config()));
    const lifecycle = createGcpLifecycle({ clients, project: 'egress-test', zone: ZONE, image: 'img', logger: silentLogger(), pageSize: 1 });
    const list = async (): Promise<number> => {
      let n = 0;
      for await (const _ of lifecycle.listInstances('f', new AbortController().signal)) n++;
      return n;
    };
    // A sane server first: two pages; its first page's token is the one a stuck server repeats.
    expect(await list()).toBe(2);
    const first = JSON.parse(compute.requests[0]!.responseBody!) as { nextPageToken: string };
    compute.requests.length = 0;
    compute.misbehaviour = { repeatPageToken: first.nextPageToken };

    const err = await list().then(
      () => undefined,
      (e: unknown) => e,
    );

    expect(err).toBeInstanceOf(ListingPagesError);
    expect((err as Error).message).toMatch(
      /^listing proxy instances: the server sent the same page token twice \(.*\) \(after 2 pages\); the listing was stopped$/,
    );
    expect(compute.requests).toHaveLength(2);
  });
});

describe('a Compute API that answers the health check with many MiB', () => {
  it('fails the check at the 16 MiB read cap, with the reason in its message', async () => {
    const provider = createGcpProvider(config(), { logger: silentLogger(), registry: new Registry(), dataDir: dir });
    compute.misbehaviour = { oversizeBodyBytes: 24 * MiB };

    const [result] = await provider.check(new AbortController().signal);

    expect(result).toMatchObject({ ready: false, reason: 'Error' });
    expect(result!.message).toMatch(/over limit: 16777216/);
    await provider.close();
  });
});
