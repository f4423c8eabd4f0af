/**
 * Running the machine's real kubectl (scripts/install-kubectl.sh puts one ≥ 1.27 there) against a fake apiserver over TLS:
 * a private temp dir (removed after the test file) with the CA and kubectl's discovery cache, no kubeconfig.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { tempDir } from '../../support/temp-dirs.ts';
import type { FakeKubeApiserver } from './server.ts';

const run = promisify(execFile);

export interface KubectlResult {
  stdout: string;
  stderr: string;
  code: number;
}

export class KubectlHarness {
  private constructor(
    readonly kube: FakeKubeApiserver,
    readonly dir: string,
  ) {}

  static async create(kube: FakeKubeApiserver): Promise<KubectlHarness> {
    const dir = await tempDir('egress-kubectl-');
    await writeFile(join(dir, 'ca.pem'), kube.tlsCert!.cert);
    return new KubectlHarness(kube, dir);
  }

  private args(args: string[]): string[] {
    const k = this.kube;
    return ['--server', k.url, '--token', k.token, '--certificate-authority', join(this.dir, 'ca.pem'), '--cache-dir', join(this.dir, 'cache'), ...args];
  }

  private get env(): NodeJS.ProcessEnv {
    return { ...process.env, KUBECONFIG: join(this.dir, 'none') };
  }

  /** Writes `text` to a file in the harness dir and returns its path. */
  async file(name: string, text: string): Promise<string> {
    const path = join(this.dir, name);
    await writeFile(path, text);
    return path;
  }

  async run(...args: string[]): Promise<KubectlResult> {
    try {
      const { stdout, stderr } = await run('kubectl', this.args(args), { env: this.env });
      return { stdout, stderr, code: 0 };
    } catch (e) {
      const err = e as { stdout: string; stderr: string; code: number };
      return { stdout: err.stdout, stderr: err.stderr, code: err.code };
    }
  }

  /** Starts a long-running kubectl (e.g. `get -w`); its output accumulates in `output()`. */
  start(...args: string[]): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
    const child = spawn('kubectl', this.args(args), { env: this.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    return { child, output: () => out, exited };
  }
}
