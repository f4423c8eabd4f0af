import { z } from 'zod';
import { resourceName } from '../../config/zod-helpers.ts';

export const localProviderSchema = z.strictObject({
  name: resourceName,
  type: z.literal('local'),
  /** Where the provider keeps its state; defaults to `<dataDir>/local/<name>`. */
  dataDir: z.string().min(1).optional(),
});

export type LocalProviderConfig = z.infer<typeof localProviderSchema>;
