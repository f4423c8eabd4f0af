import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { createServer, request, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { freePort } from '../../src/redis/redis-server.ts';
import { hostPath, playDockerfile, type StageResult } from '../support/dockerfile.ts';
import { startFakeCompute } from '../fakes/compute/index.ts';
import { waitFor } from '../support/wait.ts';

const run = promisify(execFile);
const USER = 'image-user';
const PASSWORD = 'image-password-0123456789';
/** The egress policy of the proxy under test: the loopback origin server is allowed (everything private is denied by default). */
const POLICY = JSON.stringify({ version: 1, allow: ['127.0.0.1/32'], deny: [], guarded: [] });
/** The variables a container starts with; nothing of this test run's (in particular no EGRESS_FROM_SOURCE). */
// TMPDIR too: what the children write to their temp directory stays in the run's.
const BASE_ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: tmpdir(), TMPDIR: tmpdir() };

/** GET `url` through the forward proxy on 127.0.0.1:`port`, with or without Basic credentials. */
function getThrough(port: number, url: string, credentials: boolean): Promise<{ status: number; body: string }> {
  const auth = Buffer.from(`${USER}:${PASSWORD}`).toString('base64');
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { host: new URL(url).host, ...(credentials ? { 'proxy-authorization': `Basic ${auth}` } : {}) };
    const req = request({ host: '127.0.0.1', port, method: 'GET', path: url, headers }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

interface Started {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
}

function start(argv: string[], env: Record<string, string>, cwd: string): Started {
  const child = spawn(process.execPath, argv, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (output += c.toString()));
  return { child, output: () => output, exited: once(child, 'exit').then(([code]) => code as number | null) };
}

/** Starts the proxy program in container mode and proves it: traffic with the credentials, 407 without, exit 0 on SIGTERM. */
async function proveProxy(argv: string[], cwd: string, env: Record<string, string>, origin: string): Promise<void> {
  const port = await freePort();
  const proxy = start(argv, { ...BASE_ENV, ...env, PROXY_PORT: String(port), PROXY_USER: USER, PROXY_PASSWORD: PASSWORD, EGRESS_PROXY_POLICY: POLICY }, cwd);
  try {
    await waitFor(
      'the proxy to listen',
      () => proxy.output().includes('proxy listening') || (proxy.child.exitCode !== null ? Promise.reject(new Error(proxy.output())) : false),
      20_000,
    );
    expect(proxy.output()).toContain('"host":"0.0.0.0"');
    expect(await getThrough(port, `${origin}/hello`, true)).toEqual({ status: 200, body: 'hello through the image' });
    expect((await getThrough(port, `${origin}/hello`, false)).status).toBe(407);
  } finally {
    proxy.child.kill('SIGTERM');
  }
  expect(await proxy.exited, proxy.output()).toBe(0);
}

describe('the images, played without a Docker engine', () => {
  let dir: string;
  let origin: Server;
  let originUrl: string;
  const stageCache = new Map<string, StageResult>();

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'egress-images-'));
    origin = createServer((_req, res) => res.end('hello through the image'));
    origin.listen(0, '127.0.0.1');
    await once(origin, 'listening');
    const address = origin.address();
    originUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  });
  afterAll(async () => {
    origin.closeAllConnections();
    await new Promise((resolve) => origin.close(resolve));
    await rm(dir, { recursive: true, force: true });
  });

  test('Dockerfile: the compiled orchestrator with production dependencies only, non-root under tini; --version, and the proxy program npm run build bundled serves from it', async () => {
    const stages = await playDockerfile('Dockerfile', { dir: join(dir, 'egress'), cache: stageCache });
    const image = stages.at(-1) as StageResult;
    expect(image.user).toBe('node');
    expect(image.entrypoint.slice(0, 2)).toEqual(['tini', '--']);
    expect(image.healthcheck).toContain('/healthz');
    const app = join(image.root, 'app');
    // Compiled JavaScript and no TypeScript loader: tsx is a dev dependency. (typescript itself
    // is there: valibot, under @bull-board/api, has it as an optional peer, which npm installs.)
    expect(existsSync(join(app, 'dist/src/cli/main.js'))).toBe(true);
    expect(existsSync(join(app, 'src'))).toBe(false);
    expect(existsSync(join(app, 'node_modules/tsx'))).toBe(false);

    // The entrypoint after tini, as the container runs it.
    const [node, ...argv] = image.entrypoint.slice(2).map((a) => hostPath(image, a));
    expect(node).toBe('node');
    const version = await run(process.execPath, [...argv, '--version'], { cwd: app, env: { ...BASE_ENV, ...image.env } });
    expect(version.stdout).toMatch(/^\d+\.\d+\.\d+\n$/);
    const help = await run(process.execPath, [...argv, '--help'], { cwd: app, env: { ...BASE_ENV, ...image.env } });
    expect(help.stdout).toContain('Usage: egress');

    // The programs the orchestrator hands out to run were bundled by `npm run build`: the image has no bundler
    // (esbuild is a dev dependency), and the compiled tree writes the build's own proxy program from dist/bin/.
    expect(existsSync(join(app, 'node_modules/esbuild'))).toBe(false);
    expect((await readdir(join(app, 'dist/bin'))).sort()).toEqual(['policy-sync.cjs', 'proxy-host.cjs', 'proxy-process.cjs']);
    const dataDir = join(dir, 'egress-data');
    const built = await run(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const m = await import(${JSON.stringify(join(app, 'dist/src/providers/local/proxy-program.js'))}); console.log(await m.buildProxyProgram(${JSON.stringify(dataDir)}));`,
      ],
      { cwd: app, env: { ...BASE_ENV, ...image.env } },
    );
    const program = built.stdout.trim();
    expect(program).toBe(join(dataDir, 'bin/proxy-process.cjs'));
    await proveProxy([program, '--env'], app, image.env, originUrl);

    // The image keeps of @google-cloud/compute only what the gcp provider's v1 clients load: they still
    // insert, list and poll against a Compute API (the fake), from the image's install.
    const compute = await startFakeCompute({ project: 'image-project', tokens: ['image-token'] });
    try {
      const tokenFile = join(dir, 'compute-token');
      await writeFile(tokenFile, 'image-token\n', { mode: 0o600 });
      const call = `const { computeClientOptions, createComputeClients } = await import(${JSON.stringify(join(app, 'dist/src/providers/gcp/clients.js'))});
        const c = createComputeClients(computeClientOptions({ ...${JSON.stringify(compute.clientOptions())}, accessTokenFile: ${JSON.stringify(tokenFile)} }));
        const zone = 'us-central1-a', project = 'image-project';
        const [op] = await c.instances.insert({ project, zone, instanceResource: { name: 'from-the-image', machineType: 'zones/' + zone + '/machineTypes/e2-micro', networkInterfaces: [{}] } });
        const [done] = await c.zoneOperations.wait({ project, zone, operation: op.latestResponse.name });
        const [list] = await c.instances.list({ project, zone });
        const [rules] = await c.firewalls.list({ project });
        console.log(JSON.stringify({ op: done.status, instances: list.map((i) => i.name), rules: rules.length }));
        await c.close();`;
      const listed = await run(process.execPath, ['--input-type=module', '-e', call], { cwd: app, env: { ...BASE_ENV, ...image.env } });
      expect(JSON.parse(listed.stdout)).toEqual({ op: 'DONE', instances: ['from-the-image'], rules: 0 });
    } finally {
      await compute.close();
    }
  }, 240_000);

  test('Dockerfile.proxy: one self-contained file, non-root; in container mode it serves with PROXY_USER/PROXY_PASSWORD, 407 without, and refuses to start without a password', async () => {
    const stages = await playDockerfile('Dockerfile.proxy', { dir: join(dir, 'proxy'), cache: stageCache });
    const image = stages.at(-1) as StageResult;
    expect(image.user).toBe('nonroot');
    // The image holds the program alone: no node_modules, no sources.
    expect(await readdir(join(image.root, 'app'))).toEqual(['proxy-process.cjs']);
    const argv = image.cmd.map((a) => hostPath(image, a));
    await proveProxy(argv, image.root, image.env, originUrl);

    const noPassword = start(argv, { ...BASE_ENV, ...image.env, PROXY_USER: USER, PROXY_PORT: String(await freePort()) }, image.root);
    expect(await noPassword.exited).toBe(2);
    expect(noPassword.output()).toContain('PROXY_PASSWORD: required');
  }, 240_000);
});
