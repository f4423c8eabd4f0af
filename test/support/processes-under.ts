/** Processes still running whose command line or working directory lies under a directory (a leftover of a run). */
import { readdir, readFile, readlink } from 'node:fs/promises';

/** Processes still running whose command line or working directory lies under `dir`. */
export async function processesUnder(dir: string): Promise<{ pid: number; command: string }[]> {
  const found: { pid: number; command: string }[] = [];
  for (const entry of await readdir('/proc').catch(() => [] as string[])) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      const command = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').join(' ').trim();
      const cwd = await readlink(`/proc/${pid}/cwd`).catch(() => '');
      if (command && (command.includes(dir) || cwd.startsWith(dir))) found.push({ pid, command });
    } catch {
      // gone meanwhile
    }
  }
  return found;
}
