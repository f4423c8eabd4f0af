import { spawn } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeAll, afterAll, beforeEach, describe, expect, it } from 'vitest';
import { proxyEgressPolicy } from '../../src/egress/policy-config.ts';
import { silentLogger } from '../../src/logging.ts';
import type { Instance, InstanceExit, InstanceSpec, ProxyCredentials, ProxyLifecycle } from '../../src/providers/lifecycle.ts';
import { createLocalLifecycle } from '../../src/providers/local/lifecycle.ts';
import { findProxyProcesses } from '../../src/providers/local/process-table.ts';
import { waitFor } from '../support/wait.ts';

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

function portIsClosed(port: number): Promise<boolean> {
  return new Promise((resolvePort) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolvePort(false);
    });
    socket.once('error', () => resolvePort(true));
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

describe('local proxy lifecycle', () => {
  let dataDir: string;
  let lifecycle: ProxyLifecycle;

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'egress-local-'));
    lifecycle = createLocalLifecycle({ dataDir, logger: silentLogger(), egressPolicy });
  });

  afterEach(async () => {
    const names = await readdir(join(dataDir, 'instances')).catch(() => [] as string[]);
    for (const name of names) await lifecycle.deleteInstance(name, undefined, signal());
    for (const name of names) expect(await findProxyProcesses(join(dataDir, 'instances', name))).toEqual([]);
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

  it('keeps state on disk with the credentials readable by the owner only', async () => {
    const instance = await lifecycle.ensureInstance(spec('p1'), signal());
    const dir = join(dataDir, 'instances', 'p1');
    const record = JSON.parse(await readFile(join(dir, 'instance.json'), 'utf8'));
    expect(record).toMatchObject({ name: 'p1', owner: { fleet: 'fleet-a', proxy: 'proxy-p1' }, pid: Number(instance.id), port: instance.endpoint!.port });
    expect(typeof record.createdAt).toBe('string');
    expect(JSON.stringify(record)).not.toContain(CREDS.password);
    expect((await stat(join(dir, 'credentials.json'))).mode & 0o777).toBe(0o600);
    expect(await readFile(join(dir, 'proxy.log'), 'utf8')).not.toContain(CREDS.password);
  });

  it('runs each proxy as plain node on the program built into the data directory, no TypeScript loader', async () => {
    const instance = await lifecycle.ensureInstance(spec('p1'), signal());
    const args = (await readFile(`/proc/${instance.id}/cmdline`, 'utf8')).split('\0').filter(Boolean);
    expect(args).toEqual([
      process.execPath,
      join(dataDir, 'bin', 'proxy-process.cjs'),
      join(dataDir, 'instances', 'p1'),
      '--policy',
      join(dataDir, 'egress-policy.json'),
    ]);
  });

  it('never takes a process whose arguments merely name the program and the directory for a proxy, nor signals it', async () => {
    const dir = join(dataDir, 'instances', 'p1');
    await lifecycle.ensureInstance(spec('p1'), signal());
    const program = join(dataDir, 'bin', 'proxy-process.cjs');
    const lookalike = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)', program, dir], { stdio: 'ignore' });
    try {
      await new Promise((resolveSpawn) => lookalike.once('spawn', resolveSpawn));
      expect(await findProxyProcesses(dir)).not.toContain(lookalike.pid);
      await lifecycle.deleteInstance('p1', undefined, signal());
      expect(lookalike.exitCode).toBeNull();
      expect(lookalike.signalCode).toBeNull();
      expect(() => process.kill(lookalike.pid ?? 0, 0)).not.toThrow();
    } finally {
      lookalike.kill('SIGKILL');
    }
  });

  it('two workers racing on the same name end with one process that both report', async () => {
    const other = createLocalLifecycle({ dataDir, logger: silentLogger(), egressPolicy });
    const [a, b] = await Promise.all([lifecycle.ensureInstance(spec('p1'), signal()), other.ensureInstance(spec('p1'), signal())]);
    expect(b.id).toBe(a.id);
    expect(b.endpoint).toEqual(a.endpoint);
    // A process the loser spawned may still be loading; it finds the winner and exits without listening.
    const dir = join(dataDir, 'instances', 'p1');
    const left = await waitFor('one process left', async () => {
      const pids = await findProxyProcesses(dir);
      return pids.length === 1 ? pids : undefined;
    });
    expect(left).toEqual([Number(a.id)]);
  });

  it('a restarted worker (new lifecycle on the same data dir) finds the running instance', async () => {
    const created = await lifecycle.ensureInstance(spec('p1'), signal());
    const restarted = createLocalLifecycle({ dataDir, logger: silentLogger(), egressPolicy });
    expect(await restarted.getInstance('p1', undefined, signal())).toMatchObject({ id: created.id, state: 'running', endpoint: created.endpoint });
    expect((await collect(restarted.listInstances('fleet-a', signal()))).map((i) => i.id)).toEqual([created.id]);
    const again = await restarted.ensureInstance(spec('p1'), signal());
    expect(again.id).toBe(created.id);
  });

  it('delete stops the process, closes the port and removes the directory; deleting again is a no-op', async () => {
    const instance = await lifecycle.ensureInstance(spec('p1'), signal());
    const dir = join(dataDir, 'instances', 'p1');
    await lifecycle.deleteInstance('p1', undefined, signal());
    expect(await findProxyProcesses(dir)).toEqual([]);
    expect(await portIsClosed(instance.endpoint!.port)).toBe(true);
    await expect(stat(dir)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await lifecycle.getInstance('p1', undefined, signal())).toBeUndefined();
    await lifecycle.deleteInstance('p1', undefined, signal());
    await lifecycle.deleteInstance('never-existed', undefined, signal());
  });

  it('a killed process is reported failed, and ensureInstance restarts it on the same port', async () => {
    const instance = await lifecycle.ensureInstance(spec('p1'), signal());
    process.kill(Number(instance.id), 'SIGKILL');
    const failed = await waitFor('failed state', async () => {
      const i = await lifecycle.getInstance('p1', undefined, signal());
      return i?.state === 'failed' ? i : undefined;
    });
    expect(failed.message).toContain(`proxy process ${instance.id} is no longer running`);
    expect(failed.endpoint).toBeUndefined();

    const restarted = await lifecycle.ensureInstance(spec('p1'), signal());
    expect(restarted.state).toBe('running');
    expect(restarted.id).not.toBe(instance.id);
    expect(restarted.endpoint).toEqual(instance.endpoint);
    expect((await getThrough(restarted.endpoint!.port, `http://127.0.0.1:${targetPort}/back`, CREDS)).status).toBe(200);
  });

  it('reports a process exit at once, without a probe: its own child, one a new lifecycle adopted, one that died while nobody watched; never a deletion', async () => {
    const own = createLocalLifecycle({ dataDir, logger: silentLogger(), egressPolicy });
    const exits: InstanceExit[] = [];
    const nextExit = () =>
      new Promise<InstanceExit>((resolveExit) => {
        const off = own.onInstanceExit((e) => {
          off();
          resolveExit(e);
        });
      });
    const record = own.onInstanceExit((e) => exits.push(e));
    try {
      const a = await own.ensureInstance(spec('p1'), signal());
      const exited = nextExit();
      process.kill(Number(a.id), 'SIGKILL');
      expect(await exited).toEqual({ name: 'p1', owner: { fleet: 'fleet-a', proxy: 'proxy-p1' }, id: a.id, message: `proxy process ${a.id} exited` });

      // A new lifecycle (a new worker) adopts the running process and still sees it exit.
      const b = await own.ensureInstance(spec('p1'), signal());
      const adopter = createLocalLifecycle({ dataDir, logger: silentLogger(), egressPolicy });
      try {
        expect((await adopter.getInstance('p1', undefined, signal()))?.id).toBe(b.id);
        const adopted = new Promise<InstanceExit>((resolveExit) => adopter.onInstanceExit(resolveExit));
        process.kill(Number(b.id), 'SIGKILL');
        expect(await adopted).toMatchObject({ name: 'p1', id: b.id });
      } finally {
        adopter.close();
      }

      // A process that died while no lifecycle watched is reported when one starts watching.
      const c = await own.ensureInstance(spec('p1'), signal());
      own.close();
      process.kill(Number(c.id), 'SIGKILL');
      await waitFor('process gone', async () => (await findProxyProcesses(join(dataDir, 'instances', 'p1'))).length === 0);
      const late = createLocalLifecycle({ dataDir, logger: silentLogger(), egressPolicy });
      try {
        const missed = await new Promise<InstanceExit>((resolveExit) => late.onInstanceExit(resolveExit));
        expect(missed).toMatchObject({ name: 'p1', id: c.id, message: `proxy process ${c.id} is no longer running` });
        // A deletion is not an exit.
        const d = await late.ensureInstance(spec('p1'), signal());
        const other = await late.ensureInstance(spec('p2'), signal());
        const seen: InstanceExit[] = [];
        const otherExited = new Promise<void>((resolveExit) =>
          late.onInstanceExit((e) => {
            seen.push(e);
            if (e.id === other.id) resolveExit();
          }),
        );
        await late.deleteInstance('p1', undefined, signal());
        expect(await late.getInstance('p1', undefined, signal())).toBeUndefined();
        // Exits are reported in the order the watch sees them: once p2's is in, a p1 exit would be too.
        process.kill(Number(other.id), 'SIGKILL');
        await otherExited;
        expect(seen.map((e) => e.id)).toEqual([other.id]);
        expect(d.id).not.toBe(other.id);
      } finally {
        late.close();
      }
      expect(exits[0]?.id).toBe(a.id);
    } finally {
      record();
      own.close();
    }
  });

  /** An instance directory holding an intent and no live process (its process SIGKILLed, its instance.json gone); returns the directory. */
  async function intentWithoutProcess(name: string): Promise<string> {
    const dir = join(dataDir, 'instances', name);
    const first = await lifecycle.ensureInstance(spec(name), signal());
    process.kill(Number(first.id), 'SIGKILL');
    await waitFor('process gone', async () => (await findProxyProcesses(dir)).length === 0);
    await rm(join(dir, 'instance.json'));
    return dir;
  }

  it('recovers an intent left by a crash before the spawn: one process, no second', async () => {
    // Simulate a worker that recorded the intent and died before its process ever listened.
    const dir = await intentWithoutProcess('p1');
    expect(await lifecycle.getInstance('p1', undefined, signal())).toMatchObject({ state: 'failed' });

    const recovered = await lifecycle.ensureInstance(spec('p1'), signal());
    expect(recovered.state).toBe('running');
    expect(await findProxyProcesses(dir)).toEqual([Number(recovered.id)]);
  });

  it('adopts a process a crashed worker spawned instead of starting a second one', async () => {
    const dir = await intentWithoutProcess('p1');
    // The crashed worker's child: spawned, but nobody waited for it.
    const orphan = spawn(process.execPath, ['--import', 'tsx', SCRIPT, dir], { stdio: 'ignore', detached: true });
    orphan.unref();
    const adopted = await lifecycle.ensureInstance(spec('p1'), signal());
    expect(adopted.id).toBe(String(orphan.pid));
    expect(await findProxyProcesses(dir)).toEqual([orphan.pid]);
  });

  it('reloads changed credentials without restarting the process', async () => {
    const instance = await lifecycle.ensureInstance(spec('p1'), signal());
    const next = { username: 'crawler', password: 'rotated' };
    const again = await lifecycle.ensureInstance(spec('p1', 'fleet-a', next), signal());
    expect(again.id).toBe(instance.id);
    const port = instance.endpoint!.port;
    await waitFor('new credentials accepted', async () => (await getThrough(port, `http://127.0.0.1:${targetPort}/`, next)).status === 200);
    expect((await getThrough(port, `http://127.0.0.1:${targetPort}/`, CREDS)).status).toBe(407);
  });

  it('never treats or signals a reused pid as its proxy', async () => {
    const instance = await lifecycle.ensureInstance(spec('p1'), signal());
    const dir = join(dataDir, 'instances', 'p1');
    process.kill(Number(instance.id), 'SIGKILL');
    await waitFor('process gone', async () => (await findProxyProcesses(dir)).length === 0);
    // Another program now holds the pid recorded in instance.json.
    const bystander = spawn('sleep', ['60'], { stdio: 'ignore' });
    const exited = new Promise<NodeJS.Signals | null>((r) => bystander.once('exit', (_code, sig) => r(sig)));
    try {
      const record = JSON.parse(await readFile(join(dir, 'instance.json'), 'utf8'));
      await writeFile(join(dir, 'instance.json'), JSON.stringify({ ...record, pid: bystander.pid }));
      expect(await lifecycle.getInstance('p1', undefined, signal())).toMatchObject({ state: 'failed' });
      await lifecycle.deleteInstance('p1', undefined, signal());
      await expect(stat(dir)).rejects.toMatchObject({ code: 'ENOENT' });
      expect(bystander.exitCode).toBeNull();
      expect(bystander.signalCode).toBeNull();
    } finally {
      bystander.kill('SIGKILL');
      expect(await exited).toBe('SIGKILL');
    }
  });

  it('delete falls back to SIGKILL when the process does not stop on SIGTERM', async () => {
    const quick = createLocalLifecycle({ dataDir, logger: silentLogger(), stopGraceMs: 200, egressPolicy });
    const instance = await quick.ensureInstance(spec('p1'), signal());
    const dir = join(dataDir, 'instances', 'p1');
    // A stopped process cannot act on SIGTERM; only SIGKILL ends it.
    process.kill(Number(instance.id), 'SIGSTOP');
    await quick.deleteInstance('p1', undefined, signal());
    expect(await findProxyProcesses(dir)).toEqual([]);
    await expect(stat(dir)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('an aborted ensureInstance rejects, and the next call adopts what it started', async () => {
    const controller = new AbortController();
    const dir = join(dataDir, 'instances', 'p1');
    // The job's deadline ends the moment the process is spawned, before it can listen: the
    // lifecycle's own log line is the hook (pino writes to this stream synchronously).
    const hook = new Writable({
      write(chunk: Buffer, _enc, done) {
        if (chunk.toString().includes('local proxy process spawned')) controller.abort(new Error('job deadline'));
        done();
      },
    });
    const watched = createLocalLifecycle({ dataDir, logger: pino({ level: 'info' }, hook), egressPolicy });
    try {
      await expect(watched.ensureInstance(spec('p1'), controller.signal)).rejects.toThrow('job deadline');
      const [started] = await findProxyProcesses(dir);
      expect(started).toBeDefined();
      const done = await lifecycle.ensureInstance(spec('p1'), signal());
      expect(done).toMatchObject({ state: 'running', id: String(started) });
      expect(await findProxyProcesses(dir)).toEqual([started]);
    } finally {
      watched.close();
    }
  });

  it('rejects an invalid name and another owner as provisioning errors', async () => {
    await expect(lifecycle.ensureInstance(spec('Bad_Name'), signal())).rejects.toMatchObject({ code: 'ERR_PROVISIONING', retryable: false });
    await lifecycle.ensureInstance(spec('p1', 'fleet-a'), signal());
    await expect(lifecycle.ensureInstance(spec('p1', 'fleet-b'), signal())).rejects.toMatchObject({ code: 'ERR_PROVISIONING' });
  });
});
