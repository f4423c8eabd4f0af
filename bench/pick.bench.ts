/**
 * Picks from a pool (`npm run bench -- pick`): a real `egress api` process (its own process, a
 * bearer token, the default --pick-cache of 1 s) on a private redis-server, members written
 * straight into the stores (Ready, as the pool reconcile leaves them; picks carry no traffic). The
 * load is open-loop: picks are sent on a fixed schedule (`BENCH_RATE`, default 1,200/s, for
 * `BENCH_SECONDS`, default 8) whatever the answers do, over keep-alive connections; each pick names
 * one of 2,000 sessions and one of 50 domains, and 1 % of the sends are `blocked` feedback through
 * the pool's session, so sessions move and blocks are consulted. Latency is from each request's
 * send to its last byte. A baseline row sends `GET /readyz` (the token check and one Redis PING, no
 * pick) at the same rate first: the floor of this machine under its load at that moment; and in each
 * pool row every fourth pick has a `/readyz` twin sent at the same instant, whose latency taken from
 * the pick's is the pick's own cost over the baseline in the same run. Targets: ≥ 1,000 picks/s at
 * p99 < 5 ms (issue 14); the pick's own cost ≤ 1 ms at p99 (issue 27).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import type { Socket } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { POOL_LABEL } from '../src/model/pool-resource.ts';
import { startRedisChild } from '../src/redis/redis-server.ts';
import { RedisPoolStore } from '../src/store/redis-pool-store.ts';
import { RedisProxyStore } from '../src/store/redis-proxy-store.ts';
import { fmt, summarize } from './stats.ts';
import { open, ResponseReader } from './support/raw-http-client.ts';

const ROOT = resolve(import.meta.dirname, '..');
const RATE = Number(process.env.BENCH_RATE ?? 1200);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const WARM_UP_SECONDS = 2;
const SIZES = (process.env.BENCH_POOL_SIZES ?? '10,100,1000').split(',').map(Number);
const TOKEN = 'bench-pick-token-0123456789abcdef';
const PREFIX = '{bench-pick}';
const SESSIONS = 2000;
const DOMAINS = 50;

interface Row {
  /** The pool's size, or `GET /readyz` for the baseline row. */
  members: number | string;
  offeredPerSecond: number;
  picksPerSecond: number;
  p50: number;
  p99: number;
  max: number;
  feedback: number;
  /** Answers other than 200 to picks (by status) and failed requests (by message). */
  errors: Record<string, number>;
  /** How far the sender fell behind its schedule at worst (the load generator's own lag). */
  behindMs: number;
  /** Pool rows: `GET /readyz` sent beside every PAIR_EVERY-th pick, in the same run (its p99), and the paired difference's percentiles. */
  paired?: { baselineP99: number; ownP50: number; ownP99: number; pairs: number };
}

/**
 * Every PAIR_EVERY-th pick goes out beside a `GET /readyz` sent at the same instant on another
 * connection: both meet the same moment of the machine (a collection, a busy core), so the pick's
 * latency minus its twin's is the pick's own cost over the baseline, in the same run.
 */
const PAIR_EVERY = 4;

/**
 * Keep-alive connections to the API through the raw client (node:http's own cost per request is
 * of the order of the pick's, and the generator shares the machine's two cores with the API and
 * Redis): each carries one request at a time, and one more opens when all are busy.
 */
class Connections {
  readonly #port: number;
  readonly #idle: { socket: Socket; reader: ResponseReader }[] = [];
  readonly #all = new Set<Socket>();

  constructor(port: number) {
    this.#port = port;
  }

