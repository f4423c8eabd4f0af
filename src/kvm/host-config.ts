import { z } from 'zod';
import { hostAddress } from '../schema/host-address.ts';
import { resourceName } from '../schema/zod-helpers.ts';

/** One KVM host as configured: where its sshd is, how to authenticate, and libvirt's socket and pool there. */
export const kvmHostSchema = z.strictObject({
  name: resourceName,
  /** An IPv4 or IPv6 address or a DNS host name (src/schema/host-address.ts). */
  address: hostAddress,
  port: z.number().int().min(1).max(65535).default(22),
  user: z.string().min(1).default('root'),
  /** Path of the SSH private key file. Read at dial time, never logged. */
  privateKeyFile: z.string().min(1),
  /** Path of an OpenSSH known_hosts file; the host key must be in it. */
  knownHostsFile: z.string().min(1).optional(),
  /** Skip host key verification. For tests only: logged as a warning at every dial. */
  insecureIgnoreHostKey: z.boolean().default(false),
  /** The libvirt storage pool that proxy volumes live in. */
  pool: z.string().min(1).default('default'),
  /** libvirt's socket on the host, reached over an SSH streamlocal channel. */
  socketPath: z.string().min(1).default('/var/run/libvirt/libvirt-sock'),
  /** The libvirt connection URI opened on that socket. */
  uri: z.string().min(1).default('qemu:///system'),
});

export type KvmHostConfig = z.infer<typeof kvmHostSchema>;
