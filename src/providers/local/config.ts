import { join } from 'node:path';
import { z } from 'zod';
import { egressPolicySchema } from '../../egress/policy-config.ts';
import { resourceName } from '../../schema/zod-helpers.ts';
import { providerGcSchema } from '../gc-settings.ts';
import { sourceAddressesSchema } from './source-addresses.ts';

export const localProviderSchema = z.strictObject({
  name: resourceName,
  type: z.literal('local'),
  /** Garbage-collection settings of this provider (docs/proxies.md#garbage-collection). */
  gc: providerGcSchema.optional(),
  /** Where the provider keeps its state; defaults to `<dataDir>/local/<name>`. */
  dataDir: z.string().min(1).optional(),
  /** Local proxies always run; this block only tunes them. */
  proxies: z
    .strictObject({
      /** Where the proxies may connect (docs/proxies.md#egress-policy); default deny toward the inside. */
      egressPolicy: egressPolicySchema.optional(),
      /**
       * Addresses of this machine (IPs or CIDR blocks, IPv4 or IPv6) the proxies send from, one each
       * (docs/local-provider.md#source-addresses); without it, the kernel picks (127.0.0.1 toward loopback).
       */
      sourceAddresses: sourceAddressesSchema.optional(),
      /**
       * Processes besides the proxy host that accept and relay the proxies' connections, so that
       * they use every core (docs/local-provider.md#cores); default one per core beyond the first, at most 7.
       */
      relayProcesses: z.number().int().min(0).max(64).optional(),
    })
    .optional(),
});

export type LocalProviderConfig = z.infer<typeof localProviderSchema>;

/** A local provider's data directory: its `dataDir`, else `<dataDir>/local/<name>` under the process's `--data-dir`. */
export function localDataDir(config: Pick<LocalProviderConfig, 'name' | 'dataDir'>, rootDataDir: string): string {
  return config.dataDir ?? join(rootDataDir, 'local', config.name);
}
