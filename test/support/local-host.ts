import { findHostProcesses } from '../../src/providers/local/process-table.ts';
import { waitFor } from './wait.ts';
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

/**
 * Stops the proxy host of `dataDir` (and so its relays and every proxy it serves) with SIGTERM, as
 * its shutdown expects, and waits until it is gone: for suites whose proxies outlive their roles
 * by design (a declared Proxy made again by a resync after the suite deleted it).
 */
export async function stopProxyHosts(dataDir: string): Promise<void> {
  for (const pid of await findHostProcesses(dataDir)) {
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      // gone already
    }
  }
  await waitFor('the proxy host to stop', async () => (await findHostProcesses(dataDir)).length === 0, 30_000);
}
