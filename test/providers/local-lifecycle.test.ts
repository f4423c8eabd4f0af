import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeAll, afterAll, beforeEach, describe, expect, it } from 'vitest';
import { proxyEgressPolicy } from '../../src/egress/policy-config.ts';
import { silentLogger } from '../../src/logging.ts';
import type { Instance, InstanceExit, InstanceSpec } from '../../src/providers/lifecycle.ts';
import { createLocalLifecycle, type LocalLifecycle } from '../../src/providers/local/lifecycle.ts';
import { ProxyHostSupervisor } from '../../src/providers/local/host-client.ts';
import { findHostProcesses, findProxyProcesses } from '../../src/providers/local/process-table.ts';
import { portAccepts } from '../support/ports.ts';
import { waitFor } from '../support/wait.ts';
import type { ProxyCredentials } from '../../src/model/proxy-credentials.ts';

const SCRIPT = resolve('src/providers/local/proxy-process.ts');
const CREDS: ProxyCredentials = { username: 'crawler', password: 's3cret-pass' };
/** The traffic here goes to a loopback target, which the default egress policy refuses: allowed explicitly. */
const egressPolicy = proxyEgressPolicy({ allow: ['127.0.0.1/32'], deny: [] }, undefined);
const signal = (): AbortSignal => AbortSignal.timeout(30_000);

function spec(name: string, fleet = 'fleet-a', credentials = CREDS): InstanceSpec {
  return { name, owner: { fleet, proxy: `proxy-${name}` }, credentials };
}

function basic(c: ProxyCredentials): string {
  return `Basic ${Buffer.from(`${c.username}:${c.password}`).toString('base64')}`;
}

