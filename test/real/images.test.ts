/**
 * The project's container files for real, by podman, unmodified: `Dockerfile` and `Dockerfile.proxy`
 * built against local stand-in base images with nothing pulled (scripts/container-stand-ins.sh), the
 * README's docker-compose steps run with podman-compose, and the Pod and Secret the kubernetes provider
 * creates (read back from the fake apiserver) run with `podman kube play` on the proxy image.
 * Runs with `npm run test:real` (vitest.real.config.ts), as root; docs/testing.md#the-real-suite.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { chmod, cp, mkdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { createServer, request, type Server } from 'node:http';
import { dirname, join } from 'node:path';
import { parse, stringify } from 'yaml';
import { silentLogger } from '../../src/logging.ts';
import { proxyEgressPolicy } from '../../src/egress/policy-config.ts';
import { createKubernetesLifecycle } from '../../src/providers/kubernetes/lifecycle.ts';
import { startFakeKubeApiserver, type FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { waitFor } from '../support/wait.ts';
import { podmanDown, privatePodman, REPO_ROOT, run, type Podman } from './support/podman.ts';

const ORCHESTRATOR_IMAGE = 'localhost/egress:real-test';
const PROXY_IMAGE = 'localhost/egress-proxy:real-test';
const MB = 1_000_000;
/** The most each image may weigh (podman's .Size: every layer, uncompressed), on the stand-in bases (issue 22). */
const SIZE_LIMITS = { Dockerfile: 300 * MB, 'Dockerfile.proxy': 120 * MB } as const;
/** The user who follows the README's compose steps: not root, and not the image's `node` (1000). */
const USER_ID = 4321;

let podman: Podman;
let storeDir: string | undefined;
/** A copy of the checkout's files (tracked and untracked, not ignored): the build context and the compose project. */
let checkout: string;
let hostBefore: HostState;

interface HostState {
  ipForward: string;
  netavarkChains: string[];
  dirs: Record<string, boolean>;
}

function hostState(): HostState {
  const chains = (tool: string): string[] =>
    ['filter', 'nat']
      .flatMap((table) => {
        try {
          return execFileSync(tool, ['-t', table, '-S'], { encoding: 'utf8' }).split('\n');
        } catch {
          return [];
        }
      })
      .filter((l) => l.startsWith('-N NETAVARK'));
  const exists = (p: string): boolean => {
    try {
      execFileSync('test', ['-e', p]);
      return true;
    } catch {
      return false;
    }
  };
  return {
    ipForward: execFileSync('sysctl', ['-n', 'net.ipv4.ip_forward'], { encoding: 'utf8' }).trim(),
    netavarkChains: [...chains('iptables'), ...chains('ip6tables')].sort(),
    dirs: Object.fromEntries(['/run/containers', '/run/libpod', '/var/lib/containers'].map((d) => [d, exists(d)])),
  };
}

async function copyCheckout(to: string): Promise<void> {
  const files = execFileSync('git', ['ls-files', '-co', '--exclude-standard', '-z'], { cwd: REPO_ROOT, encoding: 'utf8' }).split('\0').filter(Boolean);
  for (const file of files) {
    if (file === 'node_modules') continue;
    await mkdir(dirname(join(to, file)), { recursive: true });
    await cp(join(REPO_ROOT, file), join(to, file), { recursive: true, verbatimSymlinks: true }).catch((err: NodeJS.ErrnoException) => {
      // A file deleted in the working tree but still tracked.
      if (err.code !== 'ENOENT') throw err;
    });
  }
}

async function imageSize(image: string): Promise<number> {
  const { stdout } = await podman.podman(['image', 'inspect', '--format', '{{.Size}}', image]);
  return Number(stdout.trim());
}

