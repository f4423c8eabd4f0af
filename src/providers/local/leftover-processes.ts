/**
 * The local proxies of a data directory that outlive the process which started them: the proxy
 * host (detached by design, so that a restarted `egress up` adopts its proxies), its relays, and
 * per-instance proxy processes of the earlier model. `egress down` stops them; the end of
 * `egress up` counts what keeps serving. Processes are found through /proc (Linux; elsewhere none
 * are), and only node running one of our proxy programs with an argument under the directory
 * counts: nothing else is ever signalled.
 */
import { readdir, readFile, readlink } from 'node:fs/promises';
import { basename, join, relative, isAbsolute } from 'node:path';
import { EgressError } from '../../errors.ts';
import { DELETING_FILE, INTENT_FILE, instancesDir } from './instance-files.ts';
import { isProxyHostProgram, isProxyProgram, pause, sendSignal } from './process-table.ts';

export type LocalProcessKind = 'proxy host' | 'relay' | 'proxy process';

export interface LocalProcess {
  pid: number;
  kind: LocalProcessKind;
}

function isUnder(path: string, root: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

async function argsOf(pid: number): Promise<string[] | undefined> {
  try {
    const raw = await readFile(`/proc/${pid}/cmdline`, 'utf8');
    return raw.length === 0 ? undefined : raw.split('\0').filter((a) => a.length > 0);
  } catch {
    return undefined;
  }
}

function kindOf(args: readonly string[]): LocalProcessKind | undefined {
  if (basename(args[0] ?? '') !== 'node' && !basename(args[0] ?? '').startsWith('node')) return undefined;
  const i = args.findIndex((arg, j) => j > 0 && (isProxyHostProgram(arg) || isProxyProgram(arg)));
  if (i < 0) return undefined;
  if (isProxyProgram(args[i] ?? '')) return 'proxy process';
  return args[i + 1] === '--relay' ? 'relay' : 'proxy host';
}

/** Our local proxy processes whose program, arguments or working directory lie under `root` (a real, absolute path). */
export async function localProcessesUnder(root: string): Promise<LocalProcess[]> {
  const entries = await readdir('/proc').catch(() => [] as string[]);
  const found: LocalProcess[] = [];
  for (const entry of entries) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    const args = await argsOf(pid);
    if (!args) continue;
    const kind = kindOf(args);
    if (!kind) continue;
    const cwd = await readlink(`/proc/${pid}/cwd`).catch(() => undefined);
    if (args.slice(1).some((arg) => isAbsolute(arg) && isUnder(arg, root)) || (cwd !== undefined && isUnder(cwd, root))) found.push({ pid, kind });
  }
  return found;
}

/** The proxies a local provider's data directory declares (an intent, not being deleted): what its host serves. */
export async function declaredProxies(providerDir: string): Promise<number> {
  const dir = instancesDir(providerDir);
  const names = await readdir(dir, { withFileTypes: true }).catch(() => []);
  let count = 0;
  for (const entry of names) {
    if (!entry.isDirectory()) continue;
    const has = (file: string): Promise<boolean> =>
      readFile(join(dir, entry.name, file)).then(
        () => true,
        () => false,
      );
    if ((await has(INTENT_FILE)) && !(await has(DELETING_FILE))) count++;
  }
  return count;
}

/** Every local provider directory under `root/local/` (the default place of a local provider's state). */
export async function localProviderDirs(root: string): Promise<string[]> {
  const dir = join(root, 'local');
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isDirectory()).map((e) => join(dir, e.name));
}

/**
 * The proxies that keep serving under `root` once its `egress up` has stopped: those declared in
 * each provider directory (the default ones and `extraDirs`) whose proxy host still runs.
 */
export async function servingProxies(root: string, extraDirs: readonly string[] = []): Promise<number> {
  const running = await localProcessesUnder(root);
  const dirs = [...new Set([...(await localProviderDirs(root)), ...extraDirs])];
  let count = 0;
  for (const dir of dirs) {
    const hosts = isUnder(dir, root) ? running : await localProcessesUnder(dir);
    if (hosts.some((p) => p.kind !== 'relay')) count += await declaredProxies(dir);
  }
  return count;
}

/** A signal to one of our processes; a process that is not ours to signal (EPERM) is named. */
function signal(p: { pid: number }, root: string, sig: NodeJS.Signals): void {
  try {
    sendSignal(p.pid, sig);
  } catch (err) {
    throw new EgressError('ERR_LOCAL_PROXY_STOP', `cannot stop local proxy process ${p.pid} of ${root}: ${(err as Error).message} (another user's?)`, {
      cause: err,
    });
  }
}

async function goneWithin(pids: readonly number[], root: string, ms: number): Promise<number[]> {
  const deadline = performance.now() + ms;
  const signal = new AbortController().signal;
  for (;;) {
    const left = (await localProcessesUnder(root)).filter((p) => pids.includes(p.pid)).map((p) => p.pid);
    if (left.length === 0 || performance.now() > deadline) return left;
    await pause(50, signal);
  }
}

/**
 * Stops every local proxy process under `root`: SIGTERM to the hosts and proxy processes (a host
 * closes its proxies and relays), then to anything left, SIGKILL after `graceMs`. Returns what
 * was running; throws naming the pids that outlived SIGKILL too.
 */
export async function stopLocalProcesses(root: string, graceMs = 10_000): Promise<LocalProcess[]> {
  const found = await localProcessesUnder(root);
  if (found.length === 0) return [];
  const first = found.filter((p) => p.kind !== 'relay');
  for (const p of first) signal(p, root, 'SIGTERM');
  await goneWithin(
    first.map((p) => p.pid),
    root,
    graceMs,
  );
  // Relays go with their host; one whose host was already gone is stopped here.
  const rest = await localProcessesUnder(root);
  for (const p of rest) signal(p, root, 'SIGTERM');
  const stubborn = await goneWithin(
    rest.map((p) => p.pid),
    root,
    graceMs,
  );
  for (const pid of stubborn) signal({ pid }, root, 'SIGKILL');
  const left = await goneWithin(stubborn, root, 5_000);
  if (left.length > 0)
    throw new EgressError(
      'ERR_LOCAL_PROXY_STOP',
      `local proxy process${left.length > 1 ? 'es' : ''} ${left.join(', ')} of ${root} did not stop, even on SIGKILL`,
    );
  return found;
}
