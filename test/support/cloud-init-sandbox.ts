/**
 * Boots proxy user-data on this machine, run by bootInSandbox (cloud-init-boot.ts) as
 * `unshare --pid --fork --kill-child --mount --net --propagation private node --import tsx THIS JOB.json`
 * (root). Inside the new namespaces: loopback up, tmpfs over /opt and /etc/systemd/system (so every
 * file the user-data writes is thrown away with the mount namespace), an origin HTTP server, and for
 * gcp user-data a fake metadata server on 169.254.169.254:80 serving `egress-proxy-policy` with ETag
 * and `wait_for_change`. Then the cloud-config is interpreted (cloud-config-interpreter.ts) and
 * requests go through the resulting proxy. It prints one JSON report line and exits; the PID
 * namespace takes every process it started with it.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { interpretCloudConfig, type RunningUnit } from './cloud-config-interpreter.ts';

export interface SandboxJob {
  userDataFile: string;
  /** Where the proxy listens in the sandbox (the user-data's port). */
  proxyPort: number;
  credentials: { username: string; password: string };
  /** gcp user-data: the policy documents the fake metadata server serves, one after the other. */
  metadataPolicies?: string[];
}

export interface SandboxReport {
  packages: string[];
  files: { path: string; mode: number; uid: number; bytes: number }[];
  units: { name: string; uid: number; exitCode: number | null }[];
  /** Status of each probe: with credentials, without, with a wrong password. One row per policy served (gcp), else one. */
  rounds: { withCredentials: number; withoutCredentials: number; wrongPassword: number; body: string }[];
  /** The policy file's mode and owner as the proxy saw it. */
  policyFile?: { mode: number; uid: number };
  log: string[];
}

const job = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as SandboxJob;
const log: string[] = [];
const waiters: { test: (unit: string, line: string) => boolean; resolve: () => void }[] = [];

function onLine(unit: string, line: string): void {
  log.push(`${unit}: ${line}`);
  for (const w of [...waiters]) {
    if (w.test(unit, line)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve();
    }
  }
}

/** Resolves on the `nth` line (counting from the start of the run) of `unit` whose message is `msg`. */
function lineSeen(unit: string, msg: string, nth = 1): Promise<void> {
  const matches = (u: string, l: string): boolean => {
    if (u !== unit) return false;
    try {
      return (JSON.parse(l) as { msg?: string }).msg === msg;
    } catch {
      return false;
    }
  };
  const count = (): number => log.filter((entry) => matches(entry.slice(0, entry.indexOf(': ')), entry.slice(entry.indexOf(': ') + 2))).length;
  if (count() >= nth) return Promise.resolve();
  return new Promise((resolve) => waiters.push({ test: (u, l) => matches(u, l) && count() >= nth, resolve }));
}

function listen(server: Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve((server.address() as AddressInfo).port));
  });
}

/** The fake metadata server: one attribute, its ETag the index of the document, hanging GETs until it changes. */
function metadataServer(policies: string[]): { server: Server; advance(): void } {
  let index = 0;
  const hanging: (() => void)[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://metadata');
    if (req.headers['metadata-flavor'] !== 'Google' || url.pathname !== '/computeMetadata/v1/instance/attributes/egress-proxy-policy') {
      res.writeHead(404).end();
      return;
    }
    const answer = (): void => {
      res.writeHead(200, { 'Content-Type': 'application/text', ETag: `etag-${index}`, 'Metadata-Flavor': 'Google' }).end(policies[index]);
    };
    if (url.searchParams.get('wait_for_change') === 'true' && url.searchParams.get('last_etag') === `etag-${index}`) hanging.push(answer);
    else answer();
  });
  return {
    server,
    advance() {
      index++;
      for (const h of hanging.splice(0)) h();
    },
  };
}

function probe(proxyPort: number, target: string, auth: string | undefined): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: proxyPort,
        method: 'GET',
        path: target,
        headers: { Host: new URL(target).host, ...(auth ? { 'Proxy-Authorization': `Basic ${Buffer.from(auth).toString('base64')}` } : {}) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** Well inside the test's own timeout: a boot that stalls reports what its units logged instead of a bare timeout. */
const STALL_REPORT_MS = 45_000;

async function main(): Promise<void> {
  setTimeout(() => {
    process.stdout.write(`${JSON.stringify({ error: `stalled: no report after ${STALL_REPORT_MS} ms`, log })}\n`);
    process.exit(1);
  }, STALL_REPORT_MS).unref();
  execFileSync('ip', ['link', 'set', 'lo', 'up']);
  for (const dir of ['/opt', '/etc/systemd/system']) execFileSync('mount', ['-t', 'tmpfs', '-o', 'mode=0755', 'tmpfs', dir]);

  const origin = createServer((_req, res) => res.writeHead(200, { 'Content-Type': 'text/plain' }).end('origin says hello'));
  const originPort = await listen(origin, '127.0.0.1', 0);
  const metadata = job.metadataPolicies ? metadataServer(job.metadataPolicies) : undefined;
  if (metadata) {
    execFileSync('ip', ['addr', 'add', '169.254.169.254/32', 'dev', 'lo']);
    await listen(metadata.server, '169.254.169.254', 80);
  }

  const result = interpretCloudConfig(readFileSync(job.userDataFile, 'utf8'), onLine);
  const report: SandboxReport = { packages: result.packages, files: result.files, units: [], rounds: [], log };
  const target = `http://127.0.0.1:${originPort}/hello`;
  const { username, password } = job.credentials;
  const rounds = job.metadataPolicies?.length ?? 1;
  try {
    await lineSeen('egress-proxy.service', 'proxy listening');
    for (let round = 1; round <= rounds; round++) {
      // The document in force: loaded once per round (from the user-data's file, or each one the sync wrote).
      await lineSeen('egress-proxy.service', 'egress policy loaded', round);
      const ok = await probe(job.proxyPort, target, `${username}:${password}`);
      const none = await probe(job.proxyPort, target, undefined);
      const wrong = await probe(job.proxyPort, target, `${username}:not-${password}`);
      report.rounds.push({ withCredentials: ok.status, withoutCredentials: none.status, wrongPassword: wrong.status, body: ok.body });
      if (round < rounds) metadata?.advance();
    }
    const policy = statSync('/opt/egress-proxy/policy.json');
    report.policyFile = { mode: policy.mode & 0o777, uid: policy.uid };
  } finally {
    report.units = await stopAll(result.units);
    origin.close();
    metadata?.server.close();
    metadata?.server.closeAllConnections();
  }
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

async function stopAll(units: RunningUnit[]): Promise<SandboxReport['units']> {
  return Promise.all(
    units.map(async (u) => {
      if (u.child.exitCode === null && u.child.signalCode === null) u.child.kill('SIGTERM');
      return { name: u.name, uid: u.uid, exitCode: await u.exited };
    }),
  );
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stdout.write(`${JSON.stringify({ error: (err as Error).stack ?? String(err), log })}\n`);
    process.exit(1);
  },
);
