/**
 * A small interpreter of the cloud-config modules the proxy user-data uses, for tests that boot it
 * on this machine inside a throw-away mount and network namespace (cloud-init-sandbox.ts):
 * `package_update` and `packages` (checked, not installed: each package must map to what this
 * machine already has), `write_files` (text, `b64` and `gz+b64` contents, octal `permissions`,
 * `owner`), and `runcmd` (`systemctl daemon-reload`, `systemctl enable [--now] UNIT…` and
 * `systemctl start UNIT…` are carried out by a minimal unit runner, which starts a unit once, whether
 * by `--now` or `start`; other commands, `sync` among them, run as they are). Any other key, encoding or unit
 * setting is an error: the interpreter never skips what it does not understand.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { parse } from 'yaml';

/** What a package provides on this machine (the sandbox cannot install packages). */
const PACKAGE_PROVIDES: Record<string, string> = { nodejs: '/usr/bin/node' };
/** The uid/gid a `DynamicUser=yes` unit runs as (first of systemd's dynamic range; owns nothing here). */
export const DYNAMIC_UID = 61184;

/** Unit settings the runner applies, and hardening it cannot reproduce in the sandbox (accepted, not enforced). */
const SERVICE_KEYS = new Set(['Type', 'EnvironmentFile', 'Environment', 'ExecStart', 'DynamicUser', 'User', 'Restart', 'RestartSec']);
const HARDENING_KEYS = new Set(['NoNewPrivileges', 'ProtectSystem', 'ProtectHome', 'PrivateTmp', 'ReadWritePaths', 'AmbientCapabilities']);

export interface RunningUnit {
  name: string;
  uid: number;
  child: ChildProcess;
  exited: Promise<number | null>;
}

export interface InterpretResult {
  packages: string[];
  files: { path: string; mode: number; uid: number; bytes: number }[];
  units: RunningUnit[];
}

function fail(message: string): never {
  throw new Error(`cloud-config: ${message}`);
}

function decode(path: string, content: unknown, encoding: unknown): Buffer {
  const text = typeof content === 'string' ? content : content === undefined ? '' : fail(`${path}: content must be a string`);
  switch (encoding ?? 'text/plain') {
    case 'text/plain':
      return Buffer.from(text, 'utf8');
    case 'b64':
    case 'base64':
      return Buffer.from(text, 'base64');
    case 'gz+b64':
    case 'gzip+base64':
      return gunzipSync(Buffer.from(text, 'base64'));
    default:
      return fail(`${path}: unsupported encoding ${String(encoding)}`);
  }
}

function idOf(db: '/etc/passwd' | '/etc/group', name: string): number {
  const line = readFileSync(db, 'utf8')
    .split('\n')
    .find((l) => l.split(':')[0] === name);
  const id = line?.split(':')[2];
  return id === undefined ? fail(`unknown ${db === '/etc/passwd' ? 'user' : 'group'} ${name}`) : Number(id);
}

/** systemd's EnvironmentFile: `KEY=value`, `KEY='literal'`, `KEY="with \\ escapes"`, comments and blank lines. */
export function parseEnvironmentFile(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (!m) fail(`environment file line not understood: ${line.slice(0, 20)}…`);
    const value = m[2]!;
    if (value.startsWith("'")) {
      if (!value.endsWith("'") || value.length < 2) fail(`unterminated quote for ${m[1]}`);
      env[m[1]!] = value.slice(1, -1);
    } else if (value.startsWith('"')) {
      if (!value.endsWith('"') || value.length < 2) fail(`unterminated quote for ${m[1]}`);
      env[m[1]!] = value.slice(1, -1).replace(/\\(.)/g, '$1');
    } else {
      env[m[1]!] = value;
    }
  }
  return env;
}

function parseUnit(text: string): Map<string, Map<string, string>> {
  const sections = new Map<string, Map<string, string>>();
  let current: Map<string, string> | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const section = /^\[(.+)\]$/.exec(line);
    if (section) {
      current = new Map();
      sections.set(section[1]!, current);
      continue;
    }
    const at = line.indexOf('=');
    if (!current || at < 0) fail(`unit line not understood: ${line}`);
    current.set(line.slice(0, at), line.slice(at + 1));
  }
  return sections;
}

