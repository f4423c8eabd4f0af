import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { main, type CliEnv } from '../../src/cli/main.ts';
import { localTokenOf } from '../../src/cli/api-access.ts';
import { readTokenFile } from '../../src/cli/local-api-access.ts';
import type { ProviderHealth } from '../../src/health/provider-health.ts';
import { waitFor } from './wait.ts';

export const ROOT = resolve(import.meta.dirname, '../..');
export const EGRESS_BIN = resolve(ROOT, 'bin/egress.js');

export interface CliRun {
  code: number;
  out: string;
  err: string;
}

/** Runs `egress` in this process, capturing its output. */
export async function runCli(args: string[], env: CliEnv = {}): Promise<CliRun> {
  let out = '';
  let err = '';
  const code = await main(args, env, { out: (t) => void (out += t), err: (t) => void (err += t) });
  return { code, out, err };
}

export interface EgressProcess {
  child: ChildProcess;
  /** Everything written to stderr (logs) so far. */
  logs(): string;
  /** Resolves when a log line contains `text`. */
  waitForLog(text: string, timeoutMs?: number): Promise<void>;
  /** SIGTERM and wait for the exit code. */
  stop(): Promise<number | null>;
  exited: Promise<number | null>;
}

/**
 * Starts `node <script> args…` as a child process (the real `egress` binary by default);
 * `openFiles` runs it under `prlimit --nofile=N:N` (soft and hard limit on open files).
 */
export function spawnEgress(args: string[], env: Record<string, string> = {}, script = EGRESS_BIN, openFiles?: number): EgressProcess {
  const nodeArgs = script.endsWith('.ts') ? ['--import', 'tsx', script] : [script];
  const command = openFiles === undefined ? [process.execPath] : ['prlimit', `--nofile=${openFiles}:${openFiles}`, '--', process.execPath];
  const child = spawn(command[0] ?? process.execPath, [...command.slice(1), ...nodeArgs, ...args], {
    cwd: ROOT,
    env: { ...process.env, EGRESS_LOG_LEVEL: 'debug', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let logs = '';
  const listeners = new Set<() => void>();
  const onData = (chunk: Buffer): void => {
    logs += chunk.toString();
    for (const l of listeners) l();
  };
  child.stderr?.on('data', onData);
  child.stdout?.on('data', onData);
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  return {
    child,
    logs: () => logs,
    exited,
    waitForLog(text, timeoutMs = 30_000) {
      if (logs.includes(text)) return Promise.resolve();
      return new Promise((resolvePromise, reject) => {
        const timer = setTimeout(() => {
          listeners.delete(check);
          reject(new Error(`timed out waiting for "${text}" in the logs of ${args.join(' ')}:\n${logs.slice(-3000)}`));
        }, timeoutMs);
        const check = (): void => {
          if (logs.includes(text)) {
            clearTimeout(timer);
            listeners.delete(check);
            resolvePromise();
          }
        };
        listeners.add(check);
        void exited.then(() => {
          if (!logs.includes(text)) {
            clearTimeout(timer);
            listeners.delete(check);
            reject(new Error(`process exited before "${text}" appeared:\n${logs.slice(-3000)}`));
          }
        });
      });
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

/** The Authorization header of the API token `egress up` (or `egress api`) keeps in `dataDir`. */
export async function localApiHeaders(dataDir: string): Promise<{ authorization: string }> {
  return { authorization: `Bearer ${await localTokenOf(dataDir)}` };
}

/**
 * Waits for a spawned `egress up` to say it is up, then for its `local` provider to be published
 * Ready; returns the API's base URL, that ProviderHealth, and the headers that authenticate to the
 * API (its data directory's own token, as the banner names it; none under `--api-token-file`).
 */
export async function waitUpAndLocalReady(
  up: EgressProcess,
  timeoutMs = 60_000,
): Promise<{ apiUrl: string; ph: ProviderHealth; headers: Record<string, string> }> {
  await up.waitForLog('egress is up: API ', timeoutMs);
  const apiUrl = /egress is up: API (\S+),/.exec(up.logs())?.[1] ?? '';
  const tokenFile = /API token: (\S+) /.exec(up.logs())?.[1];
  const token = tokenFile === undefined ? undefined : await readTokenFile(tokenFile);
  const headers: Record<string, string> = token === undefined ? {} : { authorization: `Bearer ${token}` };
  const ph = await waitFor('local to be Ready', async () => {
    const res = await fetch(`${apiUrl}/v1/providerhealths/local`, { headers });
    const body = res.status === 200 ? ((await res.json()) as ProviderHealth) : undefined;
    return body?.status.ready ? body : undefined;
  });
  return { apiUrl, ph, headers };
}
