/**
 * `egress down`: stops everything a data directory has running — its `egress up` (or loopback
 * `egress api`), the local proxy host with its relays and proxies (they outlive `up` by design: a
 * restart adopts them), and a private redis-server no owner holds any more — so that nothing of
 * it is left. Idempotent: with nothing running it says so and exits 0.
 */
import { realpath } from 'node:fs/promises';
import { basename, resolve } from 'node:path';
import { EgressError } from '../../errors.ts';
import { silentLogger } from '../../logging.ts';
import { stopLocalProcesses, type LocalProcess } from '../../providers/local/leftover-processes.ts';
import { readLockOwner } from '../../redis/data-dir-lock.ts';
import { stopLeftoverRedis } from '../../redis/private-redis.ts';
import { commandLineOf, isAlive, stillRunning } from '../../redis/process-info.ts';
import { findRunningApi } from '../local-api-access.ts';
import type { CliIO } from '../output.ts';

/** How long `egress up` gets to shut down on SIGTERM (its own bound is twice its shutdown grace plus 15 s). */
const UP_STOP_MS = 60_000;

export interface DownOptions {
  /** How long the egress process gets after SIGTERM (tests shorten it). */
  upStopMs?: number;
}

/** A node process running egress, by its command line (a recorded pid may since be another program's). */
async function looksLikeEgress(pid: number): Promise<boolean> {
  const args = (await commandLineOf(pid))?.split(' ') ?? [];
  if (!basename(args[0] ?? '').startsWith('node')) return false;
  return args.some((a) => ['egress', 'egress.js', 'start.js', 'up-harness.ts'].includes(basename(a)) || a === 'up' || a === 'api');
}

/** The egress processes of the data directory: the owner of its lock (`up` with its private Redis) and the API its api.json names. */
async function egressProcesses(root: string): Promise<number[]> {
  const pids = new Set<number>();
  const owner = await readLockOwner(root);
  if (owner && owner.pid !== process.pid && stillRunning({ pid: owner.pid, startTicks: owner.startTicks }) && (await looksLikeEgress(owner.pid)))
    pids.add(owner.pid);
  const api = await findRunningApi(root);
  if (api && api.pid !== process.pid && (await looksLikeEgress(api.pid))) pids.add(api.pid);
  return [...pids];
}

async function goneWithin(pid: number, ms: number): Promise<boolean> {
  const deadline = performance.now() + ms;
  while (isAlive(pid)) {
    if (performance.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
  return true;
}

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

function describeLocal(found: readonly LocalProcess[]): string[] {
  const hosts = found.filter((p) => p.kind === 'proxy host');
  const relays = found.filter((p) => p.kind === 'relay').length;
  const legacy = found.filter((p) => p.kind === 'proxy process');
  const parts: string[] = [];
  if (hosts.length > 0)
    parts.push(`the local proxy host (pid ${hosts.map((p) => p.pid).join(', ')}${relays > 0 ? `, with ${plural(relays, 'relay')}` : ''}) and its proxies`);
  else if (relays > 0) parts.push(plural(relays, 'proxy relay'));
  if (legacy.length > 0) parts.push(`${plural(legacy.length, 'local proxy process', 'local proxy processes')} (pid ${legacy.map((p) => p.pid).join(', ')})`);
  return parts;
}

/** Stops what runs of `dataDir`; one line says what was stopped. Throws (exit 1) naming what would not stop. */
export async function down(dataDir: string, io: CliIO, options: DownOptions = {}): Promise<number> {
  let root: string;
  try {
    root = await realpath(resolve(dataDir));
  } catch {
    io.out(`nothing of ${resolve(dataDir)} is running (no such directory)\n`);
    return 0;
  }
  const stopped: string[] = [];
  // First the egress process: its shutdown closes its roles and its private Redis.
  const egress = await egressProcesses(root);
  for (const pid of egress) {
    try {
      process.kill(pid, 'SIGTERM');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH')
        throw new EgressError('ERR_DOWN', `cannot stop egress pid ${pid}: ${(err as Error).message}`, { cause: err });
    }
  }
  for (const pid of egress) {
    if (!(await goneWithin(pid, options.upStopMs ?? UP_STOP_MS)))
      throw new EgressError(
        'ERR_DOWN',
        `egress pid ${pid} of ${root} still runs ${Math.round((options.upStopMs ?? UP_STOP_MS) / 1000)}s after SIGTERM (see its log); \`kill -9 ${pid}\`, then egress down again`,
      );
  }
  if (egress.length > 0) stopped.push(`egress (pid ${egress.join(', ')})`);
  // Then what outlives it by design: the local proxies.
  const named = resolve(dataDir);
  stopped.push(...describeLocal([...(await stopLocalProcesses(root)), ...(named === root ? [] : await stopLocalProcesses(named))]));
  // Last, a private redis-server whose owner was killed without it.
  const redis = await stopLeftoverRedis(root, silentLogger()).catch((err: unknown) => {
    throw new EgressError('ERR_DOWN', `the private redis-server of ${root}: ${(err as Error).message}`, { cause: err });
  });
  if (redis.length > 0) stopped.push(`the private redis-server (pid ${redis.join(', ')})`);
  io.out(stopped.length > 0 ? `stopped ${stopped.join(', ')} of ${root}\n` : `nothing of ${root} is running\n`);
  return 0;
}
