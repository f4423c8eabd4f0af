/** Which libvirt failures of the KVM lifecycle a retry can never fix (ProvisioningError), and which it may. */
import { LibvirtError, isLibvirtUnsupported } from '../../kvm/libvirt/index.ts';
import { ProvisioningError } from '../lifecycle.ts';

/** libvirt numbers that mean "this request can never work as written". */
const PROVISIONING_CODES = new Set<number>([
  8, // INVALID_ARG
  27, // XML_ERROR
  35, // XML_DETAIL (malformed XML, as libvirtd 9 reports it)
  67, // CONFIG_UNSUPPORTED
  91, // CPU_INCOMPATIBLE
  92, // XML_INVALID_SCHEMA
]);

/** Errors a retry cannot fix become ProvisioningError; everything else (connection loss included) propagates. */
export function provisioningErrorOf(err: unknown, what: string): unknown {
  if (err instanceof ProvisioningError) return err;
  if (err instanceof LibvirtError && (isLibvirtUnsupported(err) || PROVISIONING_CODES.has(err.libvirtCode))) {
    return new ProvisioningError(`${what}: ${err.libvirtMessage || err.message}`, { cause: err });
  }
  return err;
}
