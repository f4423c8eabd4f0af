import { z } from 'zod';
import { gcpProviderSchema } from './gcp/config.ts';
import { kubernetesProviderSchema } from './kubernetes/config.ts';
import { kvmProviderSchema } from './kvm/config.ts';
import { localProviderSchema } from './local/config.ts';
import { upstreamProviderSchema } from './upstream/config.ts';

export const providerSchema = z.discriminatedUnion('type', [
  localProviderSchema,
  kvmProviderSchema,
  kubernetesProviderSchema,
  gcpProviderSchema,
  upstreamProviderSchema,
]);

export type ProviderConfig = z.infer<typeof providerSchema>;
export type ProviderType = ProviderConfig['type'];
export const PROVIDER_TYPES = ['local', 'kvm', 'kubernetes', 'gcp', 'upstream'] as const satisfies readonly ProviderType[];