function startUnit(name: string, onLine: (unit: string, line: string) => void): RunningUnit {
  const service = parseUnit(readFileSync(`/etc/systemd/system/${name}`, 'utf8')).get('Service') ?? fail(`${name}: no [Service] section`);
  for (const key of service.keys()) if (!SERVICE_KEYS.has(key) && !HARDENING_KEYS.has(key)) fail(`${name}: unit setting ${key} is not understood`);
  const type = service.get('Type') ?? 'simple';
  if (type !== 'simple') fail(`${name}: Type=${type} is not understood`);
  const env: Record<string, string> = { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C.UTF-8' };
  const envFile = service.get('EnvironmentFile');
  // systemd (root) reads the file before it drops to the unit's user: so does the runner.
  if (envFile) Object.assign(env, parseEnvironmentFile(readFileSync(envFile, 'utf8')));
  const assignment = service.get('Environment');
  if (assignment) Object.assign(env, parseEnvironmentFile(assignment.split(' ').join('\n')));
  let uid = 0;
  let gid = 0;
  if (service.get('DynamicUser') === 'yes') {
    uid = gid = DYNAMIC_UID;
  } else if (service.get('User')) {
    uid = idOf('/etc/passwd', service.get('User')!);
    gid = uid;
  }
  const [cmd, ...args] = (service.get('ExecStart') ?? fail(`${name}: no ExecStart`)).split(/\s+/);
  if (!cmd?.startsWith('/')) fail(`${name}: ExecStart must be an absolute path`);
  const child = spawn(cmd, args, { uid, gid, env, stdio: ['ignore', 'pipe', 'pipe'] });
  for (const stream of [child.stdout, child.stderr]) {
    let buffered = '';
    stream.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      let nl;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        onLine(name, buffered.slice(0, nl));
        buffered = buffered.slice(nl + 1);
      }
    });
  }
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { name, uid, child, exited };
}

function runCommand(argv: string[], units: RunningUnit[], onLine: (unit: string, line: string) => void): void {
  if (argv[0] === 'systemctl') {
    if (argv[1] === 'daemon-reload' && argv.length === 2) return;
    if (argv[1] === 'enable' && argv[2] === '--now') {
      for (const unit of argv.slice(3)) units.push(startUnit(unit, onLine));
      return;
    }
    // Enabling alone starts nothing (there is no next boot here); `start` does.
    if (argv[1] === 'enable' && argv.length > 2 && !argv.slice(2).some((a) => a.startsWith('-'))) return;
    if (argv[1] === 'start' && argv.length > 2 && !argv.slice(2).some((a) => a.startsWith('-'))) {
      for (const unit of argv.slice(2)) units.push(startUnit(unit, onLine));
      return;
    }
    fail(`systemctl ${argv.slice(1).join(' ')} is not understood`);
  }
  const r = spawnSync(argv[0]!, argv.slice(1), { stdio: 'inherit' });
  if (r.status !== 0) fail(`runcmd ${argv[0]} exited ${r.status}`);
}

/** Applies a `#cloud-config` document to this machine (meant for a private mount namespace). */
export function interpretCloudConfig(text: string, onLine: (unit: string, line: string) => void): InterpretResult {
  if (!text.startsWith('#cloud-config\n')) fail('the document does not start with #cloud-config');
  const doc = parse(text) as Record<string, unknown>;
  const known = new Set(['package_update', 'packages', 'write_files', 'runcmd']);
  for (const key of Object.keys(doc)) if (!known.has(key)) fail(`module ${key} is not understood`);

  const packages = (doc.packages ?? []) as string[];
  for (const p of packages) {
    const provides = PACKAGE_PROVIDES[p] ?? fail(`package ${p} is not known to the sandbox`);
    if (!existsSync(provides)) fail(`package ${p}: ${provides} is not on this machine`);
  }

  const files: InterpretResult['files'] = [];
  for (const entry of (doc.write_files ?? []) as Record<string, unknown>[]) {
    for (const key of Object.keys(entry))
      if (!['path', 'content', 'encoding', 'permissions', 'owner'].includes(key)) fail(`write_files: ${key} is not understood`);
    const path = typeof entry.path === 'string' ? entry.path : fail('write_files: path missing');
    const data = decode(path, entry.content, entry.encoding);
    mkdirSync(dirname(path), { recursive: true, mode: 0o755 });
    writeFileSync(path, data);
    const permissions = entry.permissions ?? '0644';
    if (typeof permissions !== 'string' || !/^0?[0-7]{3,4}$/.test(permissions)) fail(`${path}: permissions must be an octal string`);
    const mode = parseInt(permissions, 8);
    chmodSync(path, mode);
    const owner = entry.owner ?? 'root:root';
    if (typeof owner !== 'string') fail(`${path}: owner must be user:group`);
    const [user, group] = owner.split(':');
    const uid = idOf('/etc/passwd', user ?? 'root');
    chownSync(path, uid, idOf('/etc/group', group ?? user ?? 'root'));
    files.push({ path, mode, uid, bytes: data.length });
  }

  const units: RunningUnit[] = [];
  for (const cmd of (doc.runcmd ?? []) as (string | string[])[]) {
    runCommand(Array.isArray(cmd) ? cmd : ['/bin/sh', '-c', cmd], units, onLine);
  }
  return { packages, files, units };
}
