/**
 * When a listener subscribes to exits: every proxy already running under the data directory (adopted
 * from an earlier worker) is watched, and those recorded but no longer running (their host died while
 * no worker watched) are reported.
 */
import { readdir } from 'node:fs/promises';
import { instanceDir, instancesDir } from './instance-files.ts';
import { hostedWatched, hostInstanceId, readState } from './instance-state.ts';
import { legacyAlive, legacyProcessFor, legacyWatched } from './legacy-proxies.ts';
import { watchUnlessDeleted, type LocalContext } from './lifecycle-context.ts';
import { isHostProcess } from './process-table.ts';

export async function watchRunning(ctx: LocalContext): Promise<void> {
  const { dataDir, exits, deletions } = ctx;
  let names: string[];
  try {
    names = (await readdir(instancesDir(dataDir), { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name);
  } catch {
    return;
  }
  const hostAlive = new Map<number, boolean>();
  for (const name of names) {
    const dir = instanceDir(dataDir, name);
    const mark = deletions.mark(name);
    const { intent, record } = await readState(dir);
    if (!intent || !record) continue;
    if (record.host === true) {
      const live = hostAlive.get(record.pid) ?? (await isHostProcess(record.pid, dataDir));
      hostAlive.set(record.pid, live);
      if (live) watchUnlessDeleted(ctx, hostedWatched(dataDir, intent, record), mark);
      // Reported, not watched: no restart of the host from here (the next ensure starts one).
      else if (deletions.unchanged(name, mark))
        exits.report(
          { name, owner: intent.owner, id: hostInstanceId(record), pid: record.pid, isOurs: () => Promise.resolve(false), exitMessage: '' },
          `proxy host ${record.pid} is no longer running`,
        );
      continue;
    }
    const watched = legacyWatched(dir, name, intent.owner, record);
    if (await legacyAlive(dir, record)) {
      if (deletions.unchanged(name, mark)) exits.watch(watched);
    } else if ((await legacyProcessFor(dir)) === undefined && deletions.unchanged(name, mark)) {
      exits.report(watched, `proxy process ${record.pid} is no longer running`);
    }
  }
}
