import { describe, test } from 'vitest';
import type { Proxy } from '../../src/model/proxy-resource.ts';
import { afterPass, afterProbeFailure } from '../../src/proxies/readiness-plan.ts';
import { targetOf, type ReconcileOutcome } from '../../src/proxies/reconcile-decisions.ts';
import { expectSeen, FLEET, instance, moving, NAME, NOW, POLICY, proxy, ready, see, URL, type Row } from '../support/reconcile-plan-view.ts';

/**
 * The reconcile's decisions after its readiness probe (src/proxies/readiness-plan.ts), one row per
 * branch: Ready, a pass counted, a failure counted, an eviction, a replacement; and what a user sees.
 */

const at = (p: Proxy) => targetOf(p, FLEET);
const pass = (id: string) => (p: Proxy) => afterPass(p, at(p), instance({ id }), URL, '203.0.113.9', POLICY);
const probeFails =
  (policy = POLICY) =>
  (p: Proxy) =>
    afterProbeFailure(p, at(p), instance({ id: 'i-1' }), URL, { cause: 'timeout', message: 'tcp: timed out' }, policy, NOW);
const retry = (why: string): ReconcileOutcome => ({ kind: 'retry-later', why });
const unready = (since: string) => ready({ phase: 'Provisioning', probeFailures: 3, unreadySince: since });

const rows: Row[] = [
  {
    branch: 'a pass by a proxy coming back counts, below --probe-successes',
    given: unready('2026-03-01T11:58:00.000Z'),
    decide: pass('i-1'),
    expected: {
      decision: 'finish',
      outcome: retry('readiness probe passed (1 of 2 in a row needed to return)'),
      status: { phase: 'Provisioning', probeSuccesses: 1 },
      events: [],
    },
  },
  {
    branch: 'a passed probe makes a new proxy Ready',
    stored: proxy({ status: { phase: 'Provisioning', lastError: 'pulling' } }),
    decide: pass('i-2'),
    expected: {
      decision: 'finish',
      outcome: { kind: 'ready', url: URL },
      status: { phase: 'Ready', egressIp: '203.0.113.9', probeFailures: 0, lastError: undefined },
      events: [`Ready: ready at ${URL}, egress IP 203.0.113.9`],
    },
  },
  {
    branch: 'a pass of a Ready proxy records no event',
    given: ready(),
    decide: pass('i-1'),
    expected: { decision: 'finish', outcome: { kind: 'ready', url: URL }, status: { phase: 'Ready', egressIp: '203.0.113.9' }, events: [] },
  },
  {
    branch: 'a proxy moved away while its probe ran is left for the move',
    stored: moving(),
    decide: pass('i-2'),
    expected: { decision: 'finish', outcome: { kind: 'ready', url: URL }, status: 'unchanged' },
  },
  {
    branch: 'a failed probe evicts a Ready proxy',
    given: ready(),
    decide: probeFails(),
    expected: {
      decision: 'probe-failed',
      evicted: 'timeout',
      replaced: undefined,
      outcome: retry('readiness probe failed (1 in a row): tcp: timed out'),
      status: { phase: 'Provisioning', probeFailures: 1, unreadySince: NOW.toISOString(), lastError: 'tcp: timed out' },
      events: ['NotReady: out of discovery (timeout): tcp: timed out'],
    },
  },
  {
    branch: 'a failed probe below --probe-failures keeps it Ready',
    given: ready(),
    decide: probeFails({ ...POLICY, failureThreshold: 2 }),
    expected: { decision: 'probe-failed', evicted: undefined, status: { phase: 'Ready', probeFailures: 1, unreadySince: undefined }, events: [] },
  },
  {
    branch: 'unready past replaceAfterMs: its instance is replaced',
    given: unready('2026-03-01T11:50:00.000Z'),
    decide: probeFails(),
    expected: {
      decision: 'probe-failed',
      evicted: undefined,
      replaced: NAME,
      status: {
        phase: 'Provisioning',
        probeFailures: 0,
        unreadySince: undefined,
        lastError: 'replaced: unready since 2026-03-01T11:50:00.000Z (tcp: timed out)',
      },
      events: [`InstanceDeleted: instance ${NAME} on local deleted: replaced after being unready (unready since 2026-03-01T11:50:00.000Z)`],
    },
  },
];

describe('the reconcile plan, after the readiness probe', () => {
  test.each(rows)('$branch', ({ given = proxy(), stored, decide, expected }) => {
    expectSeen(see(decide(given), given, stored ?? given), expected);
  });
});
