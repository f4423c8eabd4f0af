/**
 * Entry point of the policy sync program a booted gcp proxy VM runs beside the proxy
 * (`node policy-sync.cjs FILE`, unit egress-proxy-policy.service, bundled by programs.ts).
 *
 * The instance metadata item `egress-proxy-policy` is the one source of the VM's egress policy:
 * the lifecycle sets it at insert and changes it with setMetadata. This program copies it into FILE
 * (atomically: a temporary file, then a rename) and then waits for the next change with the
 * metadata server's hanging GET (`wait_for_change`, `last_etag`); the proxy re-reads FILE when it
 * changes (src/egress/live-policy.ts). Without the item nothing is written and the proxy keeps
 * failing closed (or keeps the last document it had). Errors are logged and retried with backoff.
 *
 * Runs on Debian 12's Node 18: node:http only, no fetch.
 */
import { request } from 'node:http';
import { readFile, rename, writeFile } from 'node:fs/promises';

const METADATA_HOST = '169.254.169.254';
const ITEM_PATH = '/computeMetadata/v1/instance/attributes/egress-proxy-policy';
/** The server ends a hanging GET after this many seconds with the unchanged value. */
const WAIT_SECONDS = 300;

interface Answer {
  status: number;
  etag: string | undefined;
  body: string;
}

function log(level: 'info' | 'error', msg: string, fields: Record<string, unknown> = {}): void {
  process.stdout.write(`${JSON.stringify({ level, time: Date.now(), component: 'policy-sync', ...fields, msg })}\n`);
}

function get(path: string, timeoutMs: number): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: METADATA_HOST, port: 80, path, headers: { 'Metadata-Flavor': 'Google' }, signal: AbortSignal.timeout(timeoutMs) }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const etag = res.headers.etag;
        resolve({ status: res.statusCode ?? 0, etag: typeof etag === 'string' ? etag : undefined, body: Buffer.concat(chunks).toString('utf8') });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

async function store(file: string, text: string): Promise<boolean> {
  const current = await readFile(file, 'utf8').catch(() => undefined);
  if (current === text) return false;
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, text, { mode: 0o644 });
  await rename(tmp, file);
  return true;
}

async function main(): Promise<void> {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write('usage: policy-sync FILE\n');
    process.exit(2);
  }
  let etag: string | undefined;
  let failures = 0;
  for (;;) {
    const query = etag === undefined ? '' : `?wait_for_change=true&timeout_sec=${WAIT_SECONDS}&last_etag=${encodeURIComponent(etag)}`;
    try {
      const answer = await get(`${ITEM_PATH}${query}`, (WAIT_SECONDS + 30) * 1000);
      if (answer.status === 200) {
        failures = 0;
        etag = answer.etag;
        if (await store(file, answer.body)) log('info', 'egress policy written', { file, bytes: answer.body.length });
        // Without an etag the server cannot hang: poll gently instead of spinning.
        if (etag === undefined) await new Promise((r) => setTimeout(r, 5_000));
        continue;
      }
      if (answer.status === 404) {
        etag = undefined;
        log('error', 'instance has no egress-proxy-policy metadata item; the proxy keeps failing closed');
      } else {
        log('error', 'metadata server answered an unexpected status', { status: answer.status });
      }
    } catch (err) {
      log('error', 'metadata server request failed', { err: (err as Error).message });
    }
    failures++;
    await new Promise((r) => setTimeout(r, Math.min(30_000, 1_000 * 2 ** Math.min(failures, 5))));
  }
}

process.once('SIGTERM', () => process.exit(0));
main().catch((err: unknown) => {
  process.stderr.write(`policy sync failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
