// `npm start [-- FLAGS]`: `egress up` on the compiled tree. It builds first only when the sources
// changed since the last build (their fingerprint against dist/.source-hash, written by
// scripts/build.js), saying so in one line, and it never rebuilds dist/ while an egress process of
// this checkout runs from it: it stops with the process it found instead.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { build, builtHash, ROOT, sourceHash } from './build.js';

const args = process.argv.slice(2);

/** The entry files a running egress of this checkout was started through. */
const ENTRIES = new Set([join(ROOT, 'bin/egress.js'), join(ROOT, 'scripts/start.js')]);

function readProc(pid, what) {
  try {
    return readFileSync(`/proc/${pid}/${what}`, 'utf8');
  } catch {
    return undefined;
  }
}

/** Processes (Linux: from /proc) running this checkout's compiled egress, other than this one. */
function runningFromDist() {
  let pids;
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name) && Number(name) !== process.pid);
  } catch {
    return [];
  }
  const found = [];
  for (const pid of pids) {
    const argv = readProc(pid, 'cmdline')?.split('\0') ?? [];
    let cwd;
    try {
      cwd = readlinkSync(`/proc/${pid}/cwd`);
    } catch {
      continue;
    }
    if (!argv.slice(1, 4).some((arg) => ENTRIES.has(resolve(cwd, arg)))) continue;
    // The test suite runs the TypeScript sources (EGRESS_FROM_SOURCE=1), never dist/.
    if ((readProc(pid, 'environ') ?? '').split('\0').includes('EGRESS_FROM_SOURCE=1')) continue;
    found.push({ pid: Number(pid), command: argv.filter(Boolean).join(' ') });
  }
  return found;
}

const hash = sourceHash();
if (builtHash() !== hash) {
  const running = runningFromDist();
  if (running.length > 0) {
    const first = running[0];
    process.stderr.write(
      `error: the sources changed since dist/ was built, but egress runs from it (pid ${first.pid}: ${first.command}); stop it first, then npm start\n`,
    );
    process.exit(1);
  }
  process.stderr.write('egress: building dist/ (the sources changed since the last build) …\n');
  try {
    build(hash);
  } catch (err) {
    process.stderr.write(`error: ${err.message}\n`);
    process.exit(1);
  }
}

process.argv = [process.argv[0] ?? process.execPath, join(ROOT, 'bin/egress.js'), 'up', ...args];
await import('../bin/egress.js');
