/**
 * Real vendors' proxies on loopback for the upstream provider's suites: Debian's tinyproxy (Basic
 * auth) and squid (ncsa auth), started as the data-plane bench starts them (private configuration
 * in a test's temporary directory, foreground, loopback only), and dante (SOCKS5 with RFC 1929
 * username/password). Dante checks a SOCKS5 user against the system's password database, so its
 * user is a system account made for the test (a random name, no home, no shell) and removed with
 * the server. Each `stop` ends the process (and removes the account).
 */
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { chmod, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { startListening, startSquid, startTinyproxy, type AnchorProxy } from '../../bench/support/anchor-proxies.ts';
import { freePort } from '../../src/redis/redis-server.ts';

const run = promisify(execFile);

export interface VendorProxy {
  port: number;
  user: string;
  password: string;
  /** Ends the process (a SIGKILL after 10 s) and whatever it needed (dante's account); idempotent. */
  stop(): Promise<void>;
  /** Kills it at once (SIGKILL), for the "upstream died" cases; `stop` still cleans up. */
  kill(): void;
}

function asVendor(started: AnchorProxy | string, user: string, password: string): VendorProxy {
  if (typeof started === 'string') throw new Error(started);
  const { child } = started;
  return {
    port: started.port,
    user,
    password,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) await started.stop();
    },
    kill: () => void child.kill('SIGKILL'),
  };
}

export async function tinyproxyVendor(dir: string, user: string, password: string): Promise<VendorProxy> {
  return asVendor(await startTinyproxy(dir, user, password), user, password);
}

export async function squidVendor(dir: string, user: string, password: string): Promise<VendorProxy> {
  // As root, squid's auth helper runs as `proxy`: it must traverse the run's private directory
  // (mode 0711: nothing listed) to reach the password file in the test's own.
  await chmod(dirname(dir), 0o711);
  return asVendor(await startSquid(dir, user, password), user, password);
}

/** dante-server on 127.0.0.1 with SOCKS5 username/password for a system account it makes (root only). */
export async function danteVendor(dir: string): Promise<VendorProxy> {
  if (process.getuid?.() !== 0) throw new Error('dante checks SOCKS5 users against the system accounts: this suite must run as root (as .ci/run does)');
  const user = `egsocks${randomBytes(4).toString('hex')}`;
  const password = randomBytes(12).toString('hex');
  await run('useradd', ['-M', '-s', '/usr/sbin/nologin', user]);
  const removeUser = (): Promise<unknown> => run('userdel', [user]).catch(() => undefined);
  try {
    const chpasswd = execFile('chpasswd');
    chpasswd.stdin?.end(`${user}:${password}\n`);
    await once(chpasswd, 'exit');
    const port = await freePort();
    const conf = join(dir, 'danted.conf');
    await writeFile(
      conf,
      [
        `logoutput: ${join(dir, 'danted.log')}`,
        `internal: 127.0.0.1 port = ${port}`,
        'external: 127.0.0.1',
        'socksmethod: username',
        'clientmethod: none',
        'user.privileged: root',
        'user.unprivileged: nobody',
        'client pass {',
        '  from: 127.0.0.0/8 to: 0.0.0.0/0',
        '}',
        'socks pass {',
        '  from: 127.0.0.0/8 to: 0.0.0.0/0',
        '  command: connect',
        '}',
        '',
      ].join('\n'),
    );
    const started = await startListening('danted', 'danted', ['-f', conf, '-p', join(dir, 'danted.pid'), '-N', '1'], port);
    if (typeof started === 'string') throw new Error(started);
    let stopped: Promise<void> | undefined;
    return {
      port,
      user,
      password,
      // dante's mother process ends its children on SIGTERM (a SIGKILL would leave them).
      kill: () => void started.child.kill('SIGTERM'),
      stop: () =>
        (stopped ??= (async () => {
          const { child } = started;
          if (child.exitCode === null && child.signalCode === null) await started.stop();
          await removeUser();
        })()),
    };
  } catch (err) {
    await removeUser();
    throw err;
  }
}
