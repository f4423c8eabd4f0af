import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { parse } from 'yaml';
import { ROOT, spawnEgress, waitUpAndLocalReady, type EgressProcess } from '../support/cli.ts';
import { uniquePrefix } from '../support/config.ts';
import { kvmTestHost } from '../support/kvm-host.ts';
import { waitFor } from '../support/wait.ts';
import { describeWithTool } from '../support/required-tools.ts';

/**
 * The shipped dashboard (deploy/grafana) and alerting rules (deploy/prometheus): the rules pass
 * their promtool unit tests, every alert has a case that fires, and every metric either file
 * queries is one a running `egress up` exports (with a local and a kvm provider, so the KVM
 * pool's metrics exist).
 */

const DASHBOARD = join(ROOT, 'deploy/grafana/egress-proxies.json');
const ALERTS = join(ROOT, 'deploy/prometheus/alerts.yaml');
const ALERT_TESTS = join(ROOT, 'deploy/prometheus/alerts.test.yaml');

function promtool(args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve, reject) => {
    execFile('promtool', args, { cwd: join(ROOT, 'deploy/prometheus'), timeout: 60_000 }, (err, stdout, stderr) => {
      if (err && (err as NodeJS.ErrnoException).code === 'ENOENT') {
        reject(new Error('promtool is not installed: apt-get install prometheus (as .ci/run does)', { cause: err }));
        return;
      }
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: `${stdout}${stderr}` });
    });
  });
}

interface Rule {
  alert: string;
  expr: string;
}

async function alertRules(): Promise<Rule[]> {
  const doc = parse(await readFile(ALERTS, 'utf8')) as { groups: { rules: Rule[] }[] };
  return doc.groups.flatMap((g) => g.rules);
}

async function dashboardExprs(): Promise<string[]> {
  const doc = JSON.parse(await readFile(DASHBOARD, 'utf8')) as { panels: { title: string; targets?: { expr: string }[] }[] };
  return doc.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
}

/** The metric names a PromQL expression reads (ours, BullMQ's and Node's process metrics). */
function metricNames(expr: string): string[] {
  return [...expr.matchAll(/\b(?:proxy_operator|bullmq|process|nodejs)_[a-z0-9_]+/g)].map((m) => m[0]);
}

/** Names as exported: `# TYPE` lines, a histogram also by its _bucket/_sum/_count series. */
function exportedNames(metricsText: string): Set<string> {
  const names = new Set<string>();
  for (const m of metricsText.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name = '', type] = m;
    names.add(name);
    if (type === 'histogram' || type === 'summary') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${name}${suffix}`);
  }
  return names;
}

describe('alerting rules', () => {
  describeWithTool('promtool', 'with promtool', () => {
    test('pass promtool check rules and every unit test in alerts.test.yaml', async () => {
      const check = await promtool(['check', 'rules', 'alerts.yaml']);
      expect(check.out, check.out).toContain('SUCCESS');
      expect(check.code).toBe(0);
      const run = await promtool(['test', 'rules', 'alerts.test.yaml']);
      expect(run.out).toContain('SUCCESS');
      expect(run.code, run.out).toBe(0);
    });
  });

  test('every alert has a unit test in which it fires', async () => {
    const tests = parse(await readFile(ALERT_TESTS, 'utf8')) as { tests: { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[] };
    const firing = new Set(tests.tests.flatMap((t) => t.alert_rule_test.filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname)));
    const alerts = (await alertRules()).map((r) => r.alert);
    expect(alerts).toEqual(
      expect.arrayContaining([
        'ProviderTargetDown',
        'ChecksStale',
        'ProxiesNotReady',
        'QueueBacklog',
        'JobsFailing',
        'GcDeleting',
        'GcFailing',
        'LeaderMissing',
      ]),
    );
    expect(alerts.filter((a) => !firing.has(a))).toEqual([]);
  });
});

describe('the dashboard and the alerts against a running egress up', () => {
  let dir: string;
  let up: EgressProcess;
  let metricsText: string;

  beforeAll(async () => {
    const host = await kvmTestHost();
    dir = await mkdtemp(join(tmpdir(), 'egress-observability-'));
    const config = join(dir, 'egress.yaml');
    await writeFile(
      config,
      [
        'providers:',
        '  - name: local',
        '    type: local',
        '  - name: kvm-test',
        '    type: kvm',
        '    hosts:',
        '      - name: test-host',
        `        address: ${host.ssh.host}`,
        `        port: ${host.ssh.port}`,
        `        user: ${host.ssh.user}`,
        `        privateKeyFile: ${host.ssh.keyFile}`,
        `        knownHostsFile: ${host.ssh.knownHostsFile}`,
        `        pool: ${host.pool}`,
        `        socketPath: ${host.socket}`,
        `        uri: ${host.uri}`,
        '',
      ].join('\n'),
    );
    up = spawnEgress(['up', '--port', '0', '--config', config, '--data-dir', join(dir, 'data'), '--prefix', uniquePrefix()], {
      REDIS_URL: inject('redisUrl'),
      EGRESS_LOG_LEVEL: 'info',
    });
    const { apiUrl, headers } = await waitUpAndLocalReady(up);
    // The kvm check ran (a dial and libvirt calls), so the pool's metrics have samples too.
    await waitFor('the kvm provider to be checked', async () => (await fetch(`${apiUrl}/v1/providerhealths/kvm-test`, { headers })).status === 200, 60_000);
    metricsText = await (await fetch(`${apiUrl}/metrics`, { headers })).text();
  }, 120_000);
  afterAll(async () => {
    await up?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('every metric the dashboard queries is exported', async () => {
    const exported = exportedNames(metricsText);
    const used = [...new Set((await dashboardExprs()).flatMap(metricNames))];
    expect(used.length).toBeGreaterThan(15);
    expect(used.filter((n) => !exported.has(n))).toEqual([]);
  });

  test('every metric the alerts query is exported', async () => {
    const exported = exportedNames(metricsText);
    const used = [...new Set((await alertRules()).flatMap((r) => metricNames(r.expr)))];
    expect(used.filter((n) => !exported.has(n))).toEqual([]);
  });

  test('Node’s process metrics keep their conventional names; ours carry proxy_operator_', () => {
    const exported = exportedNames(metricsText);
    expect(exported).toContain('process_cpu_seconds_total');
    expect(exported).toContain('nodejs_eventloop_lag_p99_seconds');
    expect([...exported].filter((n) => n.startsWith('proxy_operator_process_') || n.startsWith('proxy_operator_nodejs_'))).toEqual([]);
    expect(exported).toContain('proxy_operator_scheduler_leader');
    expect(metricsText).toMatch(/^proxy_operator_scheduler_leader 1$/m);
    expect(metricsText).toMatch(/^proxy_operator_check_interval_seconds \d+$/m);
  });
});
