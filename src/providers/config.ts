import { z } from 'zod';
import { gcpProviderSchema } from './gcp/config.ts';
import { kubernetesProviderSchema } from './kubernetes/config.ts';
import { kvmProviderSchema } from './kvm/config.ts';
import { localProviderSchema } from './local/config.ts';

export const providerSchema = z.discriminatedUnion('type', [localProviderSchema, kvmProviderSchema, kubernetesProviderSchema, gcpProviderSchema]);

export type ProviderConfig = z.infer<typeof providerSchema>;
export type ProviderType = ProviderConfig['type'];
export const PROVIDER_TYPES = ['local', 'kvm', 'kubernetes', 'gcp'] as const satisfies readonly ProviderType[];
