import { silentLogger } from '../../src/logging.ts';
import { ProxyHostSupervisor } from '../../src/providers/local/host-client.ts';

/**
 * The names of the proxies the running proxy host of `dataDir` serves, asked over its control
 * socket (none when no host runs). Never starts a host.
 */
export function servedByHost(dataDir: string, signal: AbortSignal): Promise<string[]> {
  const host = new ProxyHostSupervisor({ dataDir, logger: silentLogger(), program: () => Promise.reject(new Error('never started here')), policyFile: '' });
  return host.served(signal);
}
