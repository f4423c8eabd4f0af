/**
 * The proxy host's relay processes: real hosts and relays started by the local lifecycle. A relay
 * is proven to serve by stopping the host (SIGSTOP): whatever still answers is a relay.
 */
import { readFile, readdir, readlink } from 'node:fs/promises';
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { proxyEgressPolicy } from '../../src/egress/policy-config.ts';
import { silentLogger } from '../../src/logging.ts';
import type { ProxyCredentials } from '../../src/model/proxy-credentials.ts';
import type { InstanceSpec } from '../../src/providers/lifecycle.ts';
import { createLocalLifecycle, type LocalLifecycle } from '../../src/providers/local/lifecycle.ts';
import { findHostProcesses } from '../../src/providers/local/process-table.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { waitFor } from '../support/wait.ts';

const CREDS: ProxyCredentials = { username: 'crawler', password: 'relay-pass' };
const signal = (): AbortSignal => AbortSignal.timeout(30_000);
const spec = (name: string, credentials = CREDS): InstanceSpec => ({ name, owner: { fleet: 'relays', proxy: name }, credentials });
const basic = (c: ProxyCredentials): string => `Basic ${Buffer.from(`${c.username}:${c.password}`).toString('base64')}`;

function getThrough(port: number, url: string, credentials: ProxyCredentials): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path: url, agent: false, headers: { 'proxy-authorization': basic(credentials) } },
      (res: IncomingMessage) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

function tunnelStatus(port: number, hostPort: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('data', (chunk: Buffer) => {
      socket.destroy();
      resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(chunk.toString('latin1'))?.[1] ?? 0));
    });
    socket.on('error', reject);
    socket.write(`CONNECT ${hostPort} HTTP/1.1\r\nHost: ${hostPort}\r\nProxy-Authorization: ${basic(CREDS)}\r\n\r\n`);
  });
}

/** The relays of the host of `dataDir` (processes running the host program with `--relay <dataDir>`). */
async function relaysOf(dataDir: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    const args = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0');
    const at = args.indexOf('--relay');
    if (at > 0 && args[at + 1] === dataDir && (args[at - 1] ?? '').endsWith('proxy-host.cjs')) pids.push(pid);
  }
  return pids;
}

/** The socket inode of the listener on 127.0.0.1:`port` (/proc/net/tcp), and whether `pid` holds it. */
async function holdsListener(pid: number, port: number): Promise<boolean> {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  const line = (await readFile('/proc/net/tcp', 'utf8')).split('\n').find((l) => l.includes(`0100007F:${hex} 00000000:0000 0A`));
  const inode = line?.trim().split(/\s+/)[9];
  if (!inode) return false;
  const fds = await readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
  for (const fd of fds) if ((await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '')) === `socket:[${inode}]`) return true;
  return false;
}

let origin: Server;
let originPort: number;
let dataDir: string;
let lifecycle: LocalLifecycle;
const stopped = new Set<number>();

beforeAll(async () => {
  origin = createServer((_req, res) => res.end('origin'));
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
  originPort = (origin.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise<void>((r) => origin.close(() => r()));
});

beforeEach(async () => {
  dataDir = await tempDir('egress-relays-');
  lifecycle = createLocalLifecycle({
    dataDir,
    logger: silentLogger(),
    egressPolicy: proxyEgressPolicy({ allow: [`127.0.0.1/32`], deny: [] }, undefined),
    relayProcesses: 2,
  });
});

afterEach(async () => {
  for (const pid of stopped) process.kill(pid, 'SIGCONT');
  stopped.clear();
  for (const pid of await findHostProcesses(dataDir)) {
    try {
      process.kill(pid, 'SIGTERM');
    } catch (err) {
      // Listed, then gone by itself before the signal (a host that was stopping): nothing left to stop.
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
  }
  await waitFor('the host and its relays to exit', async () => (await findHostProcesses(dataDir)).length === 0 && (await relaysOf(dataDir)).length === 0);
  lifecycle.close();
});

function stop(pid: number): void {
  process.kill(pid, 'SIGSTOP');
  stopped.add(pid);
}

function resume(pid: number): void {
  process.kill(pid, 'SIGCONT');
  stopped.delete(pid);
}

describe('relay processes of the proxy host', () => {
  it('answer the proxy while the host is stopped: plain HTTP, CONNECT, a rotated credential, and a refusal the host counts', async () => {
    const first = await lifecycle.ensureInstance(spec('r1'), signal());
    const port = first.endpoint!.port;
    const [host] = await findHostProcesses(dataDir);
    expect(await relaysOf(dataDir)).toHaveLength(2);
    const rotated = { username: 'crawler', password: 'rotated-pass' };
    await lifecycle.ensureInstance(spec('r1', rotated), signal());

    stop(host!);
    expect(await getThrough(port, `http://127.0.0.1:${originPort}/`, rotated)).toBe(200);
    expect(await getThrough(port, `http://127.0.0.1:${originPort}/`, CREDS)).toBe(407);
    expect(await tunnelStatus(port, `127.0.0.1:${originPort}`)).toBe(407);
    // Allowed is 127.0.0.1/32 only: another loopback address is refused by the relay's policy.
    expect(await getThrough(port, `http://127.0.0.2:${originPort}/`, rotated)).toBe(403);
    resume(host!);

    const stats = join(dataDir, 'instances', 'r1', 'egress-denials.json');
    await waitFor('the relay-counted refusal in the host-written counts', async () => {
      const denied = (JSON.parse(await readFile(stats, 'utf8')) as { denied: Record<string, number> }).denied;
      return Object.values(denied).reduce((a, b) => a + b, 0) >= 1;
    });
  });

  it('a relay that dies is replaced and handed the proxy again; a deleted proxy is closed in every process when the delete returns', async () => {
    const instance = await lifecycle.ensureInstance(spec('r2'), signal());
    const port = instance.endpoint!.port;
    const [host] = await findHostProcesses(dataDir);
    const [victim, other] = await relaysOf(dataDir);
    process.kill(victim!, 'SIGKILL');
    const replacement = await waitFor('a replacement relay holding the proxy socket', async () => {
      const now = (await relaysOf(dataDir)).filter((pid) => pid !== victim && pid !== other);
      const pid = now[0];
      return pid !== undefined && (await holdsListener(pid, port)) ? pid : undefined;
    });
    // Only the replacement may answer: the host and the other relay are stopped.
    stop(host!);
    stop(other!);
    expect(await getThrough(port, `http://127.0.0.1:${originPort}/`, CREDS)).toBe(200);
    resume(host!);
    resume(other!);

    await lifecycle.deleteInstance('r2', undefined, { owner: spec('r2').owner, nameIsOurs: true }, signal());
    expect(await holdsListener(replacement, port)).toBe(false);
    const refused = await new Promise<string>((resolve) => {
      const s = connect(port, '127.0.0.1');
      s.on('connect', () => resolve('connected'));
      s.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
    });
    expect(refused).toBe('ECONNREFUSED');
  });
});
