/**
 * Runs user-data in a throw-away sandbox on this machine (cloud-init-sandbox.ts, as root in new PID,
 * mount and network namespaces) and returns its report. The job file lives in a temporary directory
 * removed before returning; the namespaces end with the sandbox's process.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { SandboxJob, SandboxReport } from './cloud-init-sandbox.ts';

const SANDBOX = fileURLToPath(new URL('./cloud-init-sandbox.ts', import.meta.url));

export async function bootInSandbox(userData: string, job: Omit<SandboxJob, 'userDataFile'>): Promise<SandboxReport & { stderr: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'egress-boot-'));
  try {
    const userDataFile = join(dir, 'user-data');
    await writeFile(userDataFile, userData, { mode: 0o600 });
    const jobFile = join(dir, 'job.json');
    await writeFile(jobFile, JSON.stringify({ ...job, userDataFile } satisfies SandboxJob), { mode: 0o600 });
    const child = spawn(
      'unshare',
      ['--pid', '--fork', '--kill-child', '--mount', '--net', '--propagation', 'private', process.execPath, '--import', 'tsx', SANDBOX, jobFile],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    const last = stdout.trim().split('\n').pop() ?? '';
    let parsed: (SandboxReport & { error?: string }) | undefined;
    try {
      parsed = JSON.parse(last) as SandboxReport & { error?: string };
    } catch {
      throw new Error(`sandbox exited ${code} without a report:\n${stdout}\n${stderr}`);
    }
    if (parsed.error) throw new Error(`sandbox failed: ${parsed.error}\n${parsed.log.join('\n')}\n${stderr}`);
    return { ...parsed, stderr };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
