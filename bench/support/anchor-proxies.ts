/**
 * The data-plane bench's anchors: Debian's tinyproxy and squid, each started in the foreground with
 * a private configuration in the bench's temporary directory (Basic auth, loopback only, no cache,
 * no access log) and stopped after — never the system service. A missing program gives the reason
 * its rows are skipped.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../src/redis/redis-server.ts';
import { portAccepts } from '../../test/support/ports.ts';

const run = promisify(execFile);

export interface AnchorProxy {
  child: ChildProcess;
  port: number;
  stop(): Promise<void>;
}

async function which(program: string): Promise<string | undefined> {
  for (const dir of (process.env.PATH ?? '/usr/bin:/bin').split(':').concat('/usr/sbin', '/usr/bin')) {
    const path = join(dir, program);
    if (
      await readFile(path).then(
        () => true,
        () => false,
      )
    )
      return path;
  }
  return undefined;
}

/** Starts `program args` and waits for `port` to accept; the reason as a string when it does not. */
export async function startListening(name: string, program: string, args: string[], port: number): Promise<AnchorProxy | string> {
  const child = spawn(program, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const deadline = Date.now() + 20_000;
  while (!(await portAccepts(port))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      return `${name} did not start: ${stderr.trim().slice(-500) || `exit ${child.exitCode}`}`;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    child,
    port,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await once(child, 'exit');
      clearTimeout(killer);
    },
  };
}

export async function startTinyproxy(dir: string, user: string, password: string): Promise<AnchorProxy | string> {
  const program = await which('tinyproxy');
  if (!program) return 'tinyproxy is not installed: `apt-get install -y tinyproxy` (Debian/Ubuntu) to add its rows';
  const port = await freePort();
  const conf = join(dir, 'tinyproxy.conf');
  await writeFile(
    conf,
    [
      `Port ${port}`,
      'Listen 127.0.0.1',
      'Timeout 600',
      'MaxClients 1000',
      `BasicAuth ${user} ${password}`,
      'LogLevel Error',
      `LogFile "${join(dir, 'tinyproxy.log')}"`,
      `PidFile "${join(dir, 'tinyproxy.pid')}"`,
      'DisableViaHeader Yes',
      '',
    ].join('\n'),
  );
  return startListening('tinyproxy', program, ['-d', '-c', conf], port);
}

/**
 * squid 5 (Debian's package) with ncsa Basic auth, no cache and no access log, one worker. As root
 * it runs as its `proxy` user, so its directory is made writable for it.
 */
export async function startSquid(dir: string, user: string, password: string): Promise<AnchorProxy | string> {
  const program = await which('squid');
  const ncsa = '/usr/lib/squid/basic_ncsa_auth';
  if (!program) return 'squid is not installed: `apt-get install -y squid` (Debian/Ubuntu) to add its rows';
  // As root squid and its auth helper run as `proxy`: they must pass through the bench's private
  // directory (traverse only, nothing listed) into one of their own.
  await chmod(dir, 0o711);
  const home = join(dir, 'squid');
  await mkdir(home, { recursive: true });
  await chmod(home, 0o777);
  const hash = (await run('openssl', ['passwd', '-apr1', password])).stdout.trim();
  const passwd = join(home, 'passwd');
  await writeFile(passwd, `${user}:${hash}\n`, { mode: 0o644 });
  const port = await freePort();
  const conf = join(home, 'squid.conf');
  await writeFile(
    conf,
    [
      `http_port 127.0.0.1:${port}`,
      `auth_param basic program ${ncsa} ${passwd}`,
      'auth_param basic children 4',
      'auth_param basic realm bench',
      'auth_param basic credentialsttl 1 hour',
      'acl authenticated proxy_auth REQUIRED',
      'http_access allow authenticated',
      'http_access deny all',
      'cache deny all',
      'cache_mem 8 MB',
      'access_log none',
      `cache_log ${join(home, 'cache.log')}`,
      `pid_filename ${join(home, 'squid.pid')}`,
      `coredump_dir ${home}`,
      'shutdown_lifetime 0 seconds',
      'via off',
      'forwarded_for delete',
      'workers 1',
      // No ICMP helper: it outlives a stop by a moment, and nothing here measures with it.
      'pinger_enable off',
      '',
    ].join('\n'),
  );
  return startListening('squid', program, ['-N', '-f', conf], port);
}