/** A GET with an absolute URI sent to the proxy. */
function getThrough(proxyPort: number, url: string, credentials?: ProxyCredentials): Promise<{ status: number; body: string }> {
  const target = new URL(url);
  return new Promise((resolveGet, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: proxyPort,
        method: 'GET',
        path: url,
        agent: false,
        headers: { host: target.host, ...(credentials ? { 'proxy-authorization': basic(credentials) } : {}) },
      },
      (res: IncomingMessage) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolveGet({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** CONNECT through the proxy, then a plain HTTP request inside the tunnel. */
function connectThrough(proxyPort: number, hostPort: string, credentials?: ProxyCredentials): Promise<{ status: number; tunnelled?: string }> {
  return new Promise((resolveConnect, reject) => {
    const req = request({
      host: '127.0.0.1',
      port: proxyPort,
      method: 'CONNECT',
      path: hostPort,
      agent: false,
      headers: { host: hostPort, ...(credentials ? { 'proxy-authorization': basic(credentials) } : {}) },
    });
    req.on('connect', (res: IncomingMessage, socket) => {
      if (res.statusCode !== 200) {
        socket.destroy();
        resolveConnect({ status: res.statusCode ?? 0 });
        return;
      }
      let data = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (data += chunk));
      socket.on('end', () => resolveConnect({ status: 200, tunnelled: data }));
      socket.on('error', reject);
      socket.write(`GET /tunnel HTTP/1.1\r\nHost: ${hostPort}\r\nConnection: close\r\n\r\n`);
    });
    req.on('error', reject);
    req.end();
  });
}

async function collect(it: AsyncIterable<Instance>): Promise<Instance[]> {
  const out: Instance[] = [];
  for await (const i of it) out.push(i);
  return out;
}

let target: Server;
let targetPort: number;

beforeAll(async () => {
  target = createServer((req, res) => {
    res.setHeader('content-type', 'text/plain');
    res.end(`hello from target ${req.url ?? ''}`);
  });
  await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
  targetPort = (target.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise<void>((r) => target.close(() => r()));
});

/** The pid of the proxy host serving an instance (its id is `<host pid>:<port>`). */
function hostPid(instance: Instance): number {
  return Number(instance.id.split(':')[0]);
}

function hostOf(dataDir: string): ProxyHostSupervisor {
  return new ProxyHostSupervisor({ dataDir, logger: silentLogger(), program: () => Promise.reject(new Error('not here')), policyFile: '' });
}

describe('local proxy lifecycle (one proxy host per data directory)', () => {
  let dataDir: string;
  let lifecycle: LocalLifecycle;

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'egress-local-'));
    lifecycle = createLocalLifecycle({ dataDir, logger: silentLogger(), egressPolicy });
  });

  afterEach(async () => {
    lifecycle.close();
    const names = await readdir(join(dataDir, 'instances')).catch(() => [] as string[]);
    for (const name of names) await lifecycle.deleteInstance(name, undefined, { owner: spec(name).owner, nameIsOurs: true }, signal());
    for (const name of names) expect(await findProxyProcesses(join(dataDir, 'instances', name))).toEqual([]);
    // The host stops with its last proxy.
    await waitFor('no proxy host left', async () => (await findHostProcesses(dataDir)).length === 0);
    await rm(dataDir, { recursive: true, force: true });
  });

  it('creates a proxy that forwards HTTP and CONNECT with credentials and answers 407 without them', async () => {
    const instance = await lifecycle.ensureInstance(spec('p1'), signal());
    expect(instance).toMatchObject({ name: 'p1', state: 'running', owner: { fleet: 'fleet-a', proxy: 'proxy-p1' }, endpoint: { host: '127.0.0.1' } });
    const port = instance.endpoint!.port;

    const ok = await getThrough(port, `http://127.0.0.1:${targetPort}/via-proxy`, CREDS);
    expect(ok).toEqual({ status: 200, body: 'hello from target /via-proxy' });

    expect((await getThrough(port, `http://127.0.0.1:${targetPort}/`)).status).toBe(407);
    expect((await getThrough(port, `http://127.0.0.1:${targetPort}/`, { username: 'crawler', password: 'wrong' })).status).toBe(407);

    const tunnel = await connectThrough(port, `127.0.0.1:${targetPort}`, CREDS);
    expect(tunnel.status).toBe(200);
    expect(tunnel.tunnelled).toContain('hello from target /tunnel');
    expect((await connectThrough(port, `127.0.0.1:${targetPort}`)).status).toBe(407);
  });

  it('serves many proxies from one host process, each with its own port and credentials', async () => {
    const other = { username: 'other', password: 'other-pass' };
    const [a, b] = await Promise.all([lifecycle.ensureInstance(spec('p1'), signal()), lifecycle.ensureInstance(spec('p2', 'fleet-a', other), signal())]);
    expect(hostPid(a)).toBe(hostPid(b));
    expect(a.endpoint!.port).not.toBe(b.endpoint!.port);
    expect(await findHostProcesses(dataDir)).toEqual([hostPid(a)]);
    expect((await getThrough(a.endpoint!.port, `http://127.0.0.1:${targetPort}/a`, CREDS)).status).toBe(200);
    expect((await getThrough(a.endpoint!.port, `http://127.0.0.1:${targetPort}/a`, other)).status).toBe(407);
    expect((await getThrough(b.endpoint!.port, `http://127.0.0.1:${targetPort}/b`, other)).status).toBe(200);
    expect((await getThrough(b.endpoint!.port, `http://127.0.0.1:${targetPort}/b`, CREDS)).status).toBe(407);
    // The egress policy is enforced by each proxy: one proxy may not loop through another.
    expect((await getThrough(a.endpoint!.port, `http://127.0.0.1:${b.endpoint!.port}/`, CREDS)).status).toBe(403);
  });

  it('keeps state on disk: records written atomically, the credentials and the control socket readable by the owner only', async () => {
    const instance = await lifecycle.ensureInstance(spec('p1'), signal());
    const dir = join(dataDir, 'instances', 'p1');
    const record = JSON.parse(await readFile(join(dir, 'instance.json'), 'utf8'));
    expect(record).toMatchObject({
      name: 'p1',
      owner: { fleet: 'fleet-a', proxy: 'proxy-p1' },
      pid: hostPid(instance),
      port: instance.endpoint!.port,
      host: true,
    });
    expect(typeof record.createdAt).toBe('string');
    expect(JSON.stringify(record)).not.toContain(CREDS.password);
    expect((await stat(join(dir, 'credentials.json'))).mode & 0o777).toBe(0o600);
    const host = JSON.parse(await readFile(join(dataDir, 'host', 'host.json'), 'utf8'));
    expect(host).toMatchObject({ pid: hostPid(instance), socket: join(dataDir, 'host', 'control.sock') });
    expect((await stat(join(dataDir, 'host'))).mode & 0o777).toBe(0o700);
    expect((await stat(join(dataDir, 'host', 'control.sock'))).mode & 0o777).toBe(0o600);
    expect(await readFile(join(dataDir, 'host', 'host.log'), 'utf8')).not.toContain(CREDS.password);
  });

  it("the host's control socket refuses what it does not know: other routes, bad names, other methods, a proxy without an intent", async () => {
    await lifecycle.ensureInstance(spec('p1'), signal());
    const socketPath = join(dataDir, 'host', 'control.sock');
    const send = (method: string, path: string): Promise<{ status: number; body: string }> =>
      new Promise((resolveSend, reject) => {
        const req = request({ socketPath, method, path, headers: { 'content-length': 0 } }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (body += chunk));
          res.on('end', () => resolveSend({ status: res.statusCode ?? 0, body }));
        });
        req.on('error', reject);
        req.end();
      });
    expect((await send('GET', '/')).status).toBe(404);
    expect((await send('PUT', '/proxies/Bad_Name')).status).toBe(404);
    expect((await send('PUT', '/proxies/..%2F..%2Fetc')).status).toBe(404);
    expect((await send('PUT', '/proxies/p1/extra')).status).toBe(404);
    expect((await send('POST', '/proxies/p1')).status).toBe(405);
    expect(await send('PUT', '/proxies/nobody')).toMatchObject({ status: 409, body: expect.stringContaining('has no intent.json') as unknown });
    // None of it touched the proxy it serves.
    expect(await hostOf(dataDir).served(signal())).toEqual(['p1']);
    expect(JSON.parse((await send('GET', '/status')).body)).toMatchObject({ proxies: 1 });
  });

  it('runs the host as plain node on the program built into the data directory, no TypeScript loader', async () => {
    const instance = await lifecycle.ensureInstance(spec('p1'), signal());
    const args = (await readFile(`/proc/${hostPid(instance)}/cmdline`, 'utf8')).split('\0').filter(Boolean);
    expect(args).toEqual([process.execPath, join(dataDir, 'bin', 'proxy-host.cjs'), dataDir, '--policy', join(dataDir, 'egress-policy.json')]);
  });

  it('never takes a process whose arguments merely name the host program and the directory for the host', async () => {
    await lifecycle.ensureInstance(spec('p1'), signal());
    const program = join(dataDir, 'bin', 'proxy-host.cjs');
    const lookalike = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)', program, dataDir], { stdio: 'ignore' });
    try {
      await new Promise((resolveSpawn) => lookalike.once('spawn', resolveSpawn));
      expect(await findHostProcesses(dataDir)).not.toContain(lookalike.pid);
      await lifecycle.deleteInstance('p1', undefined, { owner: spec('p1').owner, nameIsOurs: true }, signal());
      expect(lookalike.exitCode).toBeNull();
      expect(lookalike.signalCode).toBeNull();
      expect(() => process.kill(lookalike.pid ?? 0, 0)).not.toThrow();
    } finally {
      lookalike.kill('SIGKILL');
    }
  });

  it('two workers racing end with one host that both report, and one listener', async () => {
    const other = createLocalLifecycle({ dataDir, logger: silentLogger(), egressPolicy });
    const [a, b] = await Promise.all([lifecycle.ensureInstance(spec('p1'), signal()), other.ensureInstance(spec('p1'), signal())]);
    expect(b.id).toBe(a.id);
    expect(b.endpoint).toEqual(a.endpoint);
    // A host the loser spawned finds the winner and exits without serving.
    await waitFor('one host left', async () => (await findHostProcesses(dataDir)).length === 1);
    expect(await findHostProcesses(dataDir)).toEqual([hostPid(a)]);
    expect(await hostOf(dataDir).served(signal())).toEqual(['p1']);
  });

  it('proxies survive a worker restart: a new lifecycle adopts the running host', async () => {
    const created = await lifecycle.ensureInstance(spec('p1'), signal());
    lifecycle.close();
    const restarted = createLocalLifecycle({ dataDir, logger: silentLogger(), egressPolicy });
    expect(await restarted.getInstance('p1', undefined, signal())).toMatchObject({ id: created.id, state: 'running', endpoint: created.endpoint });
    expect((await collect(restarted.listInstances('fleet-a', signal()))).map((i) => i.id)).toEqual([created.id]);
    const again = await restarted.ensureInstance(spec('p1'), signal());
    expect(again.id).toBe(created.id);
    expect(await findHostProcesses(dataDir)).toEqual([hostPid(created)]);
    expect((await getThrough(again.endpoint!.port, `http://127.0.0.1:${targetPort}/still`, CREDS)).status).toBe(200);
  });

  it("delete stops exactly that proxy's listener (closed when the call returns), the others untouched; the last one stops the host", async () => {
    const [a, b] = await Promise.all([lifecycle.ensureInstance(spec('p1'), signal()), lifecycle.ensureInstance(spec('p2'), signal())]);
    const dir = join(dataDir, 'instances', 'p1');
    await lifecycle.deleteInstance('p1', undefined, { owner: spec('p1').owner, nameIsOurs: true }, signal());
    expect(await portAccepts(a.endpoint!.port)).toBe(false);
    await expect(stat(dir)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await lifecycle.getInstance('p1', undefined, signal())).toBeUndefined();
    expect(await lifecycle.getInstance('p2', undefined, signal())).toMatchObject({ id: b.id, state: 'running' });
    expect((await getThrough(b.endpoint!.port, `http://127.0.0.1:${targetPort}/p2`, CREDS)).status).toBe(200);
    expect(await hostOf(dataDir).served(signal())).toEqual(['p2']);
    await lifecycle.deleteInstance('p1', undefined, { owner: spec('p1').owner, nameIsOurs: true }, signal());
    await lifecycle.deleteInstance('never-existed', undefined, { owner: spec('never-existed').owner, nameIsOurs: true }, signal());

    await lifecycle.deleteInstance('p2', undefined, { owner: spec('p2').owner, nameIsOurs: true }, signal());
    expect(await portAccepts(b.endpoint!.port)).toBe(false);
    await waitFor('host gone', async () => (await findHostProcesses(dataDir)).length === 0);
    // The next create starts a new host.
    const c = await lifecycle.ensureInstance(spec('p3'), signal());
    expect(hostPid(c)).not.toBe(hostPid(a));
  });

  it('a SIGKILLed host is restarted and its proxies come back on the same ports; the exits are reported meanwhile', async () => {
    const exits: InstanceExit[] = [];
    const bothExited = new Promise<void>((resolveExits) => {
      lifecycle.onInstanceExit((e) => {
        exits.push(e);
        if (exits.length === 2) resolveExits();
      });
    });
    const [a, b] = await Promise.all([lifecycle.ensureInstance(spec('p1'), signal()), lifecycle.ensureInstance(spec('p2'), signal())]);
    const pid = hostPid(a);
    process.kill(pid, 'SIGKILL');
    await bothExited;
    expect(exits.map((e) => [e.name, e.id, e.message]).sort()).toEqual([
      ['p1', a.id, `proxy host ${pid} exited`],
      ['p2', b.id, `proxy host ${pid} exited`],
    ]);
    // The lifecycle restarts the host on its own; the host brings every proxy back on its port.
    const back = await waitFor('p2 back', async () => {
      const i = await lifecycle.getInstance('p2', undefined, signal());
      return i?.state === 'running' ? i : undefined;
    });
    expect(back.endpoint).toEqual(b.endpoint);
    expect(hostPid(back)).not.toBe(pid);
    const again = await lifecycle.ensureInstance(spec('p1'), signal());
    expect(again.endpoint).toEqual(a.endpoint);
    expect(again.id).not.toBe(a.id);
    expect(await findHostProcesses(dataDir)).toEqual([hostPid(back)]);
    expect((await getThrough(a.endpoint!.port, `http://127.0.0.1:${targetPort}/back`, CREDS)).status).toBe(200);
    expect((await getThrough(b.endpoint!.port, `http://127.0.0.1:${targetPort}/back`, CREDS)).status).toBe(200);
  });

  it('a restarted host that can bring none of its proxies back exits on its own instead of serving nothing forever', async () => {
    const exited = new Promise<void>((resolveExit) => lifecycle.onInstanceExit(() => resolveExit()));
    const a = await lifecycle.ensureInstance(spec('p1'), signal());
    // The proxy's credentials are unreadable now: the host that restarts cannot serve it.
    await writeFile(join(dataDir, 'instances', 'p1', 'credentials.json'), 'not json');
    process.kill(hostPid(a), 'SIGKILL');
    await exited;
    // The lifecycle restarts the host; it fails to restore p1, serves nothing, and goes.
    await waitFor('a new host started', async () => (await findHostProcesses(dataDir)).some((pid) => pid !== hostPid(a)));
    await waitFor('the idle host gone', async () => (await findHostProcesses(dataDir)).length === 0, 20_000);
  });

  it('a host killed while no worker watched: its proxies are reported when one starts watching, never a deletion', async () => {
    const a = await lifecycle.ensureInstance(spec('p1'), signal());
    lifecycle.close();
    process.kill(hostPid(a), 'SIGKILL');
    await waitFor('host gone', async () => (await findHostProcesses(dataDir)).length === 0);
    const late = createLocalLifecycle({ dataDir, logger: silentLogger(), egressPolicy });
    try {
      expect(await late.getInstance('p1', undefined, signal())).toMatchObject({
        state: 'failed',
        message: expect.stringContaining(`proxy host ${hostPid(a)} is no longer running`),
      });
      const missed = await new Promise<InstanceExit>((resolveExit) => late.onInstanceExit(resolveExit));
      expect(missed).toMatchObject({ name: 'p1', id: a.id, message: `proxy host ${hostPid(a)} is no longer running` });
      const d = await late.ensureInstance(spec('p1'), signal());
      const other = await late.ensureInstance(spec('p2'), signal());
      const seen: InstanceExit[] = [];
      const otherExited = new Promise<void>((resolveExit) =>
        late.onInstanceExit((e) => {
          seen.push(e);
          if (e.name === 'p2') resolveExit();
        }),
      );
      await late.deleteInstance('p1', undefined, { owner: spec('p1').owner, nameIsOurs: true }, signal());
      expect(await late.getInstance('p1', undefined, signal())).toBeUndefined();
      // Exits are reported in the order the watch sees them: once p2's is in, a p1 exit would be too.
      process.kill(hostPid(other), 'SIGKILL');
      await otherExited;
      expect(seen.map((e) => e.name)).toEqual(['p2']);
      expect(hostPid(d)).toBe(hostPid(other));
    } finally {
      late.close();
    }
  });

  it('recovers an intent left by a crash before the host served it', async () => {
    const dir = join(dataDir, 'instances', 'p1');
    const first = await lifecycle.ensureInstance(spec('p1'), signal());
    process.kill(hostPid(first), 'SIGKILL');
    await waitFor('host gone', async () => (await findHostProcesses(dataDir)).length === 0);
    await rm(join(dir, 'instance.json'));
    expect(await lifecycle.getInstance('p1', undefined, signal())).toMatchObject({ state: 'failed' });
    const recovered = await lifecycle.ensureInstance(spec('p1'), signal());
    expect(recovered.state).toBe('running');
    expect(await findHostProcesses(dataDir)).toEqual([hostPid(recovered)]);
  });

  it('reloads changed credentials without restarting the proxy', async () => {
    const instance = await lifecycle.ensureInstance(spec('p1'), signal());
    const next = { username: 'crawler', password: 'rotated' };
    const again = await lifecycle.ensureInstance(spec('p1', 'fleet-a', next), signal());
    expect(again.id).toBe(instance.id);
    const port = instance.endpoint!.port;
    expect((await getThrough(port, `http://127.0.0.1:${targetPort}/`, next)).status).toBe(200);
    expect((await getThrough(port, `http://127.0.0.1:${targetPort}/`, CREDS)).status).toBe(407);
  });

  it('never treats or signals a pid recorded for the host that now runs another program', async () => {
    const instance = await lifecycle.ensureInstance(spec('p1'), signal());
    process.kill(hostPid(instance), 'SIGKILL');
    await waitFor('host gone', async () => (await findHostProcesses(dataDir)).length === 0);
    const bystander = spawn('sleep', ['60'], { stdio: 'ignore' });
    const exited = new Promise<NodeJS.Signals | null>((r) => bystander.once('exit', (_code, sig) => r(sig)));
    try {
      const dir = join(dataDir, 'instances', 'p1');
      const record = JSON.parse(await readFile(join(dir, 'instance.json'), 'utf8'));
      await writeFile(join(dir, 'instance.json'), JSON.stringify({ ...record, pid: bystander.pid }));
      const host = JSON.parse(await readFile(join(dataDir, 'host', 'host.json'), 'utf8'));
      await writeFile(join(dataDir, 'host', 'host.json'), JSON.stringify({ ...host, pid: bystander.pid }));
      expect(await lifecycle.getInstance('p1', undefined, signal())).toMatchObject({ state: 'failed' });
      // A new host is started (the bystander is not taken for one) and serves the proxy again.
      const back = await lifecycle.ensureInstance(spec('p1'), signal());
      expect(hostPid(back)).not.toBe(bystander.pid);
      await lifecycle.deleteInstance('p1', undefined, { owner: spec('p1').owner, nameIsOurs: true }, signal());
      expect(bystander.exitCode).toBeNull();
      expect(bystander.signalCode).toBeNull();
    } finally {
      bystander.kill('SIGKILL');
      expect(await exited).toBe('SIGKILL');
    }
  });

  it('an aborted ensureInstance rejects, and the next call adopts the host it started', async () => {
    const controller = new AbortController();
    // The job's deadline ends the moment the host is spawned: the lifecycle's own log line is the
    // hook (pino writes to this stream synchronously).
    const hook = new Writable({
      write(chunk: Buffer, _enc, done) {
        if (chunk.toString().includes('local proxy host spawned')) controller.abort(new Error('job deadline'));
        done();
      },
    });
    const watched = createLocalLifecycle({ dataDir, logger: pino({ level: 'info' }, hook), egressPolicy });
    try {
      await expect(watched.ensureInstance(spec('p1'), controller.signal)).rejects.toThrow('job deadline');
      const [started] = await findHostProcesses(dataDir);
      expect(started).toBeDefined();
      const done = await lifecycle.ensureInstance(spec('p1'), signal());
      expect(done).toMatchObject({ state: 'running' });
      expect(hostPid(done)).toBe(started);
      expect(await findHostProcesses(dataDir)).toEqual([started]);
    } finally {
      watched.close();
    }
  });

  it('rejects an invalid name and another owner as provisioning errors', async () => {
    await expect(lifecycle.ensureInstance(spec('Bad_Name'), signal())).rejects.toMatchObject({ code: 'ERR_PROVISIONING', retryable: false });
    await lifecycle.ensureInstance(spec('p1', 'fleet-a'), signal());
    await expect(lifecycle.ensureInstance(spec('p1', 'fleet-b'), signal())).rejects.toMatchObject({ code: 'ERR_PROVISIONING' });
  });

  it('migration: a proxy process of the earlier model is adopted until it exits or is deleted, never served twice', async () => {
    // An instance as the per-process model left it: intent, credentials, and its own process.
    const legacyDir = join(dataDir, 'instances', 'old');
    await lifecycle.ensureInstance(spec('old'), signal());
    const { port } = JSON.parse(await readFile(join(legacyDir, 'instance.json'), 'utf8'));
    await lifecycle.deleteInstance('old', undefined, { owner: spec('old').owner, nameIsOurs: true }, signal());
    await waitFor('host gone', async () => (await findHostProcesses(dataDir)).length === 0);
    await mkdir(legacyDir, { recursive: true });
    await writeFile(
      join(legacyDir, 'intent.json'),
      JSON.stringify({ name: 'old', owner: { fleet: 'fleet-a', proxy: 'proxy-old' }, createdAt: new Date().toISOString() }),
    );
    await writeFile(join(legacyDir, 'credentials.json'), JSON.stringify(CREDS), { mode: 0o600 });
    const legacy = spawn(process.execPath, ['--import', 'tsx', SCRIPT, legacyDir, '--port', String(port), '--policy', join(dataDir, 'egress-policy.json')], {
      stdio: 'ignore',
      detached: true,
    });
    legacy.unref();
    const legacyRecord = await waitFor('legacy listening', async () => {
      const r = JSON.parse(await readFile(join(legacyDir, 'instance.json'), 'utf8').catch(() => '{}')) as { pid?: number; port: number };
      return r.pid === legacy.pid ? r : undefined;
    });

    const exited = new Promise<InstanceExit>((resolveExit) => lifecycle.onInstanceExit(resolveExit));
    const adopted = await lifecycle.ensureInstance(spec('old'), signal());
    expect(adopted).toMatchObject({ id: String(legacy.pid), state: 'running', endpoint: { port: legacyRecord.port } });
    // A host started for another proxy leaves it to its process.
    const fresh = await lifecycle.ensureInstance(spec('new'), signal());
    expect(await hostOf(dataDir).served(signal())).toEqual(['new']);
    expect((await getThrough(legacyRecord.port, `http://127.0.0.1:${targetPort}/old`, CREDS)).status).toBe(200);

    // When it exits, the next ensure moves it into the host, on the same port.
    process.kill(legacy.pid!, 'SIGKILL');
    expect(await exited).toMatchObject({ name: 'old', id: String(legacy.pid), message: `proxy process ${legacy.pid} exited` });
    const moved = await lifecycle.ensureInstance(spec('old'), signal());
    expect(moved).toMatchObject({ state: 'running', endpoint: { port: legacyRecord.port } });
    expect(hostPid(moved)).toBe(hostPid(fresh));
    expect((await hostOf(dataDir).served(signal())).sort()).toEqual(['new', 'old']);
  });
});