  async send(method: string, path: string, body?: string): Promise<number> {
    let conn = this.#idle.pop();
    while (conn?.reader.closed) conn = this.#idle.pop();
    if (!conn) {
      const socket = await open('127.0.0.1', this.#port);
      this.#all.add(socket);
      socket.once('close', () => this.#all.delete(socket));
      conn = { socket, reader: new ResponseReader(socket) };
    }
    const head = `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1:${this.#port}\r\nAuthorization: Bearer ${TOKEN}\r\n`;
    conn.socket.write(
      body === undefined ? `${head}\r\n` : `${head}Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    try {
      const { status, close } = await conn.reader.next();
      if (close) conn.socket.destroy();
      else this.#idle.push(conn);
      return status;
    } catch (err) {
      conn.socket.destroy();
      throw err;
    }
  }

  destroy(): void {
    for (const socket of this.#all) socket.destroy();
  }
}

async function populate(redis: Redis, pool: string, members: number): Promise<void> {
  const pools = new RedisPoolStore(redis, PREFIX);
  const proxies = new RedisProxyStore(redis, PREFIX);
  await pools.apply({
    kind: 'ProxyPool',
    metadata: { name: pool, labels: {} },
    spec: { replicas: members, template: { metadata: { labels: {} }, spec: { provider: 'local' } }, maxSurge: 1 },
  });
  for (let i = 0; i < members; i++) {
    const name = `${pool}-${i.toString(36).padStart(5, '0')}`;
    await proxies.apply({ metadata: { name, labels: { [POOL_LABEL]: pool } }, spec: { provider: 'local' } });
    await proxies.updateStatus(name, (p) => ({ ...p.status, phase: 'Ready', url: `http://127.0.0.1:${20000 + i}` }));
  }
  await pools.close();
  await proxies.close();
}

/** Sends picks (and 1 % feedback) on a fixed schedule for `seconds`; measured unless `warmUp`. */
async function load(port: number, pool: string, members: number | string, seconds: number, baseline = false): Promise<Row> {
  const connections = new Connections(port);
  const latencies: number[] = [];
  const twins: number[] = [];
  const own: number[] = [];
  const statuses = new Map<string, number>();
  let feedback = 0;
  let behindMs = 0;
  const total = Math.round(RATE * seconds);
  // Requests in flight are counted, not kept: holding every promise until the end made the generator's own
  // garbage collections (and so the latencies it measures) grow with the run.
  let inflight = 0;
  let drained = (): void => undefined;
  // mulberry32, seeded per run: the same sequence of sessions, domains and reports every time.
  let seed = seconds === WARM_UP_SECONDS ? 1 : 2;
  const random = (n: number): number => {
    seed = (seed + 0x6d2b79f5) >>> 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
  };
  const count = (what: string): void => void statuses.set(what, (statuses.get(what) ?? 0) + 1);
  const t0 = performance.now();
  for (let i = 0; i < total; i++) {
    const due = t0 + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    else behindMs = Math.max(behindMs, -wait);
    const session = `s-${random(SESSIONS)}`;
    const domain = `site-${random(DOMAINS)}.example`;
    const isFeedback = random(100) === 0 && !baseline;
    const start = performance.now();
    const twin = !baseline && !isFeedback && i % PAIR_EVERY === 0 ? timed(connections.send('GET', '/readyz')) : undefined;
    const p = isFeedback
      ? connections.send('POST', `/v1/pools/${pool}/feedback`, JSON.stringify({ outcome: 'blocked', domain, session })).then(() => void feedback++)
      : connections.send('GET', baseline ? '/readyz' : `/v1/pools/${pool}/pick?session=${session}&domain=${domain}`).then(async (status) => {
          const took = performance.now() - start;
          latencies.push(took);
          if (status !== 200) count(String(status));
          if (twin) {
            const twinTook = await twin;
            twins.push(twinTook);
            own.push(took - twinTook);
          }
        });
    inflight++;
    void p
      .catch((err: Error) => count(err.message.slice(0, 40)))
      .finally(() => {
        if (--inflight === 0) drained();
      });
  }
  if (inflight > 0) await new Promise<void>((r) => (drained = r));
  const elapsed = (performance.now() - t0) / 1000;
  connections.destroy();
  const s = summarize(latencies);
  const sorted = [...latencies].sort((a, b) => a - b);
  return {
    members,
    offeredPerSecond: RATE,
    picksPerSecond: latencies.length / elapsed,
    p50: s.p50,
    p99: s.p99,
    max: sorted[sorted.length - 1] ?? Number.NaN,
    feedback,
    errors: Object.fromEntries(statuses),
    behindMs,
    ...(own.length > 0 ? { paired: { baselineP99: summarize(twins).p99, ownP50: summarize(own).p50, ownP99: summarize(own).p99, pairs: own.length } } : {}),
  };
}

/** How long `sent` takes from now to its answer, in ms. */
function timed(sent: Promise<number>): Promise<number> {
  const start = performance.now();
  return sent.then(() => performance.now() - start);
}

export async function runPickBench(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'egress-bench-pick-'));
  const redisServer = await startRedisChild({ dir: join(dir, 'redis'), appendOnly: false });
  const redis = new Redis(redisServer.url);
  const tokens = join(dir, 'tokens');
  await writeFile(tokens, `bench:${TOKEN}\n`, { mode: 0o600 });
  const api = spawn(
    process.execPath,
    [
      join(ROOT, 'bin/egress.js'),
      'api',
      '--port',
      '0',
      '--prefix',
      PREFIX,
      '--api-token-file',
      tokens,
      '--feedback-rate',
      '10000',
      '--feedback-burst',
      '100000',
    ],
    { cwd: ROOT, env: { ...process.env, REDIS_URL: redisServer.url, EGRESS_LOG_LEVEL: 'info', EGRESS_FROM_SOURCE: '1' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let logs = '';
  api.stderr.on('data', (c: Buffer) => (logs += c.toString()));
  api.stdout.on('data', (c: Buffer) => (logs += c.toString()));
  const rows: Row[] = [];
  try {
    const deadline = Date.now() + 30_000;
    while (!/"url":"http:\/\/127\.0\.0\.1:(\d+)"/.test(logs)) {
      if (Date.now() > deadline || api.exitCode !== null) throw new Error(`the API did not start:\n${logs.slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const port = Number(/"url":"http:\/\/127\.0\.0\.1:(\d+)"/.exec(logs)?.[1]);
    // The floor on this machine at this moment: the same process answering a token check and one Redis PING.
    await load(port, '', 'GET /readyz', WARM_UP_SECONDS, true);
    rows.push(await load(port, '', 'GET /readyz (baseline)', SECONDS, true));
    for (const size of SIZES) {
      const pool = `bench-${size}`;
      await populate(redis, pool, size);
      await load(port, pool, size, WARM_UP_SECONDS); // JIT, connections, the member cache: not measured
      rows.push(await load(port, pool, size, SECONDS));
    }
  } finally {
    api.kill('SIGTERM');
    if (api.exitCode === null) await once(api, 'exit');
    await redis.quit();
    await redisServer.stop();
    await rm(dir, { recursive: true, force: true });
  }
  console.log(
    `picks through a real \`egress api\` process and redis-server, open-loop ${RATE}/s for ${SECONDS} s per pool size (2,000 sessions, 50 domains, 1 % blocked feedback)`,
  );
  console.log(
    `| pool members | offered, /s | picks/s | p50, ms | p99, ms | max, ms | /readyz twin p99, ms | pick's own cost p50 / p99, ms (1 in ${PAIR_EVERY} paired) | feedback sent | picks not 200 |`,
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const paired = r.paired ? [fmt(r.paired.baselineP99), `${fmt(r.paired.ownP50)} / ${fmt(r.paired.ownP99)} (${r.paired.pairs} pairs)`] : ['–', '–'];
    console.log(
      `| ${r.members} | ${r.offeredPerSecond} | ${fmt(r.picksPerSecond, 0)} | ${fmt(r.p50)} | ${fmt(r.p99)} | ${fmt(r.max, 1)} | ${paired.join(' | ')} | ${r.feedback} | ${JSON.stringify(r.errors)} |`,
    );
  }
  console.log(JSON.stringify({ bench: 'pick', rate: RATE, seconds: SECONDS, rows }));
}
