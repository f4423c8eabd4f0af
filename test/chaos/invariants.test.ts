import { describe, expect, test } from 'vitest';
import { faultSchedule } from './faults.ts';
import {
  checkConverged,
  checkDeletions,
  checkHealthCadence,
  checkInstances,
  checkJobs,
  checkNoDoubleDuringRun,
  checkNoLeftovers,
  checkSecrets,
  type ObservedInstance,
  type ObservedProxy,
} from './invariants.ts';
import { formatReport } from './run.ts';

// The checker must be able to fail: each invariant is shown a cluster that breaks it.
const ready = (name: string, provider: string, instanceName = `ep-${name}-0000abcd`): ObservedProxy => ({ name, provider, phase: 'Ready', instanceName });
const inst = (provider: string, proxy: string, name = `ep-${proxy}-0000abcd`): ObservedInstance => ({ provider, name, proxy });

describe('the chaos invariants', () => {
  test('a healthy cluster passes every check', () => {
    const proxies = [ready('a', 'local'), ready('b', 'k8s')];
    expect(
      checkConverged(
        new Map([
          ['a', 'local'],
          ['b', 'k8s'],
          ['c', null],
        ]),
        proxies,
      ),
    ).toEqual([]);
    expect(checkInstances(proxies, [inst('local', 'a'), inst('k8s', 'b')])).toEqual([]);
    expect(checkNoDoubleDuringRun([inst('local', 'a'), inst('k8s', 'b')])).toEqual([]);
    expect(checkJobs([{ queue: 'checks', id: '1', state: 'completed', attemptsMade: 1 }])).toEqual([]);
  });

  test('a doubled instance: two on one provider, or one name on two providers at once', () => {
    const doubled = checkInstances([ready('a', 'gce')], [inst('gce', 'a'), inst('gce', 'a', 'ep-a-ffff0000')]);
    expect(doubled).toEqual([expect.objectContaining({ invariant: 'one instance per proxy', objects: ['proxy/a', 'gce/ep-a-0000abcd', 'gce/ep-a-ffff0000'] })]);
    expect(checkNoDoubleDuringRun([inst('local', 'a'), inst('k8s', 'a')])).toEqual([
      expect.objectContaining({ invariant: 'one instance per proxy', objects: ['local/ep-a-0000abcd', 'k8s/ep-a-0000abcd'] }),
    ]);
  });

  test('a leaked instance: a deleted proxy still has one, or a moved one left its old instance', () => {
    expect(checkInstances([], [inst('k8s', 'gone')])).toEqual([
      expect.objectContaining({ invariant: 'no leaked instance', objects: ['k8s/ep-gone-0000abcd'] }),
    ]);
    expect(checkInstances([ready('m', 'gce')], [inst('gce', 'm'), inst('local', 'm')])).toEqual([
      expect.objectContaining({ invariant: 'no leaked instance', objects: ['proxy/m', 'local/ep-m-0000abcd'] }),
    ]);
  });

  test('a leaked Secret: the credentials of a proxy no longer on kubernetes', () => {
    const secrets = [inst('k8s', 'a', 'secret/ep-a-0000abcd'), inst('k8s', 'moved', 'secret/ep-moved-0000abcd')];
    expect(checkSecrets([ready('a', 'k8s'), ready('moved', 'gce')], secrets)).toEqual([
      expect.objectContaining({ invariant: 'no leaked instance', objects: ['k8s/secret/ep-moved-0000abcd'] }),
    ]);
  });

  test('a lost job: gone from its queue, failed or retrying without a reason, or still active', () => {
    const found = checkJobs([
      { queue: 'checks', id: 'lost', state: 'missing', attemptsMade: 0 },
      { queue: 'reconcile', id: 'silent', state: 'failed', attemptsMade: 5 },
      { queue: 'reconcile', id: 'retry', state: 'delayed', attemptsMade: 2 },
      { queue: 'checks', id: 'stuck', state: 'active', attemptsMade: 1 },
      { queue: 'reconcile', id: 'ok', state: 'failed', attemptsMade: 5, failedReason: 'chaos: injected 500' },
    ]);
    expect(found.map((v) => v.objects[0])).toEqual(['checks/lost', 'reconcile/silent', 'reconcile/retry', 'checks/stuck']);
    expect(new Set(found.map((v) => v.invariant))).toEqual(new Set(['no job lost']));
  });

  test('not converged: a proxy missing, on the wrong provider, stuck, Failed for no fault, or deleted but present', () => {
    const found = checkConverged(
      new Map<string, string | null>([
        ['missing', 'local'],
        ['wrong', 'gce'],
        ['stuck', 'k8s'],
        ['broken', 'local'],
        ['faulted', 'gce'],
        ['deleted', null],
      ]),
      [
        ready('wrong', 'k8s'),
        { name: 'stuck', provider: 'k8s', phase: 'Provisioning' },
        { name: 'broken', provider: 'local', phase: 'Failed', lastError: 'image not found' },
        { name: 'faulted', provider: 'gce', phase: 'Failed', lastError: 'moving from gce: 500 chaos: injected 500' },
        ready('deleted', 'local'),
      ],
    );
    expect(found.map((v) => v.objects[0])).toEqual(['proxy/missing', 'proxy/wrong', 'proxy/stuck', 'proxy/broken', 'proxy/deleted']);
  });

  test('a silent provider: a gap past the interval with no fault in it breaks the cadence; a fault excuses it', () => {
    const o = { intervalMs: 10_000, slackMs: 5000, fromMs: 0, untilMs: 60_000 };
    const publications = new Map([['gce', [5000, 15_000, 25_000, 50_000, 58_000]]]);
    expect(checkHealthCadence(publications, [], o)).toEqual([
      expect.objectContaining({ objects: ['providerhealth/gce'], detail: expect.stringContaining('from 25000 ms to 50000 ms') }),
    ]);
    expect(checkHealthCadence(publications, [{ fromMs: 30_000, untilMs: 35_000, what: 'SIGKILL publisher' }], o)).toEqual([]);
  });

  test('a process left behind is named', () => {
    expect(checkNoLeftovers([{ pid: 42, command: 'node proxy-process.js /x' }])).toEqual([
      { invariant: 'no process left behind', objects: ['pid/42'], detail: 'node proxy-process.js /x' },
    ]);
  });

  test('a seed replays the same schedule; the report names the seed, the timeline and each violation', () => {
    expect(faultSchedule(7, 30)).toEqual(faultSchedule(7, 30));
    expect(faultSchedule(7, 30)).not.toEqual(faultSchedule(8, 30));
    const kinds = new Set(faultSchedule(7, 200).map((s) => s.fault.kind));
    expect(kinds).toEqual(
      new Set(['sigkill', 'sigstop', 'redis-restart', 'provider-500', 'provider-hang', 'network-cut', 'local-proxy-kill', 'inventory-malformed']),
    );
    const report = formatReport({
      figures: {
        seed: 7,
        reconciles: 1,
        faults: 1,
        retries: 0,
        stalled: 0,
        settleMs: undefined,
        duplicates: 1,
        leaks: 0,
        gcCollected: [],
        failedAtEnd: [],
        publications: {},
        runMs: 1,
        workload: { applies: 1, moves: 0, deletes: 0, reapplies: 0, checks: 0, unanswered: 0, refused: 0 },
      },
      timeline: [{ atMs: 100, untilMs: 900, what: 'SIGKILL worker-2, restarted after 500 ms' }],
      violations: checkNoDoubleDuringRun([inst('local', 'a'), inst('k8s', 'a')]),
    });
    expect(report).toContain('--seed 7');
    expect(report).toContain('SIGKILL worker-2');
    expect(report).toContain('one instance per proxy: local/ep-a-0000abcd, k8s/ep-a-0000abcd');
  });

  test('an instance of another fleet, an unlabelled one, or one of a live proxy deleted', () => {
    const fleet = 'chaos-1';
    const gone = (name: string, f: string | undefined, atMs = 100) => ({ provider: 'gce', name, fleet: f, proxy: 'a', atMs });
    const samples = [
      { atMs: 0, proxies: [ready('a', 'gce')] },
      { atMs: 1000, proxies: [ready('a', 'gce')] },
    ];
    expect(checkDeletions(fleet, [gone('ep-a-0000abcd', fleet)], [], samples)).toEqual([]);
    // Collected between two samples that both show it as the live proxy's instance.
    const live = checkDeletions(fleet, [], [{ provider: 'gce', instance: 'ep-a-0000abcd', atMs: 500 }], samples);
    expect(live).toEqual([
      expect.objectContaining({ invariant: 'no instance of a live Proxy or another fleet deleted', objects: ['proxy/a', 'gce/ep-a-0000abcd'] }),
    ]);
    // The proxy had moved to another provider by then: its old instance is an orphan there.
    const moved = [{ atMs: 0, proxies: [ready('a', 'k8s')] }, ...samples.slice(1)];
    expect(checkDeletions(fleet, [], [{ provider: 'gce', instance: 'ep-a-0000abcd', atMs: 500 }], moved)).toEqual([]);
    const foreign = checkDeletions(fleet, [gone('ep-theirs-0', 'other'), gone('web-0', undefined)], [], samples);
    expect(foreign.map((v) => v.objects)).toEqual([['gce/ep-theirs-0'], ['gce/web-0']]);
  });
});
