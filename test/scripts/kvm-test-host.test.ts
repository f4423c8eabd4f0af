import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, readlink, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { ROOT } from '../support/cli.ts';

// scripts/kvm-test-host.sh's qemu.conf handling, run for real on a copy of the file in a
// temporary directory: the script is sourced with its state directory and qemu.conf moved there
// (KVM_TEST_HOST_STATE, KVM_TEST_HOST_QEMU_CONF) and its pidfiles pointed there too, so the
// shared test host (its libvirtd, sshd and /etc/libvirt/qemu.conf) is never touched. A libvirtd
// "this script did not start" is a process of the test's own with a pidfile and no start marker.

const SCRIPT = join(ROOT, 'scripts/kvm-test-host.sh');

const TEST_HOST_CONF = `# Written by egress-proxies scripts/kvm-test-host.sh: a test host, not a production one.
user = "root"
group = "root"
swtpm_user = "root"
swtpm_group = "root"
security_driver = "none"
`;

// The same settings as the test host's, written differently: other comments, blank lines,
// spacing, a trailing comment, and a `#` inside a quoted value elsewhere would count.
const SAME_SETTINGS = `# Master configuration file for the QEMU driver.
# (edited by hand on this machine)

user="root"
group = "root"   # the same group

   swtpm_user   =   "root"
swtpm_group = "root"
#security_driver = "selinux"
security_driver = "none"
`;

const OTHER_SETTINGS = `# Master configuration file for the QEMU driver.
user = "libvirt-qemu"
group = "root"
swtpm_user = "root"
swtpm_group = "root"
security_driver = "none"
`;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

let dir: string;
let conf: string;
let state: string;
let foreign: ChildProcess | undefined;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'egress-kvm-script-'));
  conf = join(dir, 'qemu.conf');
  state = join(dir, 'state');
});

afterEach(async () => {
  if (foreign && foreign.exitCode === null && foreign.signalCode === null) {
    const exited = once(foreign, 'exit');
    foreign.kill('SIGKILL');
    await exited;
  }
  foreign = undefined;
  await rm(dir, { recursive: true, force: true });
});

/** A process standing in for a libvirtd someone else started: its pid in a pidfile, no start marker. */
async function startForeignLibvirtd(): Promise<{ pidfile: string; exe: string }> {
  foreign = spawn('sleep', ['600'], { stdio: 'ignore' });
  await once(foreign, 'spawn');
  const pidfile = join(dir, 'libvirtd.pid');
  await writeFile(pidfile, `${foreign.pid}\n`);
  return { pidfile, exe: await readlink(`/proc/${foreign.pid}/exe`) };
}

