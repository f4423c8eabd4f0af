import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parse } from 'yaml';
import { describe, expect, test } from 'vitest';
import { ROOT, runCli } from '../support/cli.ts';

interface Service {
  image?: string;
  build?: string;
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  secrets?: string[];
}

// No Docker engine runs here, so the file is checked the way the containers would run it:
// every egress service's command goes through the real `egress` parser and configuration
// validation (`--check-config`), with the mounted files mapped back to the repository.
describe('docker-compose.yml', () => {
  test('every egress service runs a real subcommand with valid flags', async () => {
    const compose = parse(await readFile(resolve(ROOT, 'docker-compose.yml'), 'utf8')) as { services: Record<string, Service>; secrets: Record<string, { file: string }> };
    const services = Object.entries(compose.services).filter(([, s]) => s.build !== undefined);
    expect(services.map(([name]) => name).sort()).toEqual(['api', 'publisher', 'scheduler', 'worker']);
    const tokens = join(await mkdtemp(join(tmpdir(), 'egress-compose-')), 'tokens');
    await writeFile(tokens, 'compose-test-token-0123456789\n');

    for (const [name, service] of services) {
      const mounts = new Map<string, string>();
      for (const v of service.volumes ?? []) {
        const [host, container] = v.split(':');
        if (host && container) mounts.set(container, resolve(ROOT, host));
      }
      for (const secret of service.secrets ?? []) mounts.set(`/run/secrets/${secret}`, tokens);
      const args = (service.command ?? []).map((a) => mounts.get(a) ?? a);
      expect(args[0], `${name}'s subcommand`).toBe(name);
      expect(service.environment?.REDIS_URL).toBe('redis://redis:6379');
      const run = await runCli([...args, '--check-config'], { REDIS_URL: service.environment?.REDIS_URL });
      expect(run.err, `${name}: ${args.join(' ')}`).toBe('');
      expect(run.code).toBe(0);
      expect(run.out).toBe(`configuration OK: ${name}, providers local (local)\n`);
    }
  });

  test('redis keeps jobs: append-only and noeviction', async () => {
    const compose = parse(await readFile(resolve(ROOT, 'docker-compose.yml'), 'utf8')) as { services: Record<string, Service> };
    const command = compose.services.redis?.command?.join(' ') ?? '';
    expect(command).toContain('--appendonly yes');
    expect(command).toContain('--maxmemory-policy noeviction');
  });

  test('--check-config rejects what the real command would reject', async () => {
    const run = await runCli(['worker', '--queues', 'everything', '--check-config']);
    expect(run).toMatchObject({ code: 2, err: 'error: --queues: unknown queue "everything" (known: checks, reconcile, gc)\n' });
  });
});
