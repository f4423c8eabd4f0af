import { spawn } from 'node:child_process';
import { open, readFile } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import type { Logger } from '../../logging.ts';
import { EgressError } from '../../errors.ts';
import { ensureOwnedDir, verifyTrustedDir } from '../../fs/private-path.ts';
import { observerFailure } from '../../observer-errors.ts';
import { asHostRecord, HOST_FILE, HOST_LOG, HOST_SOCKET, hostDir, readJson, type HostRecord } from './instance-files.ts';
import { findHostProcesses, isHostProcess, pause } from './process-table.ts';

/** The proxy host could not be started or reached; retrying may help. */
export class ProxyHostError extends EgressError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('ERR_LOCAL_PROXY_HOST', message, { ...options, retryable: true });
  }
}

/** The longest path a Unix socket may have on Linux (sun_path holds 108 bytes with the terminating zero). */
const MAX_SOCKET_PATH = 107;
/** Control answers are small JSON documents. */
const MAX_ANSWER_BYTES = 64 * 1024;

export interface HostAnswer {
  status: number;
  body: unknown;
}

/** One HTTP request over the host's control socket. */
function ask(socketPath: string, method: string, path: string, signal: AbortSignal, body?: string): Promise<HostAnswer> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.from(body, 'utf8');
    const headers = payload ? { 'content-length': payload.length, 'content-type': 'application/json' } : { 'content-length': 0 };
    const req = request({ socketPath, method, path, signal, headers }, (res) => {
      let size = 0;
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_ANSWER_BYTES) req.destroy(new Error(`proxy host answer exceeds ${MAX_ANSWER_BYTES} bytes`));
        else chunks.push(chunk);
      });
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        try {
          resolve({ status: res.statusCode ?? 0, body: text ? (JSON.parse(text) as unknown) : undefined });
        } catch (err) {
          reject(new Error(`proxy host answered malformed JSON: ${(err as Error).message}`));
        }
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/** Errors that mean "no host answers there (any more)": start or find another. */
function hostGone(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ECONNREFUSED' || code === 'ENOENT' || code === 'ECONNRESET' || code === 'EPIPE';
}

export interface ProxyHostSupervisorOptions {
  dataDir: string;
  logger: Logger;
  /** The host program's path, asked right before each spawn (the lifecycle writes our own build there and verifies it). */
  program: () => Promise<string>;
  policyFile: string;
  /** `--relays` of a host this worker starts (absent: the host's default). */
  relays?: number;
  /** `--traffic-domains` of a host this worker starts (absent: the host's default). */
  trafficDomains?: number;
  /** A host this worker spawned exited (its `exit` event). */
  onChildExit?: (pid: number) => void;
}

/**
 * The worker's side of the proxy host: finds the running host of the data directory (verifying
 * through /proc that the pid `host.json` names runs our host program for this directory, and that
 * its socket answers with that pid), or starts one detached, and sends it requests. Nothing is ever
 * signalled here: a host stops on its own when its last proxy is deleted.
 */
export class ProxyHostSupervisor {
  readonly #o: ProxyHostSupervisorOptions;
  readonly #socket: string;
  readonly #hostFile: string;
  #starting: Promise<HostRecord> | undefined;

  constructor(options: ProxyHostSupervisorOptions) {
    this.#o = options;
    this.#socket = join(hostDir(options.dataDir), HOST_SOCKET);
    this.#hostFile = join(hostDir(options.dataDir), HOST_FILE);
  }

  get socketPath(): string {
    return this.#socket;
  }

