/**
 * The earlier model of local proxies (src/providers/local/legacy-proxies.ts): a proxy process of
 * its own per instance, which an upgraded machine may still run. Each helper is checked against a
 * real such process (proxy-process.ts, as that model ran it) and against the host's records, which
 * it must leave alone.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/logging.ts';
import type { InstanceRecord } from '../../src/providers/local/instance-files.ts';
import {
  isLegacyRecord,
  legacyAlive,
  legacyInstanceId,
  legacyLogFile,
  legacyProcesses,
  legacyProcessFor,
  legacyWatched,
  reloadLegacyCredentials,
  stopLegacy,
} from '../../src/providers/local/legacy-proxies.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { waitFor } from '../support/wait.ts';

const SCRIPT = resolve('src/providers/local/proxy-process.ts');
const OWNER = { fleet: 'fleet-a', proxy: 'proxy-old' };
const signal = (): AbortSignal => AbortSignal.timeout(30_000);

let child: ChildProcess | undefined;
afterEach(() => {
  if (child?.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  child = undefined;
});

/** An instance directory as the earlier model left it, served by its own running process. */
async function legacyInstance(): Promise<{ dir: string; record: InstanceRecord; lines: string[] }> {
  const dir = join(await tempDir('egress-legacy-'), 'instances', 'old');
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'intent.json'), JSON.stringify({ name: 'old', owner: OWNER, createdAt: new Date().toISOString() }));
  await writeFile(join(dir, 'credentials.json'), JSON.stringify({ username: 'crawler', password: 's3cret-pass' }), { mode: 0o600 });
  const proc = spawn(process.execPath, ['--import', 'tsx', SCRIPT, dir], { stdio: ['ignore', 'pipe', 'ignore'] });
  child = proc;
  const lines: string[] = [];
  proc.stdout.setEncoding('utf8').on('data', (chunk: string) => lines.push(...chunk.split('\n').filter(Boolean)));
  const record = await waitFor('the legacy process listening', async () => {
    const r = JSON.parse(await readFile(join(dir, 'instance.json'), 'utf8').catch(() => '{}')) as Partial<InstanceRecord>;
    return r.pid === proc.pid ? (r as InstanceRecord) : undefined;
  });
  return { dir, record, lines };
}

describe('the earlier model of local proxies', () => {
  it('a record without host: true is the earlier model’s; its process is found, watched and identified by its pid', async () => {
    const { dir, record } = await legacyInstance();
    expect(isLegacyRecord(record)).toBe(true);
    expect(await legacyAlive(dir, record)).toBe(true);
    expect(await legacyProcessFor(dir)).toBe(record.pid);
    expect([...(await legacyProcesses(dir, record))]).toEqual([record.pid]);
    expect(legacyInstanceId(record)).toBe(String(record.pid));
    expect(legacyLogFile(dir)).toBe(join(dir, 'proxy.log'));
    const watched = legacyWatched(dir, 'old', OWNER, record);
    expect(watched).toMatchObject({ name: 'old', owner: OWNER, id: String(record.pid), pid: record.pid, exitMessage: `proxy process ${record.pid} exited` });
    expect(await watched.isOurs()).toBe(true);
  });

  it('a record of the host, or none, is never the earlier model’s, whatever runs', async () => {
    const { dir, record } = await legacyInstance();
    const hosted: InstanceRecord = { ...record, host: true };
    expect(isLegacyRecord(hosted)).toBe(false);
    expect(await legacyAlive(dir, hosted)).toBe(false);
    expect(await legacyAlive(dir, undefined)).toBe(false);
    // A host record means the host served it: no /proc scan for processes of the earlier model.
    expect([...(await legacyProcesses(dir, hosted))]).toEqual([]);
    // A record naming a process that is not such a proxy (this test's own) is not alive.
    expect(await legacyAlive(dir, { ...record, pid: process.pid })).toBe(false);
  });

  it('new credentials reach the process by SIGHUP', async () => {
    const { record, lines } = await legacyInstance();
    reloadLegacyCredentials(record, silentLogger());
    await waitFor('the reload logged', () => lines.some((l) => l.includes('credentials reloaded')));
  });

  it('stopping ends the process: it is then neither alive nor found', async () => {
    const { dir, record } = await legacyInstance();
    const exited = new Promise((resolveExit) => child!.once('exit', resolveExit));
    await stopLegacy('old', dir, await legacyProcesses(dir, record), signal(), 5000);
    await exited;
    expect(await legacyAlive(dir, record)).toBe(false);
    expect(await legacyProcessFor(dir)).toBeUndefined();
    expect(await legacyWatched(dir, 'old', OWNER, record).isOurs()).toBe(false);
  });
});
