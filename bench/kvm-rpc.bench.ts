/**
 * libvirt RPC over the pooled SSH connection, against the real KVM test host
 * (scripts/kvm-test-host.sh: libvirtd qemu:///system behind sshd on 127.0.0.1:2222).
 *
 *   node --import tsx bench/kvm-rpc.bench.ts
 *
 * - pooled: CONNECT_GET_LIB_VERSION through HostPool.call over one host connection, 1 and 4 in
 *   flight (calls/s), and per-call latency at 1 in flight (p50/p99);
 * - floor: the same call in a bare loop over one ssh2 streamlocal channel with nothing but
 *   framing (hand-encoded CALL, read the REPLY, no multiplexing, no keepalive, no metrics);
 * - reference: `virsh -c qemu+ssh://…?command=<ssh wrapper> version` run once per call (a
 *   process, an SSH connection and a libvirt connection each time);
 * - memory per open host connection: N hosts of one pool opened, heap+external before/after.
 *
 * The pooled 1-in-flight and bare measurements alternate in BENCH_ROUNDS rounds (the machine is
 * shared and its load drifts); 4 in flight runs after them.
 *
 * Env: BENCH_SECONDS (per measured kind, default 5), BENCH_ROUNDS (default 5), BENCH_VIRSH_CALLS (default 5),
 * BENCH_MEM_CONNECTIONS (default 50).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { ClientChannel } from 'ssh2';
import { connectSsh } from '../src/kvm/ssh/connect.ts';
import { loadSshMaterial } from '../src/kvm/ssh/material.ts';
import { openStreamLocal } from '../src/kvm/ssh/streamlocal.ts';
import type { HostConnection } from '../src/kvm/host-connection.ts';
import { createKvmHostPool } from '../src/kvm/pool/index.ts';
import type { KvmHostConfig } from '../src/providers/kvm/config.ts';
import { silentLogger } from '../src/logging.ts';
import { kvmTestHost } from '../test/support/kvm-host.ts';
import { fmt, summarize } from './stats.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const VIRSH_CALLS = Number(process.env.BENCH_VIRSH_CALLS ?? 5);
const MEM_CONNECTIONS = Number(process.env.BENCH_MEM_CONNECTIONS ?? 50);

const REMOTE_PROGRAM = 0x20008086;
const PROC_CONNECT_OPEN = 1;
const PROC_AUTH_LIST = 66;
const PROC_GET_LIB_VERSION = 157;

const libVersion = (c: HostConnection, s: AbortSignal): Promise<number> => c.libvirt.getLibVersion(s);

/** Runs `concurrency` loops of `op` for `seconds`; returns calls/s and per-call ms. */
interface Rate {
  perSec: number;
  samples: number[];
  /** This process's CPU time (user + system) per call, µs. */
  cpuUs: number;
}

async function rate(concurrency: number, seconds: number, op: () => Promise<unknown>): Promise<Rate> {
  const samples: number[] = [];
  const end = performance.now() + seconds * 1000;
  const start = performance.now();
  const cpu0 = process.cpuUsage();
  let calls = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        await op();
        samples.push(performance.now() - t);
        calls++;
      }
    }),
  );
  const cpu = process.cpuUsage(cpu0);
  return { perSec: calls / ((performance.now() - start) / 1000), samples, cpuUs: (cpu.user + cpu.system) / calls };
}

/** A bare libvirt client: one channel, hand-encoded frames, one call at a time. */
class BareLoop {
  private buf: Buffer = Buffer.alloc(0);
  private waiter: ((payload: Buffer) => void) | undefined;
  private serial = 1;
  constructor(private readonly ch: ClientChannel) {
    ch.on('data', (d: Buffer) => {
      this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
      while (this.buf.length >= 4) {
        const len = this.buf.readUInt32BE(0);
        if (this.buf.length < len) break;
        const frame = this.buf.subarray(0, len);
        this.buf = this.buf.subarray(len);
        const type = frame.readInt32BE(16);
        const status = frame.readInt32BE(24);
        if (type !== 1) continue; // not a REPLY (a keepalive PING, say)
        if (status !== 0) throw new Error(`bare loop: call failed with status ${status}`);
        const w = this.waiter;
        this.waiter = undefined;
        w?.(frame.subarray(28));
      }
    });
  }
  call(proc: number, payload: Buffer = Buffer.alloc(0)): Promise<Buffer> {
    const header = Buffer.alloc(28);
    header.writeUInt32BE(28 + payload.length, 0);
    header.writeUInt32BE(REMOTE_PROGRAM, 4);
    header.writeUInt32BE(1, 8);
    header.writeInt32BE(proc, 12);
    header.writeInt32BE(0, 16); // CALL
    header.writeUInt32BE(this.serial++, 20);
    header.writeInt32BE(0, 24);
    return new Promise((resolve) => {
      this.waiter = resolve;
      this.ch.write(payload.length ? Buffer.concat([header, payload]) : header);
    });
  }
}

