/**
 * What a new user gets without naming a proxy image: the kubernetes provider runs this release's
 * Dockerfile.proxy image, gcp boots stock Debian 12 with the user-data, kvm attaches the seed.
 */
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { DEFAULT_GCP_IMAGE, gcpProviderSchema } from '../../src/providers/gcp/config.ts';
import { DEFAULT_PROXY_IMAGE, PROXY_IMAGE_REPOSITORY } from '../../src/providers/kubernetes/lifecycle.ts';

const pkg = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

describe('provider defaults', () => {
  it('kubernetes: the default image is the Dockerfile.proxy image tagged with the package version, as the page documents', async () => {
    expect(DEFAULT_PROXY_IMAGE).toBe(`${PROXY_IMAGE_REPOSITORY}:${pkg.version}`);
    const page = await readFile(new URL('../../docs/kubernetes-provider.md', import.meta.url), 'utf8');
    expect(page).toContain(`${PROXY_IMAGE_REPOSITORY}:<version>`);
    expect(page).toContain('docker build -f Dockerfile.proxy');
  });

  it('gcp: without image or template the proxies boot Debian 12 with the user-data; both at once is refused, naming them', () => {
    const base = { name: 'g', type: 'gcp', project: 'p' };
    const parsed = gcpProviderSchema.parse({ ...base, proxies: {} });
    expect(parsed.proxies).toMatchObject({ image: DEFAULT_GCP_IMAGE, bootUserData: true });
    expect(DEFAULT_GCP_IMAGE).toBe('projects/debian-cloud/global/images/family/debian-12');
    expect(gcpProviderSchema.parse({ ...base, proxies: { instanceTemplate: 'global/instanceTemplates/t' } }).proxies?.image).toBeUndefined();
    const both = gcpProviderSchema.safeParse({ ...base, proxies: { image: 'i', instanceTemplate: 't' } });
    expect(both.success).toBe(false);
    expect(both.error?.issues[0]?.message).toBe('give at most one of image and instanceTemplate');
  });
});