  /** The running host of the data directory, verified, or undefined (nothing is started). */
  async running(signal: AbortSignal): Promise<HostRecord | undefined> {
    // Out of descriptors here is no sign of the host's absence: it throws (ObserverResourceError).
    const record = asHostRecord(
      await readJson(this.#hostFile).catch((err: unknown) => {
        const own = observerFailure('reading host.json', err);
        if (own) throw own;
        return undefined;
      }),
    );
    if (!record || !(await isHostProcess(record.pid, this.#o.dataDir))) return undefined;
    try {
      const answer = await ask(this.#socket, 'GET', '/status', signal);
      const pid = (answer.body as { pid?: unknown } | undefined)?.pid;
      return answer.status === 200 && pid === record.pid ? record : undefined;
    } catch (err) {
      if (hostGone(err)) return undefined;
      throw observerFailure('the proxy host socket', err) ?? err;
    }
  }

  /** The names of the proxies the running host serves (none when no host runs). */
  async served(signal: AbortSignal): Promise<string[]> {
    if (!(await this.running(signal))) return [];
    const answer = await ask(this.#socket, 'GET', '/status?names=1', signal).catch(() => undefined);
    const names = (answer?.body as { names?: unknown } | undefined)?.names;
    return Array.isArray(names) ? names.filter((n): n is string => typeof n === 'string') : [];
  }

  /** The running host, started first when there is none (concurrent callers share one start). */
  ensure(signal: AbortSignal): Promise<HostRecord> {
    this.#starting ??= this.#ensure(signal).finally(() => (this.#starting = undefined));
    return this.#starting;
  }

  async #ensure(signal: AbortSignal): Promise<HostRecord> {
    if (Buffer.byteLength(this.#socket) > MAX_SOCKET_PATH) {
      throw new ProxyHostError(
        `the proxy host's control socket ${this.#socket} is longer than ${MAX_SOCKET_PATH} bytes (a Unix socket limit): use a shorter dataDir`,
      );
    }
    const found = await this.running(signal);
    if (found) return found;
    // One starting (spawned by another worker, or by us before a crash): wait for it rather than race it.
    if ((await findHostProcesses(this.#o.dataDir)).length === 0) await this.#spawn();
    for (let every = 5; ; every = Math.min(every * 2, 50)) {
      await pause(every, signal);
      const up = await this.running(signal);
      if (up) return up;
      if ((await findHostProcesses(this.#o.dataDir)).length === 0) {
        // Ours exited (a duplicate that deferred to a host that is gone again, or a failure): try once more.
        const tail = await this.logTail();
        if (tail.includes('proxy host failed')) throw new ProxyHostError(`the proxy host exited: ${tail}`);
        await this.#spawn();
      }
    }
  }

  async #spawn(): Promise<void> {
    const dir = hostDir(this.#o.dataDir);
    // Checked again right before each exec, not only at start: directories may change meanwhile.
    await verifyTrustedDir(this.#o.dataDir);
    await ensureOwnedDir(dir);
    const program = await this.#o.program();
    const log = await open(join(dir, HOST_LOG), 'a', 0o600);
    try {
      const child = spawn(
        process.execPath,
        [
          program,
          this.#o.dataDir,
          '--policy',
          this.#o.policyFile,
          ...(this.#o.relays !== undefined ? ['--relays', String(this.#o.relays)] : []),
          ...(this.#o.trafficDomains !== undefined ? ['--traffic-domains', String(this.#o.trafficDomains)] : []),
        ],
        {
          cwd: this.#o.dataDir,
          detached: true,
          stdio: ['ignore', log.fd, log.fd],
        },
      );
      await new Promise<void>((resolveSpawn, reject) => {
        child.once('spawn', resolveSpawn);
        child.once('error', reject);
      });
      child.once('exit', () => {
        if (child.pid !== undefined) this.#o.onChildExit?.(child.pid);
      });
      child.unref();
      this.#o.logger.info({ pid: child.pid, dataDir: this.#o.dataDir }, 'local proxy host spawned');
    } finally {
      await log.close();
    }
  }

  /**
   * Sends a request to the running host, starting one when `start` (a create) and none runs. A
   * host that is stopping (its last proxy was just deleted) or gone is waited out and replaced.
   * Without `start`, undefined when no host runs. `body` (JSON) goes over the 0600 socket only: it may
   * carry an upstream proxy's credentials.
   */
  async call(method: 'PUT' | 'DELETE', path: string, start: boolean, signal: AbortSignal, body?: string): Promise<HostAnswer | undefined> {
    for (let attempt = 1; ; attempt++) {
      const host = start ? await this.ensure(signal) : await this.running(signal);
      if (!host) return undefined;
      try {
        const answer = await ask(this.#socket, method, path, signal, body);
        if (answer.status !== 503) return answer;
      } catch (err) {
        const own = observerFailure('the proxy host socket', err);
        if (own) throw own;
        if (!hostGone(err) || attempt >= 5) throw new ProxyHostError(`proxy host ${host.pid}: ${(err as Error).message}`, { cause: err });
      }
      if (attempt >= 5) throw new ProxyHostError(`proxy host ${host.pid} kept answering that it is stopping`);
      // It is stopping: wait until it is gone, then a new one is started (or found).
      for (let every = 5; await isHostProcess(host.pid, this.#o.dataDir); every = Math.min(every * 2, 50)) await pause(every, signal);
    }
  }

  async logTail(): Promise<string> {
    const text = await readFile(join(hostDir(this.#o.dataDir), HOST_LOG), 'utf8').catch(() => '');
    return text.trimEnd().split('\n').slice(-5).join('\n');
  }
}