function xdrOptionalString(s: string): Buffer {
  const str = Buffer.from(s, 'utf8');
  const pad = (4 - (str.length % 4)) % 4;
  const out = Buffer.alloc(4 + 4 + str.length + pad + 4);
  out.writeUInt32BE(1, 0); // present
  out.writeUInt32BE(str.length, 4);
  str.copy(out, 8);
  out.writeUInt32BE(0, 8 + str.length + pad); // flags
  return out;
}

/** Opens the bare loop: SSH, one streamlocal channel, AUTH_LIST and OPEN by hand. */
async function openBare(host: KvmHostConfig): Promise<{ op: () => Promise<unknown>; close: () => void }> {
  const signal = AbortSignal.timeout(60_000);
  const material = await loadSshMaterial(host, signal);
  const ssh = await connectSsh(host, material, signal, { logger: silentLogger(), keepaliveIntervalMs: 0 });
  try {
    const ch = await openStreamLocal(ssh, host.socketPath, signal);
    const bare = new BareLoop(ch);
    await bare.call(PROC_AUTH_LIST);
    await bare.call(PROC_CONNECT_OPEN, xdrOptionalString(host.uri));
    const first = await bare.call(PROC_GET_LIB_VERSION);
    if (first.readBigUInt64BE(0) < 1_000_000n) throw new Error('bare loop: unexpected lib version');
    return { op: () => bare.call(PROC_GET_LIB_VERSION), close: () => ssh.destroy() };
  } catch (err) {
    ssh.destroy();
    throw err;
  }
}

/**
 * Alternates 1-in-flight rounds of the pooled call and of the bare loop so that both see the
 * same machine load (this box is shared); rates are total calls over total time per kind.
 */
async function interleaved(rounds: number, secondsPerRound: number, a: () => Promise<unknown>, b: () => Promise<unknown>): Promise<[Rate, Rate]> {
  const acc = [
    { calls: 0, secs: 0, cpu: 0, samples: [] as number[] },
    { calls: 0, secs: 0, cpu: 0, samples: [] as number[] },
  ];
  for (let r = 0; r < rounds; r++) {
    for (const [i, op] of [a, b].entries()) {
      const res = await rate(1, secondsPerRound, op);
      const slot = acc[i]!;
      slot.calls += res.samples.length;
      slot.secs += res.samples.length / res.perSec;
      slot.cpu += res.cpuUs * res.samples.length;
      for (const x of res.samples) slot.samples.push(x);
    }
  }
  const out = acc.map((x) => ({ perSec: x.calls / x.secs, samples: x.samples, cpuUs: x.cpu / x.calls }));
  return [out[0]!, out[1]!];
}

