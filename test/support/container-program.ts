import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import type { ProxyCredentials } from '../../src/model/proxy-credentials.ts';
import { TRAFFIC_REPORT_URL } from '../../src/providers/local/traffic-report.ts';
import { getThroughProxy } from './proxy-get.ts';
import { waitFor } from './wait.ts';

/** An egress policy that lets a proxy reach origins on 127.0.0.1. */
export const ALLOW_LOOPBACK_POLICY = JSON.stringify({ version: 1, allow: ['127.0.0.1/32'], deny: [], guarded: [] });

/**
 * The proxy program (`program`, from buildProxyProgram) in container mode on 127.0.0.1:`port`, as
 * Dockerfile.proxy, VMs and Pods run it, with `credentials` and a policy allowing loopback;
 * resolves once it answers its own traffic report. Stop it with stopChild.
 */
export async function startContainerProgram(program: string, port: number, credentials: ProxyCredentials): Promise<ChildProcess> {
  const child = spawn(process.execPath, [program, '--env'], {
    stdio: 'ignore',
    env: {
      PATH: process.env.PATH ?? '',
      PROXY_HOST: '127.0.0.1',
      PROXY_PORT: String(port),
      PROXY_USER: credentials.username,
      PROXY_PASSWORD: credentials.password,
      EGRESS_PROXY_POLICY: ALLOW_LOOPBACK_POLICY,
    },
  });
  try {
    await waitFor(
      'the container-mode proxy to answer its traffic report',
      async () => (await getThroughProxy({ port, ...credentials }, TRAFFIC_REPORT_URL)).status === 200,
    );
  } catch (err) {
    await stopChild(child);
    throw err;
  }
  return child;
}

/** SIGTERM, and resolves once it exited (at once when it already has). */
export async function stopChild(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  await exited;
}
