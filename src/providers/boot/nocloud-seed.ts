/**
 * A cloud-init NoCloud seed: an ISO 9660 volume labelled `CIDATA` holding `user-data` and
 * `meta-data` (cloud-init finds it by the label on any attached disk). The kvm lifecycle uploads
 * it as a volume beside the proxy's overlay and attaches it read-only.
 */
import { buildIso9660 } from './iso9660.ts';

export const SEED_VOLUME_LABEL = 'CIDATA';

export function nocloudSeed(userData: string, metaData: string): Buffer {
  return buildIso9660({
    volumeId: SEED_VOLUME_LABEL,
    files: [
      { name: 'USER-DATA', data: Buffer.from(userData, 'utf8') },
      { name: 'META-DATA', data: Buffer.from(metaData, 'utf8') },
    ],
  });
}
