import { describe, test } from 'vitest';
import type { Proxy } from '../../src/model/proxy-resource.ts';
import { targetOf, type ReconcileOutcome, type Removal } from '../../src/proxies/reconcile-decisions.ts';
import * as plan from '../../src/proxies/reconcile-plan.ts';
import { expectSeen, FLEET, instance, LIFECYCLES, moving, NAME, proxy, ready, see, URL, type Decision, type Row } from '../support/reconcile-plan-view.ts';

/**
 * The reconcile's decisions up to the readiness probe (src/proxies/reconcile-plan.ts), one row per
 * branch, without a store, a lifecycle or a probe: what the plan says to do and what a user then sees.
 * After the probe: readiness-plan.test.ts. The executor carrying them out (src/proxies/reconcile.ts)
 * is held to the same behaviour by reconcile.test.ts.
 */

const at = (p: Proxy) => targetOf(p, FLEET);
const start = (p: Proxy): Decision => plan.planStart(p, FLEET, LIFECYCLES);
const deleting = { deletionRequestedAt: '2026-03-01T11:59:00.000Z' };
const GONE = `instance ${NAME} is on provider "gone", which is not configured in this worker or cannot host proxies, so it cannot be removed; configure the provider again, or delete the proxy with --orphan to forget it and leave the instance`;
/** The removal of an instance on a provider this worker does not have, as the plan words it. */
const unreachable = (): Removal => {
  const how = plan.removalAt({ provider: 'gone' }, NAME, LIFECYCLES);
  return how.kind === 'unreachable' ? how : { kind: 'removed' };
};
const onDelete =
  (removal: Removal, madeThere = true) =>
  (p: Proxy) =>
    plan.afterDeletionRemoval(p, at(p), { provider: 'local' }, madeThere, removal);
const onMove = (removal: Removal) => (p: Proxy) => plan.afterMoveRemoval(p, at(p), { provider: 'local' }, removal);
const record = (p: Proxy): Decision => {
  const update = plan.locationRecord(p, at(p));
  return update ? { kind: 'write', status: update } : { kind: 'no-write' };
};
const awayFrom = (here: Proxy, current: Proxy | undefined): Decision => plan.movedAway(current, at(here)) ?? { kind: 'no-write' };
const retry = (why: string): ReconcileOutcome => ({ kind: 'retry-later', why });