beforeAll(async () => {
  hostBefore = hostState();
  checkout = await tempDir('real-checkout-');
  await copyCheckout(checkout);
  // The checkout is a user's who is not root (the compose test runs the README as them). Owned so from
  // the start, the first test's builds are the layer cache compose's `--build` finds.
  await run('chown', ['-R', `${USER_ID}:${USER_ID}`, checkout]);
  storeDir = join(await tempDir('real-podman-'), 'store');
  podman = await privatePodman(storeDir);
  // The first run on a machine builds the stand-ins (debootstrap; minutes, more on a loaded machine).
}, 1_800_000);

afterAll(async () => {
  // Also when `up` failed half-way: the store's overlay mounts, podman's host directories, chains.
  if (storeDir) await podmanDown(storeDir);
}, 300_000);

describe.sequential('images, compose and the provider Pod under podman', () => {
  it('builds Dockerfile and Dockerfile.proxy with nothing pulled, within their sizes; build-only packages stay out of the orchestrator image', async () => {
    const figures: string[] = [];
    const sizes: Record<string, number> = {};
    for (const [file, image] of [
      ['Dockerfile', ORCHESTRATOR_IMAGE],
      ['Dockerfile.proxy', PROXY_IMAGE],
    ] as const) {
      const started = performance.now();
      await podman.podman(['build', '--pull=never', '-q', '-f', file, '-t', image, '.'], { cwd: checkout });
      const size = await imageSize(image);
      sizes[file] = size;
      figures.push(
        `${file}: ${(size / MB).toFixed(1)} MB (limit ${SIZE_LIMITS[file] / MB} MB), built in ${((performance.now() - started) / 1000).toFixed(0)} s`,
      );
    }
    process.stdout.write(`image sizes (podman image inspect .Size):\n  ${figures.join('\n  ')}\n`);
    for (const file of ['Dockerfile', 'Dockerfile.proxy'] as const) expect(sizes[file], file).toBeLessThanOrEqual(SIZE_LIMITS[file]);

    // The HEALTHCHECK survives the build (it needs the docker format, BUILDAH_FORMAT=docker).
    const health = await podman.podman(['image', 'inspect', '--format', '{{json .Config.Healthcheck}}', ORCHESTRATOR_IMAGE]);
    expect(health.stdout).toContain('/healthz');
    // The role runs, and nothing that only the build needs is installed.
    const version = await podman.podman(['run', '--rm', ORCHESTRATOR_IMAGE, '--version']);
    expect(version.stdout.trim()).toMatch(/\d+\.\d+\.\d+/);
    const leftovers = await podman.podman([
      'run',
      '--rm',
      '--entrypoint',
      'node',
      ORCHESTRATOR_IMAGE,
      '-e',
      "for (const m of ['typescript', 'tsx', 'vitest', 'eslint', 'esbuild']) { try { require.resolve(m, { paths: ['/app'] }); console.log(m); } catch {} }",
    ]);
    expect(leftovers.stdout.trim().split('\n').filter(Boolean)).toEqual([]);
  }, 1_200_000);

  it("runs docker-compose.yml with podman-compose as the README's compose section says, the token file made by a user who is not root", async () => {
    const readme = await readFile(join(checkout, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Running under docker-compose'));
    const blocks = [...section.slice(0, section.indexOf('\n## ', 3)).matchAll(/```sh\n([\s\S]*?)```/g)].map((m) =>
      (m[1] ?? '').split('\n').filter((l) => l.trim()),
    );
    const commands = blocks.flat();
    expect(commands.length).toBeGreaterThan(4);

    // The only substitutions: podman-compose for `docker compose`; no editor (deploy/egress.yaml as shipped has
    // the local provider); `npm ci` is this checkout's node_modules (the same lockfile) linked in.
    // Who runs what: the checkout is the user's (uid USER_ID), who runs every step but compose itself, so the
    // token file is theirs, mode 0600; compose runs as root, as Docker's daemon does for a user of the
    // docker group (a compose secret is a bind mount of the file as it is on the host).
    const home = await tempDir('real-user-home-');
    await mkdir(join(home, 'tmp'));
    await run('chown', ['-R', `${USER_ID}:${USER_ID}`, home]);
    // The run's temp directory is root's, 0700: the user may pass through it to their checkout and home.
    const runDir = dirname(checkout);
    const runDirMode = (await stat(runDir)).mode & 0o7777;
    await chmod(runDir, runDirMode | 0o111);
    let exports = '';
    // npx never installs a package here (no registry look-up of a name like `egress`): the CLI is the checkout's.
    const cliEnv = { EGRESS_FROM_SOURCE: undefined, npm_config_yes: 'false', npm_config_offline: 'true' };
    const asRoot = (line: string) => podman.exec('sh', ['-c', `${exports}${line}`], { cwd: checkout, env: cliEnv });
    // The user's own npm settings: none of the npm_config_* that this run's npm passed down (its cache is root's).
    const npmSettings = Object.fromEntries(Object.keys(process.env).flatMap((k) => (/^npm_/i.test(k) ? [[k, undefined]] : [])));
    const userEnv = { ...npmSettings, ...cliEnv, HOME: home, TMPDIR: join(home, 'tmp'), USER: 'crawler', LOGNAME: 'crawler' };
    const asUser = (line: string) =>
      podman.exec('setpriv', [`--reuid=${USER_ID}`, `--regid=${USER_ID}`, '--clear-groups', 'sh', '-c', `${exports}${line}`], { cwd: checkout, env: userEnv });
    const sh = (line: string) => (line.startsWith('podman-compose ') ? asRoot(line) : asUser(line));
    const tokenFile = join(checkout, 'deploy/api-tokens');
    for (const line of commands) {
      const command = line.replace(/\s+#.*$/, '').trim();
      if (command.startsWith('$EDITOR')) continue;
      if (command === 'npm ci') {
        await symlink(join(REPO_ROOT, 'node_modules'), join(checkout, 'node_modules'));
        continue;
      }
      if (command.startsWith('export ')) {
        exports += `${command}; `;
        continue;
      }
      const mapped = command.replace(/^docker compose /, 'podman-compose ');
      if (mapped.startsWith('podman-compose up')) {
        // The secret's source as compose finds it: the user's, readable by nobody else.
        const file = await stat(tokenFile);
        expect([file.uid, file.mode & 0o777]).toEqual([USER_ID, 0o600]);
        await sh(mapped);
        await waitFor('the API on 127.0.0.1:8080', async () => (await fetch('http://127.0.0.1:8080/healthz')).ok, 180_000, 250);
      } else if (mapped.includes('get ph')) {
        const out = await waitFor(
          "the scheduler's first ProviderHealth",
          async () => {
            const { stdout } = await sh(mapped);
            return /^local\s+true\s+1\/1/m.test(stdout) ? stdout : undefined;
          },
          120_000,
          500,
        );
        expect(out).toMatch(/^NAME\s+READY\s+TARGETS/);
      } else if (mapped.includes('get proxies')) {
        await waitFor('web-1 Ready', async () => /^web-1\s+local\s+Ready\s/m.test((await sh(mapped)).stdout), 120_000, 500);
      } else {
        await sh(mapped);
      }
    }

    // Each service's own healthcheck command from docker-compose.yml, run in its container (podman-compose
    // 1.0.3 mangles CMD lists into a shell string, and without systemd podman runs no timers).
    const compose = parse(await readFile(join(checkout, 'docker-compose.yml'), 'utf8')) as { services: Record<string, { healthcheck?: { test: string[] } }> };
    const container = async (service: string): Promise<string> => {
      const { stdout } = await podman.podman(['ps', '--filter', `label=com.docker.compose.service=${service}`, '--format', '{{.Names}}']);
      const name = stdout.trim().split('\n')[0];
      if (!name) throw new Error(`no running container for ${service}`);
      return name;
    };
    for (const [service, spec] of Object.entries(compose.services)) {
      const test = spec.healthcheck?.test;
      if (!test || test[0] !== 'CMD') continue;
      const name = await container(service);
      await waitFor(`${service}'s healthcheck`, async () => await podman.podman(['exec', name, ...test.slice(1)]).then(() => true), 120_000, 500);
    }

    // Every role's /metrics, inside the compose network, with a token and without one.
    const token = (await readFile(join(checkout, 'deploy/api-tokens'), 'utf8')).split('\n')[0] ?? '';
    const probe = `const t = process.argv[1]; (async () => { for (const u of ['http://api:8080/metrics', 'http://scheduler:9464/metrics', 'http://worker:9464/metrics', 'http://publisher:9464/metrics']) {
      const a = await fetch(u, { headers: { authorization: 'Bearer ' + t } }); const body = await a.text(); const b = await fetch(u);
      console.log(u, a.status, /^process_cpu_seconds_total/m.test(body), b.status); } })().catch((e) => { console.error(e); process.exit(1); });`;
    const metrics = await podman.podman(['exec', await container('api'), 'node', '-e', probe, token]);
    expect(metrics.stdout.trim().split('\n')).toEqual([
      'http://api:8080/metrics 200 true 401',
      'http://scheduler:9464/metrics 200 true 401',
      'http://worker:9464/metrics 200 true 401',
      'http://publisher:9464/metrics 200 true 401',
    ]);

    // The same step with the file root's (made by root as the README says, 0600): the compose file's own
    // one-shot service copies it into the volume, owned by the roles' uid 1000 and mode 0400.
    await rm(tokenFile);
    await asRoot(commands.find((l) => l.includes('deploy/api-tokens') && l.startsWith('openssl')) ?? 'false');
    const rootFile = await stat(tokenFile);
    expect([rootFile.uid, rootFile.mode & 0o777]).toEqual([0, 0o600]);
    await asRoot('podman-compose run --rm tokens');
    const copied = await podman.podman(['exec', await container('api'), 'sh', '-c', 'stat -c "%u %a" /run/egress/api-tokens && cat /run/egress/api-tokens']);
    expect(copied.stdout).toBe(`1000 400\n${await readFile(tokenFile, 'utf8')}`);
    await chmod(runDir, runDirMode);

    // down, then what podman-compose 1.0.3 leaves (the network, the volume) removed.
    await sh('podman-compose down');
    for (const kind of ['network', 'volume'] as const) {
      const { stdout } = await podman.podman([kind, 'ls', '--format', '{{.Name}}']);
      for (const name of stdout.split('\n').filter((n) => n && n !== 'podman')) await podman.podman([kind, 'rm', '-f', name]);
    }
    expect((await podman.podman(['ps', '-a', '--format', '{{.Names}}'])).stdout.trim()).toBe('');
    expect((await podman.podman(['volume', 'ls', '--format', '{{.Name}}'])).stdout.trim()).toBe('');
  }, 900_000);

  it("runs the kubernetes provider's Pod and Secret with podman kube play: the Secret's credentials get through, wrong ones 407, loopback refused", async () => {
    let kube: FakeKubeApiserver | undefined;
    let origin: Server | undefined;
    const playFile = join(await tempDir('real-kube-'), 'pod.yaml');
    try {
      kube = await startFakeKubeApiserver();
      kube.store.namespaces.add('proxies');
      // The origin the proxy may reach: the test on the host side of podman's bridge (a private address,
      // so allowed by the provider's egress policy, as a user would); loopback stays refused.
      // podman's bridge networks are allocated from 10.88.0.0/13 (which one depends on what the store made before).
      const PODMAN_NETS = '10.88.0.0/13';
      const lifecycle = createKubernetesLifecycle({
        kubeConfig: kube.kubeConfig(),
        namespace: 'proxies',
        image: PROXY_IMAGE,
        logger: silentLogger(),
        egressPolicy: proxyEgressPolicy({ allow: [PODMAN_NETS], deny: [] }, undefined),
      });
      const name = 'ep-real-0123abcd';
      await lifecycle.ensureInstance(
        { name, owner: { fleet: 'real', proxy: 'real' }, credentials: { username: 'u-real', password: 'pw-from-the-secret' } },
        new AbortController().signal,
      );
      const secret = kube.getSecret('proxies', name);
      const pod = kube.getPod('proxies', name);
      if (!secret || !pod) throw new Error('the provider made no Pod or Secret');
      // The objects as stored, without what the apiserver adds (uid, times, status).
      const { uid: _u, resourceVersion: _r, creationTimestamp: _c, ...podMeta } = pod.metadata as unknown as Record<string, unknown>;
      const podDocument = { apiVersion: 'v1', kind: 'Pod', metadata: podMeta, spec: pod.spec };
      // The Secret goes in as the podman secret `kube play` resolves a secretKeyRef against: podman 4.3
      // reads it as a JSON map of key → base64 value, the Secret's `data` exactly (a Secret played from
      // the file is stored in another form it then cannot read back: "secret … is not valid JSON").
      // The Pod is played as the provider wrote it.
      const secretFile = join(dirname(playFile), 'secret.json');
      await writeFile(secretFile, JSON.stringify(secret.data ?? {}), { mode: 0o600 });
      await podman.podman(['secret', 'create', name, secretFile]);
      await writeFile(playFile, stringify(podDocument), { mode: 0o600 });
      await podman.podman(['kube', 'play', playFile]);
      const containerName = `${name}-proxy`;
      await podman.waitForLog(containerName, /proxy listening/);
      const address = (await podman.podman(['inspect', '--format', '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}', containerName])).stdout.trim();
      expect(address).toMatch(/^10\.(8[89]|9[0-5])\./);
      const gateway = (await podman.podman(['inspect', '--format', '{{range .NetworkSettings.Networks}}{{.Gateway}}{{end}}', containerName])).stdout.trim();

      origin = createServer((req, res) => res.end(`origin saw ${req.url}`));
      await new Promise<void>((resolve) => origin?.listen(0, gateway, resolve));
      const originPort = (origin.address() as { port: number }).port;
      const through = (target: string, auth?: string) =>
        new Promise<{ status: number; body: string }>((resolve, reject) => {
          const req = request(
            { host: address, port: 3128, path: target, headers: auth ? { 'proxy-authorization': `Basic ${Buffer.from(auth).toString('base64')}` } : {} },
            (res) => {
              let body = '';
              res.on('data', (c: Buffer) => (body += c.toString()));
              res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
            },
          );
          req.on('error', reject);
          req.end();
        });
      expect(await through(`http://${gateway}:${originPort}/hello`, 'u-real:pw-from-the-secret')).toEqual({ status: 200, body: 'origin saw /hello' });
      expect((await through(`http://${gateway}:${originPort}/hello`, 'u-real:wrong')).status).toBe(407);
      expect((await through(`http://${gateway}:${originPort}/hello`)).status).toBe(407);
      expect((await through(`http://127.0.0.1:${originPort}/`, 'u-real:pw-from-the-secret')).status).toBe(403);

      await podman.podman(['kube', 'down', playFile]);
      await podman.podman(['secret', 'rm', name]);
      expect((await podman.podman(['ps', '-a', '--format', '{{.Names}}'])).stdout.trim()).toBe('');
    } finally {
      await new Promise<void>((resolve) => (origin ? origin.close(() => resolve()) : resolve()));
      await kube?.close();
    }
  }, 600_000);

  it('leaves nothing on the host: store, podman directories, iptables chains, ip_forward', async () => {
    await podman.down();
    const after = hostState();
    expect(after).toEqual(hostBefore);
    await expect(run('test', ['-e', podman.env.CONTAINERS_CONF ?? '/nonexistent'])).rejects.toThrow();
  }, 300_000);
});
