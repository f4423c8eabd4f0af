import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, inject, test } from 'vitest';
import type { ProviderHealth } from '../../src/health/provider-health.ts';
import type { ProxyView } from '../../src/proxies/discovery.ts';
import { freePort } from '../../src/redis/redis-server.ts';
import { runCli, spawnEgress, type EgressProcess } from '../support/cli.ts';
import { egressServices, flagValue, mountsOf, readCompose, TOKENS_FILE, TOKENS_VOLUME, withFlag } from '../support/compose.ts';
import { uniquePrefix } from '../support/config.ts';
import { waitFor } from '../support/wait.ts';

const TOKEN = 'compose-test-token-0123456789abcdef';

// No Docker engine runs here, so the file is checked the way the containers would run it:
// every egress service's command goes through the real `egress` parser and configuration
// validation (`--check-config`), with the mounted files mapped back to the repository.
describe('docker-compose.yml', () => {
  const cleanup: string[] = [];
  afterAll(async () => {
    for (const dir of cleanup) await rm(dir, { recursive: true, force: true });
  });
  async function tempDir(): Promise<string> {
    const dir = await mkdtemp(join(tmpdir(), 'egress-compose-'));
    cleanup.push(dir);
    return dir;
  }

  test('every egress service runs a real subcommand with valid flags', async () => {
    const compose = await readCompose();
    const services = egressServices(compose);
    expect(services.map(([name]) => name).sort()).toEqual(['api', 'publisher', 'scheduler', 'worker']);
    const tokens = join(await tempDir(), 'tokens');
    await writeFile(tokens, `${TOKEN}\n`, { mode: 0o600 });

    for (const [name, service] of services) {
      const mounts = mountsOf(service, tokens);
      const args = (service.command ?? []).map((a) => mounts.get(a) ?? a);
      expect(args[0], `${name}'s subcommand`).toBe(name);
      expect(service.environment?.REDIS_URL).toBe('redis://redis:6379');
      const run = await runCli([...args, '--check-config'], { REDIS_URL: service.environment?.REDIS_URL });
      expect(run.err, `${name}: ${args.join(' ')}`).toBe('');
      expect(run.code).toBe(0);
      expect(run.out).toBe(`configuration OK: ${name}, providers local (local)\n`);
    }
  });

  test('every egress service has a healthcheck on its own /healthz, and every role serves /metrics off loopback with the tokens', async () => {
    const compose = await readCompose();
    for (const [name, service] of egressServices(compose)) {
      const args = service.command ?? [];
      const port = name === 'api' ? flagValue(args, '--port') : flagValue(args, '--metrics-port');
      expect(port, `${name}'s listener port`).toMatch(/^\d+$/);
      expect(flagValue(args, '--host'), name).toBe('0.0.0.0');
      expect(flagValue(args, '--api-token-file'), name).toBe(`/run/egress/${TOKENS_FILE}`);
      expect(service.volumes, name).toContain(`${TOKENS_VOLUME}:/run/egress:ro`);
      expect(service.depends_on?.tokens, name).toEqual({ condition: 'service_completed_successfully' });
      expect(service.healthcheck?.test?.join(' '), name).toContain(`http://127.0.0.1:${port}/healthz`);
    }
    expect(compose.secrets['egress-api-tokens']?.file).toBe('./deploy/api-tokens');
    // The secret is a bind mount keeping the host file's owner and mode: only the one-shot `tokens`
    // service reads it, as root, and hands the roles (uid 1000) their own copy (test/real runs it).
    const tokens = compose.services.tokens;
    expect(tokens).toMatchObject({ user: 'root', secrets: ['egress-api-tokens'], volumes: [`${TOKENS_VOLUME}:/run/egress`] });
    expect(tokens?.entrypoint?.join(' ')).toContain(`install -o node -g node -m 0400 /run/secrets/egress-api-tokens /run/egress/${TOKENS_FILE}`);
    expect(flagValue(compose.services.worker?.command ?? [], '--echo-url')).toBe('http://api:8080/v1/echo');
  });

  test('redis keeps jobs: append-only and noeviction', async () => {
    const compose = await readCompose();
    const command = compose.services.redis?.command?.join(' ') ?? '';
    expect(command).toContain('--appendonly yes');
    expect(command).toContain('--maxmemory-policy noeviction');
  });

  test('--check-config rejects what the real command would reject', async () => {
    const run = await runCli(['worker', '--queues', 'everything', '--check-config']);
    expect(run).toMatchObject({ code: 2, err: 'error: --queues: unknown queue "everything" (known: checks, reconcile, gc)\n' });
  });

  test('without deploy/api-tokens the API refuses to start, naming the file', async () => {
    const compose = await readCompose();
    const api = compose.services.api;
    const missing = join(await tempDir(), 'api-tokens');
    const mounts = mountsOf(api ?? {}, missing);
    const args = (api?.command ?? []).map((a) => mounts.get(a) ?? a);
    const port = await freePort();
    const run = await runCli(withFlag(withFlag(args, '--host', '127.0.0.1'), '--port', String(port)), { REDIS_URL: inject('redisUrl') });
    expect(run.code).toBe(2);
    expect(run.err).toContain(missing);
  });

  // The services' exact commands, as separate processes against the test run's Redis. What is
  // substituted, and only that: REDIS_URL (redis://redis:6379 -> the test Redis, which has a
  // password) plus a --prefix of this test's own; the bind mounts and the secret (-> the repository's
  // deploy/egress.yaml and a temp tokens file); --host 0.0.0.0 -> 127.0.0.1 (nothing of a test
  // listens off loopback); --port 8080 and --metrics-port 9464 -> free ports (the containers each
  // have their own network namespace, these processes share one); --data-dir -> a temp dir; and the
  // service name `api` in --echo-url and in the healthchecks -> 127.0.0.1 and the API's port.
  test('the services as separate processes: healthy, a check published, a Proxy Ready through the compose echo URL', async () => {
    const compose = await readCompose();
    const tokens = join(await tempDir(), 'tokens');
    await writeFile(tokens, `${TOKEN}\n`, { mode: 0o600 });
    const prefix = uniquePrefix();
    const apiPort = await freePort();
    const api = `http://127.0.0.1:${apiPort}`;
    const auth = { authorization: `Bearer ${TOKEN}` };
    const procs: EgressProcess[] = [];
    const ports = new Map<string, number>();
    const healthchecks = new Map<string, string[]>();
    try {
      // Started in the order compose starts them (the worker waits for a healthy API).
      for (const name of ['api', 'scheduler', 'publisher', 'worker']) {
        const service = compose.services[name];
        if (!service) throw new Error(`docker-compose.yml has no ${name} service`);
        const mounts = mountsOf(service, tokens);
        let args = (service.command ?? []).map((a) => mounts.get(a) ?? a);
        args = withFlag(args, '--host', '127.0.0.1');
        const composePort = flagValue(args, name === 'api' ? '--port' : '--metrics-port') ?? '';
        const port = name === 'api' ? apiPort : await freePort();
        ports.set(name, port);
        args = withFlag(args, name === 'api' ? '--port' : '--metrics-port', String(port));
        if (flagValue(args, '--data-dir')) args = withFlag(args, '--data-dir', await tempDir());
        const echo = flagValue(args, '--echo-url');
        if (echo) args = withFlag(args, '--echo-url', echo.replace('http://api:8080', api));
        healthchecks.set(
          name,
          (service.healthcheck?.test ?? []).map((a) => a.replace(`127.0.0.1:${composePort}`, `127.0.0.1:${port}`)),
        );
        if (name === 'worker') await waitFor('the API to be healthy', () => runHealthcheck(healthchecks.get('api') ?? []));
        procs.push(spawnEgress([...args, '--prefix', prefix], { REDIS_URL: inject('redisUrl'), EGRESS_LOG_LEVEL: 'info' }));
      }

      // Every service's own healthcheck command passes.
      for (const [name, check] of healthchecks) {
        expect(check[0], name).toBe('CMD');
        await waitFor(`${name}'s healthcheck`, () => runHealthcheck(check), 30_000);
      }
      // Every role's /metrics: refused without a token, served with one.
      for (const [name, port] of ports) {
        expect((await fetch(`http://127.0.0.1:${port}/metrics`)).status, name).toBe(401);
        const metrics = await fetch(`http://127.0.0.1:${port}/metrics`, { headers: auth });
        expect(metrics.status, name).toBe(200);
        expect(await metrics.text(), name).toContain('# TYPE');
      }

      // The scheduler's first round: the local provider's check is run and published.
      const ph = await waitFor(
        'local ProviderHealth to be published Ready',
        async () => {
          const res = await fetch(`${api}/v1/providerhealths/local`, { headers: auth });
          const body = res.ok ? ((await res.json()) as ProviderHealth) : undefined;
          return body?.status.ready ? body : undefined;
        },
        30_000,
      );
      expect(ph.status.targets[0]).toMatchObject({ name: 'localhost', reason: 'Ok' });

      // A proxy, applied through the CLI with a token of the file: Ready only after the worker's
      // probe fetched the echo URL of the compose file through it.
      const dir = await tempDir();
      await writeFile(join(dir, 'proxy.yaml'), 'kind: Proxy\nmetadata: { name: compose-1 }\nspec: { provider: local }\n');
      await writeFile(join(dir, 'token'), `${TOKEN}\n`, { mode: 0o600 });
      const applied = await runCli(['apply', '-f', join(dir, 'proxy.yaml'), '--api-url', api, '--token-file', join(dir, 'token')]);
      expect(applied, applied.err).toMatchObject({ code: 0, out: 'proxy/compose-1 created\n' });
      const ready = await waitFor(
        'compose-1 to be Ready',
        async () => {
          const { items } = (await (await fetch(`${api}/v1/proxies?ready=true`, { headers: auth })).json()) as { items: ProxyView[] };
          return items.find((p) => p.name === 'compose-1');
        },
        30_000,
      );
      expect(ready.status).toMatchObject({ phase: 'Ready' });

      expect((await fetch(`${api}/v1/proxies/compose-1`, { method: 'DELETE', headers: auth })).status).toBeLessThan(300);
      await waitFor('compose-1 to be gone', async () => (await fetch(`${api}/v1/proxies/compose-1`, { headers: auth })).status === 404, 30_000);
    } finally {
      const codes = await Promise.all(procs.map((p) => p.stop()));
      expect(codes).toEqual(procs.map(() => 0));
    }
  });
});

/** Runs a compose healthcheck (`["CMD", exe, ...args]`, here always node) and tells whether it passed. */
async function runHealthcheck(test: readonly string[]): Promise<boolean> {
  const [kind, exe, ...args] = test;
  if (kind !== 'CMD' || exe !== 'node') throw new Error(`unexpected healthcheck ${test.join(' ')}`);
  const child = spawn(process.execPath, args, { stdio: 'ignore' });
  const [code] = (await once(child, 'exit')) as [number | null];
  return code === 0;
}
