/** The egress policy document a provider hands every proxy it makes, as the text it is written as. */
import { proxyEgressPolicy, type ProxyEgressPolicy } from '../egress/policy-config.ts';

/**
 * `policy` serialised once, so that an unchanged policy is the same text on every ensure (and rewrites
 * nothing); without one, the default deny alone.
 */
export function policyDocument(policy: ProxyEgressPolicy | undefined): string {
  return JSON.stringify(policy ?? proxyEgressPolicy(undefined, undefined));
}