const rows: Row[] = [
  // Deletion
  {
    branch: 'deletion removes the instance where the spec points',
    given: ready({}, { metadata: deleting }),
    decide: start,
    expected: { decision: 'delete', places: [{ provider: 'local' }] },
  },
  {
    branch: 'deletion with --orphan removes no instance',
    given: ready({}, { metadata: { ...deleting, orphanInstance: true } }),
    decide: start,
    expected: { decision: 'delete', places: [] },
  },
  {
    branch: 'deletion during a move removes the instance at both places',
    given: moving({ metadata: deleting }),
    decide: start,
    expected: { decision: 'delete', places: [{ provider: 'local' }, { provider: 'kvm', placement: 'beelink' }] },
  },
  {
    branch: 'deletion of a spec that broke its schema clears only the recorded place',
    given: moving({ metadata: deleting, specProblems: ['spec.colour: unknown key'] }),
    decide: start,
    expected: { decision: 'delete', places: [{ provider: 'local' }] },
  },
  {
    branch: 'deletion waits while the instance is still being deleted',
    given: ready(),
    decide: onDelete({ kind: 'pending' }),
    expected: { decision: 'finish', outcome: retry(`instance ${NAME} is still being deleted`), status: 'unchanged', events: [] },
  },
  {
    branch: 'deletion on an unconfigured provider stays Terminating with the reason',
    given: ready({ phase: 'Terminating' }),
    decide: onDelete(unreachable()),
    expected: { decision: 'finish', outcome: { kind: 'failed', message: GONE }, status: { phase: 'Terminating', lastError: GONE }, events: [] },
  },
  {
    branch: 'deletion on an unconfigured provider writes its reason once',
    given: ready(),
    stored: ready({ lastError: GONE }),
    decide: onDelete(unreachable()),
    expected: { decision: 'finish', status: 'unchanged' },
  },
  {
    branch: 'deletion records the instance deleted where it was made',
    given: ready(),
    decide: onDelete({ kind: 'removed' }),
    expected: { decision: 'go-on', events: [`InstanceDeleted: instance ${NAME} on local deleted: the proxy was deleted`] },
  },
  {
    branch: 'deletion only looks at the other place of a move',
    given: ready(),
    decide: onDelete({ kind: 'removed' }, false),
    expected: { decision: 'go-on', events: [] },
  },
  {
    branch: 'deletion done forgets the proxy',
    given: ready(),
    decide: plan.deletionDone,
    expected: { decision: 'forget', outcome: { kind: 'deleted' }, events: ['Deleted: instance gone; the proxy is removed'] },
  },
  // Before any provider is asked
  {
    branch: 'Failed is final for this generation',
    given: proxy({ status: { phase: 'Failed', observedGeneration: 2, lastError: 'quota' } }),
    decide: start,
    expected: { decision: 'finish', outcome: { kind: 'failed', message: 'quota' }, status: 'unchanged', events: [] },
  },
  {
    branch: 'a new generation of a Failed proxy is tried again',
    given: proxy({ status: { phase: 'Failed', observedGeneration: 1 } }),
    decide: start,
    expected: { decision: 'provision', lifecycle: 'the local lifecycle', instanceName: NAME },
  },
  {
    branch: 'a name the API refuses is Failed',
    given: proxy({ name: 'Bad_Name' }),
    decide: start,
    expected: {
      decision: 'fail',
      outcome: { kind: 'failed', message: 'metadata.name: expected a lower-case name of letters, digits and dashes, at most 63 characters, got "Bad_Name"' },
      status: { phase: 'Failed', observedGeneration: 2 },
    },
  },
  {
    branch: 'a spec that broke its schema is Failed with its problems',
    given: proxy({ specProblems: ['spec.provider: required'] }),
    decide: start,
    expected: {
      decision: 'fail',
      status: { phase: 'Failed', lastError: 'Proxy "web": spec.provider: required' },
      events: ['Failed: Proxy "web": spec.provider: required'],
    },
  },
  {
    branch: 'an unconfigured provider is Failed',
    given: proxy({ spec: { provider: 'gce' } }),
    decide: start,
    expected: { decision: 'fail', status: { phase: 'Failed', lastError: 'provider "gce" is not configured in this worker or cannot host proxies' } },
  },
  {
    branch: 'without credentials it looks again later',
    decide: plan.missingCredentials,
    expected: { decision: 'finish', outcome: retry('credentials not written yet'), status: 'unchanged', events: [] },
  },
  // A move
  {
    branch: 'a move waits for the old instance to go, out of discovery',
    given: moving(),
    decide: onMove({ kind: 'pending' }),
    expected: {
      decision: 'finish',
      outcome: retry(`moving from provider "local": instance ${NAME} there is still being deleted`),
      status: { phase: 'Provisioning', url: undefined, egressIp: undefined, instanceId: undefined, instanceName: NAME },
    },
  },
  {
    branch: 'a move from an unconfigured provider fails (not Failed: configured again, it goes on)',
    given: moving(),
    decide: onMove(unreachable()),
    expected: { decision: 'finish', outcome: { kind: 'failed', message: GONE }, status: { phase: 'Provisioning', lastError: GONE }, events: [] },
  },
  {
    branch: 'a move records the old instance deleted',
    given: moving(),
    decide: onMove({ kind: 'removed' }),
    expected: { decision: 'go-on', events: [`InstanceDeleted: instance ${NAME} on local deleted: the proxy moved (now on provider "kvm" at "beelink")`] },
  },
  {
    branch: 'the location is recorded before the create',
    decide: record,
    expected: { decision: 'write', status: { phase: 'Provisioning', instanceName: NAME, instanceLocation: { provider: 'local' }, observedGeneration: 2 } },
  },
  {
    branch: 'the new location of a move is recorded without the old endpoint',
    given: moving(),
    decide: record,
    expected: { decision: 'write', status: { phase: 'Provisioning', instanceLocation: { provider: 'kvm', placement: 'beelink' }, url: undefined } },
  },
  {
    branch: 'a Ready proxy without a recorded location stays Ready as it is recorded',
    given: ready({ instanceLocation: undefined }),
    decide: record,
    expected: { decision: 'write', status: { phase: 'Ready', instanceLocation: { provider: 'local' }, url: URL } },
  },
  { branch: 'a recorded location is not written again', given: ready(), decide: record, expected: { decision: 'no-write' } },
  // The instance
  {
    branch: 'a provisioning error is Failed with the instance name',
    decide: (p) => plan.provisioningFailed(at(p), 'quota exceeded'),
    expected: { decision: 'fail', status: { phase: 'Failed', lastError: 'quota exceeded', instanceName: NAME }, events: ['Failed: quota exceeded'] },
  },
  {
    branch: 'moved away meanwhile from a place still recorded: look again, the next reconcile removes it',
    given: ready(),
    decide: (p) => awayFrom(p, moving()),
    expected: {
      decision: 'moved-away',
      deleteInstance: false,
      outcome: retry(`the proxy changed while instance ${NAME} was being made on provider "local"; looking again`),
    },
  },
  {
    branch: 'deleted meanwhile: the unclaimed instance is deleted now',
    given: ready(),
    decide: (p) => awayFrom(p, undefined),
    expected: { decision: 'moved-away', deleteInstance: true },
  },
  { branch: 'still where it was made: no look again', given: ready(), decide: (p) => awayFrom(p, ready()), expected: { decision: 'no-write' } },
  {
    branch: 'an instance that failed is Failed with its id',
    decide: (p) => plan.afterInstance(p, at(p), instance({ state: 'failed', message: 'image not found' })),
    expected: { decision: 'fail', status: { phase: 'Failed', lastError: 'image not found', instanceName: NAME, instanceId: 'i-2' } },
  },
  {
    branch: 'an instance still starting: Provisioning, look again',
    decide: (p) => plan.afterInstance(p, at(p), instance({ state: 'provisioning', message: 'pulling', endpoint: undefined })),
    expected: {
      decision: 'finish',
      outcome: retry(`instance ${NAME} is provisioning: pulling`),
      status: { phase: 'Provisioning', instanceId: 'i-2', lastError: 'pulling' },
      events: [],
    },
  },
  {
    branch: 'a new running instance is probed, its start recorded',
    decide: (p) => plan.afterInstance(p, at(p), instance()),
    expected: { decision: 'probe', url: URL, events: [`InstanceStarted: instance ${NAME} is running at ${URL}`] },
  },
  {
    branch: 'a first instance is created for the apply',
    decide: (p) => ({ kind: 'go-on', events: plan.instanceSeen(p, at(p), instance()) }),
    expected: { decision: 'go-on', events: [`InstanceCreated: instance ${NAME} (i-2) on local: the proxy was applied`] },
  },
  {
    branch: 'the instance after an unready one was created to replace it',
    given: proxy({ status: { instanceId: 'i-1', lastError: 'replaced: unready since 2026-03-01T11:50:00.000Z (tcp: timed out)' } }),
    decide: (p) => ({ kind: 'go-on', events: plan.instanceSeen(p, at(p), instance()) }),
    expected: { decision: 'go-on', events: [`InstanceCreated: instance ${NAME} (i-2) on local: replaced after being unready`] },
  },
];

describe('the reconcile plan, to the readiness probe', () => {
  test.each(rows)('$branch', ({ given = proxy(), stored, decide, expected }) => {
    expectSeen(see(decide(given), given, stored ?? given), expected);
  });
});
