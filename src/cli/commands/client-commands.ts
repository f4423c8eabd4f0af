import { UsageError } from '../../errors.ts';
import type { ProviderHealth } from '../../health/provider-health.ts';
import { JOB_STATES, type JobView } from '../../jobs/job-inspection.ts';
import type { ApiClient } from '../api-client.ts';
import { age, renderStructured, renderTable, targetCells, type CliIO, type OutputFormat } from '../output.ts';
import type { CheckResultData } from '../../health/check-result.ts';

export function parseOutput(value: string | undefined, allowed: readonly OutputFormat[]): OutputFormat {
  if (value === undefined) return 'table';
  if (!(allowed as readonly string[]).includes(value)) {
    throw new UsageError(`-o/--output: expected one of ${allowed.filter((f) => f !== 'table').join(', ')}, got "${value}"`);
  }
  return value as OutputFormat;
}

/** `one`: the command named one object (`get ph NAME`), printed bare; a list is always `{items}`. */
function renderProviderHealth(items: readonly ProviderHealth[], format: OutputFormat, one: boolean): string {
  if (format === 'json' || format === 'yaml') return renderStructured(one ? items[0] : { items }, format);
  if (format === 'wide') {
    const rows = items.flatMap((ph) => ph.status.targets.map((t) => [ph.name, t.name, ...targetCells(t, 80)]));
    return renderTable(['PROVIDER', 'TARGET', 'READY', 'REASON', 'DURATION', 'LAST CHECK', 'SINCE', 'MESSAGE'], rows);
  }
  const rows = items.map((ph) => {
    const ready = ph.status.targets.filter((t) => t.ready).length;
    const notReady = ph.status.targets.filter((t) => !t.ready).map((t) => `${t.name}:${t.reason}`);
    return [
      ph.name,
      String(ph.status.ready),
      `${ready}/${ph.status.targets.length}`,
      age(ph.status.lastCheckTime),
      age(ph.status.lastTransitionTime),
      notReady.join(','),
    ];
  });
  return renderTable(['NAME', 'READY', 'TARGETS', 'LAST CHECK', 'SINCE', 'NOT READY'], rows);
}

export async function getProviderHealth(
  client: ApiClient,
  io: CliIO,
  name: string | undefined,
  output: string | undefined,
  signal: AbortSignal,
): Promise<number> {
  const format = parseOutput(output, ['table', 'json', 'yaml', 'wide']);
  const items = name
    ? [await client.request<ProviderHealth>('GET', `/v1/providerhealths/${encodeURIComponent(name)}`, signal)]
    : (await client.request<{ items: ProviderHealth[] }>('GET', '/v1/providerhealths', signal)).items;
  if (items.length === 0 && format === 'table') {
    io.err('No ProviderHealth found (has a check round run yet?)\n');
    return 0;
  }
  io.out(renderProviderHealth(items, format, name !== undefined));
  return 0;
}

export async function checkProvider(
  client: ApiClient,
  io: CliIO,
  provider: string,
  wait: boolean,
  output: string | undefined,
  signal: AbortSignal,
): Promise<number> {
  const format = parseOutput(output, ['table', 'json', 'yaml']);
  const path = `/v1/providers/${encodeURIComponent(provider)}/checks${wait ? '?wait=true' : ''}`;
  const reply = await client.request<{ provider: string; jobId: string; result?: CheckResultData }>('POST', path, signal);
  if (format === 'json' || format === 'yaml') {
    io.out(renderStructured(reply, format));
  } else if (!reply.result) {
    io.out(`check of ${reply.provider} enqueued as job ${reply.jobId}\n`);
  } else {
    const rows = reply.result.targets.map((t) => [t.target, String(t.ready), t.reason, `${t.durationSeconds.toFixed(3)}s`, t.message]);
    io.out(renderTable(['TARGET', 'READY', 'REASON', 'DURATION', 'MESSAGE'], rows));
  }
  return reply.result && !reply.result.targets.every((t) => t.ready) ? 1 : 0;
}

/** `--state a,b`: known job states only, checked before the API is asked. */
export function parseStates(value: string): string {
  const states = value.split(',').map((s) => s.trim());
  const unknown = [...new Set(states.filter((s) => !(JOB_STATES as readonly string[]).includes(s)))];
  if (unknown.length > 0) {
    const named = unknown
      .map((s) => `"${s.slice(0, 40)}"`)
      .slice(0, 5)
      .join(', ');
    throw new UsageError(`--state: unknown state${unknown.length > 1 ? 's' : ''} ${named}${unknown.length > 5 ? ', …' : ''} (known: ${JOB_STATES.join(', ')})`);
  }
  return [...new Set(states)].join(',');
}

export async function listJobs(client: ApiClient, io: CliIO, opts: { state?: string; queue?: string; output?: string }, signal: AbortSignal): Promise<number> {
  const format = parseOutput(opts.output, ['table', 'json', 'yaml']);
  const query = new URLSearchParams();
  if (opts.state !== undefined) query.set('state', parseStates(opts.state));
  if (opts.queue) query.set('queue', opts.queue);
  const { items } = await client.request<{ items: JobView[] }>('GET', `/v1/jobs${query.size ? `?${query.toString()}` : ''}`, signal);
  if (format === 'json' || format === 'yaml') {
    io.out(renderStructured({ items }, format));
    return 0;
  }
  const rows = items.map((j) => [j.queue, j.id, j.name, j.state, String(j.attemptsMade), age(j.createdAt), (j.failedReason ?? '').slice(0, 80)]);
  io.out(renderTable(['QUEUE', 'ID', 'NAME', 'STATE', 'ATTEMPTS', 'AGE', 'REASON'], rows));
  return 0;
}

export async function retryJobs(
  client: ApiClient,
  io: CliIO,
  id: string | undefined,
  opts: { allFailed?: boolean; queue?: string },
  signal: AbortSignal,
): Promise<number> {
  if (Boolean(id) === Boolean(opts.allFailed)) throw new UsageError('jobs retry: give either a job ID or --all-failed');
  const q = opts.queue ? `?queue=${encodeURIComponent(opts.queue)}` : '';
  if (opts.allFailed) {
    const { retried } = await client.request<{ retried: Record<string, number> }>('POST', `/v1/jobs/retry-failed${q}`, signal);
    const total = Object.values(retried).reduce((a, b) => a + b, 0);
    io.out(
      `retried ${total} failed job(s)${
        total
          ? `: ${Object.entries(retried)
              .filter(([, n]) => n)
              .map(([k, n]) => `${k} ${n}`)
              .join(', ')}`
          : ''
      }\n`,
    );
    return 0;
  }
  const job = await client.request<JobView>('POST', `/v1/jobs/${encodeURIComponent(id ?? '')}/retry${q}`, signal);
  io.out(`job ${job.queue}/${job.id} moved back to waiting\n`);
  return 0;
}
