import { z } from 'zod';
import { gcpProviderSchema } from '../providers/gcp/config.ts';
import { kubernetesProviderSchema } from '../providers/kubernetes/config.ts';
import { kvmProviderSchema } from '../providers/kvm/config.ts';
import { localProviderSchema } from '../providers/local/config.ts';

export const providerSchema = z.discriminatedUnion('type', [localProviderSchema, kvmProviderSchema, kubernetesProviderSchema, gcpProviderSchema]);

export type ProviderConfig = z.infer<typeof providerSchema>;
export type ProviderType = ProviderConfig['type'];
export const PROVIDER_TYPES = ['local', 'kvm', 'kubernetes', 'gcp'] as const satisfies readonly ProviderType[];