/** Sources the script (nothing of it runs by itself) and runs `commands` with every path in the temporary directory. */
async function script(
  commands: string,
  libvirtd: { pidfile: string; exe: string } = { pidfile: join(dir, 'none.pid'), exe: '/usr/sbin/libvirtd' },
): Promise<Run> {
  const body = [
    `source ${JSON.stringify(SCRIPT)}`,
    `LIBVIRTD_PIDFILE=${JSON.stringify(libvirtd.pidfile)} LIBVIRTD=${JSON.stringify(libvirtd.exe)}`,
    `VIRTLOGD_PIDFILE=${JSON.stringify(join(dir, 'virtlogd.pid'))} SSHD_PIDFILE=${JSON.stringify(join(dir, 'sshd.pid'))}`,
    `mkdir -p "$STATE" "$STARTED_DIR"`,
    commands,
  ].join('\n');
  const child = spawn('bash', ['-c', body], {
    env: { ...process.env, KVM_TEST_HOST_STATE: state, KVM_TEST_HOST_QEMU_CONF: conf },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => void (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => void (stderr += c.toString()));
  const [code] = (await once(child, 'close')) as [number | null];
  return { code, stdout, stderr };
}

const exists = (path: string): Promise<boolean> =>
  stat(path).then(
    () => true,
    () => false,
  );

describe('kvm-test-host.sh: qemu.conf', () => {
  test('settings are compared, not bytes: comments, blank lines and spacing do not count', async () => {
    await writeFile(join(dir, 'a.conf'), SAME_SETTINGS);
    await writeFile(join(dir, 'b.conf'), TEST_HOST_CONF);
    await writeFile(join(dir, 'c.conf'), 'user = "root # not a comment"  # a comment\n\n');
    const run = await script(`qemu_conf_settings ${dir}/a.conf; echo ---; qemu_conf_settings ${dir}/b.conf; echo ---; qemu_conf_settings ${dir}/c.conf`);
    const [a, b, c] = run.stdout.split('---\n');
    expect(a).toBe(b);
    expect(b).toBe('user="root"\ngroup="root"\nswtpm_user="root"\nswtpm_group="root"\nsecurity_driver="none"\n');
    expect(c).toBe('user="root # not a comment"\n');
  });

  test('a libvirtd it did not start, with a qemu.conf differing only in comments: up goes on and leaves the file alone', async () => {
    const libvirtd = await startForeignLibvirtd();
    await writeFile(conf, SAME_SETTINGS);
    const run = await script('apply_qemu_conf; echo "changed=$QEMU_CONF_CHANGED"', libvirtd);
    expect(run).toMatchObject({ code: 0, stdout: 'changed=0\n' });
    expect(await readFile(conf, 'utf8')).toBe(SAME_SETTINGS);
    expect(await exists(join(state, 'qemu.conf.orig'))).toBe(false);
  });

  test('a libvirtd it did not start, with other settings: refused by name, the file untouched', async () => {
    const libvirtd = await startForeignLibvirtd();
    await writeFile(conf, OTHER_SETTINGS);
    const run = await script('apply_qemu_conf; echo "not reached"', libvirtd);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain(
      `kvm-test-host: error: libvirtd (pid ${foreign?.pid}) was not started by this script, and ${conf} does not have a test host's settings`,
    );
    expect(run.stderr).toContain(`${conf} is left as it is`);
    expect(await readFile(conf, 'utf8')).toBe(OTHER_SETTINGS);
    expect(await exists(join(state, 'qemu.conf.orig'))).toBe(false);
  });

  test('other settings and no libvirtd: up writes the test host file, down puts the original back byte for byte', async () => {
    await writeFile(conf, OTHER_SETTINGS);
    const up = await script('apply_qemu_conf; echo "changed=$QEMU_CONF_CHANGED"; apply_qemu_conf; echo "again=$QEMU_CONF_CHANGED"');
    expect(up).toMatchObject({ code: 0, stdout: 'changed=1\nagain=0\n' });
    expect(await readFile(conf, 'utf8')).toBe(TEST_HOST_CONF);
    expect(await readFile(join(state, 'qemu.conf.orig'), 'utf8')).toBe(OTHER_SETTINGS);
    // `down` with nothing of its own running stops nothing and restores the file.
    const down = await script('cmd_down');
    expect(down.code).toBe(0);
    expect(down.stderr).toContain(`restored the original ${conf}`);
    expect(await readFile(conf, 'utf8')).toBe(OTHER_SETTINGS);
    expect(await exists(join(state, 'qemu.conf.orig'))).toBe(false);
  });

  test('no qemu.conf before up: down removes the one up wrote', async () => {
    expect(await script('apply_qemu_conf')).toMatchObject({ code: 0 });
    expect(await readFile(conf, 'utf8')).toBe(TEST_HOST_CONF);
    const down = await script('cmd_down');
    expect(down.code).toBe(0);
    expect(await exists(conf)).toBe(false);
    expect(await exists(join(state, 'qemu.conf.absent'))).toBe(false);
  });

  test('a qemu.conf changed by someone after up is left to them on down', async () => {
    await writeFile(conf, OTHER_SETTINGS);
    expect(await script('apply_qemu_conf')).toMatchObject({ code: 0 });
    const edited = `${TEST_HOST_CONF}max_processes = 100\n`;
    await writeFile(conf, edited);
    const down = await script('cmd_down');
    expect(down.code).toBe(0);
    expect(down.stderr).toContain('was changed since up; leaving it');
    expect(await readFile(conf, 'utf8')).toBe(edited);
  });
});