async function virshReference(host: KvmHostConfig, calls: number): Promise<{ perSec: number; samples: number[] }> {
  const dir = await mkdtemp(join(tmpdir(), 'kvm-bench-'));
  try {
    const wrapper = join(dir, 'ssh-wrapper');
    await writeFile(wrapper, `#!/bin/sh\nexec ssh -F none -o UserKnownHostsFile=${host.knownHostsFile} -o StrictHostKeyChecking=yes -o BatchMode=yes "$@"\n`, {
      mode: 0o755,
    });
    const uri = `qemu+ssh://${host.user}@${host.address}:${host.port}/system?keyfile=${host.privateKeyFile}&command=${wrapper}`;
    const samples: number[] = [];
    for (let i = 0; i < calls; i++) {
      const t = performance.now();
      await new Promise<void>((resolve, reject) =>
        execFile('virsh', ['-c', uri, 'version'], { timeout: 30_000 }, (err: Error | null) => (err ? reject(err) : resolve())),
      );
      samples.push(performance.now() - t);
    }
    const total = samples.reduce((a, b) => a + b, 0);
    return { perSec: calls / (total / 1000), samples };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function gcFunction(): () => void {
  setFlagsFromString('--expose_gc');
  return runInNewContext('gc') as () => void;
}

async function memoryPerConnection(host: KvmHostConfig, n: number): Promise<number> {
  const gc = gcFunction();
  const pool = createKvmHostPool({ logger: silentLogger(), idleTimeoutMs: 0 });
  const signal = AbortSignal.timeout(120_000);
  try {
    const hosts = Array.from({ length: n }, (_, i) => ({ ...host, name: `mem-${i}` }));
    // One connection first, so that module and TLS-free crypto warm-up is not counted.
    await pool.call({ ...host, name: 'mem-warm' }, libVersion, signal);
    gc();
    gc();
    const before = process.memoryUsage();
    for (let i = 0; i < hosts.length; i += 10) {
      await Promise.all(hosts.slice(i, i + 10).map((h) => pool.call(h, libVersion, signal)));
    }
    gc();
    gc();
    const after = process.memoryUsage();
    return (after.heapUsed + after.external - (before.heapUsed + before.external)) / n;
  } finally {
    await pool.close();
  }
}

export async function runKvmRpcBench(): Promise<Record<string, unknown>> {
  const t = await kvmTestHost();
  const host: KvmHostConfig = {
    name: 'bench',
    address: t.ssh.host,
    port: t.ssh.port,
    user: t.ssh.user,
    privateKeyFile: t.ssh.keyFile,
    knownHostsFile: t.ssh.knownHostsFile,
    insecureIgnoreHostKey: false,
    pool: t.pool,
    socketPath: t.socket,
    uri: t.uri,
  };

  const pool = createKvmHostPool({ logger: silentLogger(), idleTimeoutMs: 0 });
  const bareLoop = await openBare(host);
  let pooled1: Rate;
  let pooled4: Rate;
  let bare: Rate;
  try {
    const signal = AbortSignal.timeout(10 * 60_000);
    const pooledOp = (): Promise<number> => pool.call(host, libVersion, signal);
    for (let i = 0; i < 500; i++) {
      await pooledOp(); // dial + warm-up
      await bareLoop.op();
    }
    [pooled1, bare] = await interleaved(ROUNDS, SECONDS / ROUNDS, pooledOp, bareLoop.op);
    pooled4 = await rate(4, SECONDS, pooledOp);
  } finally {
    bareLoop.close();
    await pool.close();
  }
  const virsh = await virshReference(host, VIRSH_CALLS);
  const memPerConn = await memoryPerConnection(host, MEM_CONNECTIONS);

  const lat1 = summarize(pooled1.samples);
  const bareLat = summarize(bare.samples);
  const virshLat = summarize(virsh.samples);
  const ratioBare = pooled1.perSec / bare.perSec;
  const result = {
    bench: 'kvm-rpc',
    call: 'CONNECT_GET_LIB_VERSION',
    seconds: SECONDS,
    pooled: {
      inFlight1: { callsPerSec: Math.round(pooled1.perSec), p50Ms: lat1.p50, p99Ms: lat1.p99, n: lat1.n, cpuUsPerCall: pooled1.cpuUs },
      inFlight4: { callsPerSec: Math.round(pooled4.perSec), cpuUsPerCall: pooled4.cpuUs },
    },
    bare: { callsPerSec: Math.round(bare.perSec), p50Ms: bareLat.p50, p99Ms: bareLat.p99, cpuUsPerCall: bare.cpuUs },
    virsh: { callsPerSec: virsh.perSec, p50Ms: virshLat.p50, calls: VIRSH_CALLS },
    ratios: {
      pooled1OverBare: ratioBare,
      pooled4OverBare: pooled4.perSec / bare.perSec,
      pooled1OverVirsh: pooled1.perSec / virsh.perSec,
    },
    memory: { connections: MEM_CONNECTIONS, bytesPerConnection: Math.round(memPerConn) },
    targets: { pooledOverBareMin: 0.7, p99MaxMs: 2, met: ratioBare >= 0.7 && lat1.p99 < 2 },
  };

  console.log('\n| measure | calls/s | p50 ms | p99 ms | client CPU µs/call |');
  console.log('|---|---:|---:|---:|---:|');
  console.log(`| pooled call, 1 in flight | ${Math.round(pooled1.perSec)} | ${fmt(lat1.p50, 3)} | ${fmt(lat1.p99, 3)} | ${fmt(pooled1.cpuUs, 1)} |`);
  console.log(`| pooled call, 4 in flight | ${Math.round(pooled4.perSec)} | | | ${fmt(pooled4.cpuUs, 1)} |`);
  console.log(`| bare loop (floor), 1 in flight | ${Math.round(bare.perSec)} | ${fmt(bareLat.p50, 3)} | ${fmt(bareLat.p99, 3)} | ${fmt(bare.cpuUs, 1)} |`);
  console.log(`| virsh qemu+ssh per call (reference, ${VIRSH_CALLS} calls) | ${fmt(virsh.perSec, 2)} | ${fmt(virshLat.p50, 1)} | | |`);
  console.log('');
  console.log(`pooled(1)/bare = ${fmt(ratioBare * 100, 1)} % (target ≥ 70 %); pooled(4)/bare = ${fmt(result.ratios.pooled4OverBare * 100, 1)} %`);
  console.log(`pooled(1)/virsh = ${fmt(result.ratios.pooled1OverVirsh, 0)}×`);
  console.log(`p99 at 1 in flight = ${fmt(lat1.p99, 3)} ms (target < 2 ms)`);
  console.log(`memory per open host connection (${MEM_CONNECTIONS} opened) = ${fmt(memPerConn / 1024, 1)} KiB (heap + external)`);
  console.log(`targets ${result.targets.met ? 'MET' : 'NOT MET'}`);
  console.log(JSON.stringify(result));
  return result;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await runKvmRpcBench();
}
