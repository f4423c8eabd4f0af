/**
 * ProxyPool documents, valid and invalid, in one place: the API's schema (poolDocumentSchema in
 * src/model/pool-resource.ts) and the generated ProxyPool CRD's schema are both held to them
 * (test/crds/crd-fixtures.test.ts). `apiErrors` is what the schema answers for the document alone.
 *
 * `crd` says what the CRD's schema does with an invalid document: `rejects`, or `api-only` for the
 * rules OpenAPI cannot express (listed in docs/kubernetes-store.md). The fake kube-apiserver
 * makes the checks a real one makes (label keys and values, the CRD's metadata.name restrictions).
 */
import type { InvalidProxyFixture } from './proxy-fixtures.ts';

export type InvalidPoolFixture = InvalidProxyFixture;

const template = { spec: { provider: 'local' } };

function pool(name: string, spec: Record<string, unknown>, metadata: Record<string, unknown> = {}): Record<string, unknown> {
  return { kind: 'ProxyPool', metadata: { name, ...metadata }, spec };
}

export const VALID_POOL_DOCUMENTS: readonly { what: string; document: Record<string, unknown> }[] = [
  { what: 'the least: a name, replicas and a provider', document: pool('crawl', { replicas: 3, template }) },
  {
    what: 'a spread without a template provider, template labels, maxAge and maxSurge',
    document: pool(
      'spread',
      {
        replicas: 10,
        template: { metadata: { labels: { team: 'crawl' } }, spec: {} },
        spread: [
          { provider: 'gcp-us', weight: 70 },
          { provider: 'kvm-home', placement: 'beelink', weight: 30 },
        ],
        maxAge: '1h30m',
        maxSurge: 2,
      },
      { labels: { 'example.com/tier': 'gold' } },
    ),
  },
  { what: 'no replicas wanted, the longest name (57 characters)', document: pool(`p${'o'.repeat(55)}l`, { replicas: 0, template }) },
  {
    what: 'the largest replicas and surge, a placement, maxAge of 10s',
    document: pool('big', { replicas: 5000, maxSurge: 5000, maxAge: '10s', template: { spec: { provider: 'gce', placement: 'z'.repeat(63) } } }),
  },
  {
    what: 'autoscaled (no replicas) with a monthly traffic budget as a quantity',
    document: pool('auto', {
      template,
      autoscale: { minReplicas: 0, maxReplicas: 20, picksPerMember: 30, idleAfter: '10m', scaleDownDelay: '30s' },
      budget: { window: 'month', traffic: '2TiB' },
    }),
  },
  {
    what: 'a daily budget of spend and traffic in bytes, stopping picks',
    document: pool('budgeted', { replicas: 2, template, budget: { window: 'day', spend: 12.5, traffic: 500000000000, stopPicks: true } }),
  },
];

export const INVALID_POOL_DOCUMENTS: readonly InvalidPoolFixture[] = [
  {
    what: 'a name of 58 characters (no room for the members’ suffix)',
    document: pool('n'.repeat(58), { replicas: 1, template }),
    apiErrors: [`metadata.name: expected at most 57 characters (member names add a 6-character suffix), got "${'n'.repeat(58)}"`],
    crd: 'rejects',
  },
  { what: 'no spec', document: { kind: 'ProxyPool', metadata: { name: 'a' } }, apiErrors: ['spec: required'], crd: 'rejects' },
  { what: 'no template', document: pool('a', { replicas: 1 }), apiErrors: ['spec.template: required'], crd: 'rejects' },
  { what: 'negative replicas', document: pool('a', { replicas: -1, template }), apiErrors: ['spec.replicas: expected at least 0, got -1'], crd: 'rejects' },
  {
    what: 'replicas above 5000',
    document: pool('a', { replicas: 5001, template }),
    apiErrors: ['spec.replicas: expected at most 5000, got 5001'],
    crd: 'rejects',
  },
  { what: 'replicas as a string', document: pool('a', { replicas: '3', template }), apiErrors: ['spec.replicas: expected a number, got "3"'], crd: 'rejects' },
  {
    what: 'a spread weight of 0',
    document: pool('a', { replicas: 1, template: { spec: {} }, spread: [{ provider: 'gce', weight: 0 }] }),
    apiErrors: ['spec.spread[0].weight: expected at least 1, got 0'],
    crd: 'rejects',
  },
  { what: 'an empty spread', document: pool('a', { replicas: 1, template, spread: [] }), apiErrors: ['spec.spread: must not be empty'], crd: 'rejects' },
  {
    what: 'a spread provider that is not a name',
    document: pool('a', { replicas: 1, template: { spec: {} }, spread: [{ provider: 'Nowhere!', weight: 1 }] }),
    apiErrors: ['spec.spread[0].provider: expected a lower-case name of letters, digits and dashes, got "Nowhere!"'],
    crd: 'rejects',
  },
  {
    what: 'a maxAge that is not a duration',
    document: pool('a', { replicas: 1, template, maxAge: 'soon' }),
    apiErrors: ['spec.maxAge: expected a duration of at least 10s, such as 30m or 24h, got "soon"'],
    crd: 'rejects',
  },
  { what: 'maxSurge 0', document: pool('a', { replicas: 1, template, maxSurge: 0 }), apiErrors: ['spec.maxSurge: expected at least 1, got 0'], crd: 'rejects' },
  {
    what: 'an unknown key in spec (kubectl sends fieldValidation=Strict)',
    document: pool('a', { replicas: 1, template, colour: 'red' }),
    apiErrors: ['spec: unknown key "colour"'],
    crd: 'rejects',
  },
  {
    what: 'an unknown key in the template’s spec',
    document: pool('a', { replicas: 1, template: { spec: { provider: 'local', size: 'xl' } } }),
    apiErrors: ['spec.template.spec: unknown key "size"'],
    crd: 'rejects',
  },
  {
    what: 'an empty template placement',
    document: pool('a', { replicas: 1, template: { spec: { provider: 'local', placement: '' } } }),
    apiErrors: ['spec.template.spec.placement: must not be empty'],
    crd: 'rejects',
  },
  {
    what: 'neither a template provider nor a spread',
    document: pool('no-provider', { replicas: 1, template: { spec: {} } }),
    apiErrors: ['spec.template.spec.provider: required when spec.spread is not given'],
    crd: 'api-only',
  },
  {
    what: 'the pool label in the template (the pool sets it)',
    document: pool('reserved-label', { replicas: 1, template: { metadata: { labels: { 'egress-proxies.io/pool': 'b' } }, spec: { provider: 'local' } } }),
    apiErrors: ['spec.template.metadata.labels.egress-proxies.io/pool: is set by the pool itself'],
    crd: 'api-only',
  },
  {
    what: 'one provider and placement twice in the spread',
    document: pool('twice', {
      replicas: 1,
      template: { spec: {} },
      spread: [
        { provider: 'gce', weight: 1 },
        { provider: 'gce', weight: 2 },
      ],
    }),
    apiErrors: ['spec.spread[1]: names the same provider and placement twice'],
    crd: 'api-only',
  },
  {
    what: 'a maxAge under 10s',
    document: pool('young', { replicas: 1, template, maxAge: '5s' }),
    apiErrors: ['spec.maxAge: expected a duration of at least 10s, such as 30m or 24h, got "5s"'],
    crd: 'api-only',
  },
  {
    what: 'a template label key that is not a label key (template labels are not the object’s labels: the API server does not check them)',
    document: pool('bad-label', { replicas: 1, template: { metadata: { labels: { '-bad': 'x' } }, spec: { provider: 'local' } } }),
    apiErrors: ['spec.template.metadata.labels.-bad: not an accepted key: expected a label key such as team or example.com/team'],
    crd: 'api-only',
  },
  {
    what: 'neither replicas nor autoscale',
    document: pool('no-count', { template }),
    apiErrors: ['spec.replicas: required when spec.autoscale is not given'],
    crd: 'api-only',
  },
  {
    what: 'a budget without a limit',
    document: pool('no-limit', { replicas: 1, template, budget: { window: 'day' } }),
    apiErrors: ['spec.budget: needs a limit: spend, traffic or both'],
    crd: 'api-only',
  },
  {
    what: 'a budget window that is neither day nor month',
    document: pool('weekly', { replicas: 1, template, budget: { window: 'week', spend: 1 } }),
    apiErrors: ['spec.budget.window: expected one of day, month, got "week"'],
    crd: 'rejects',
  },
  {
    what: 'autoscale with maxReplicas below minReplicas',
    document: pool('upside-down', { template, autoscale: { minReplicas: 3, maxReplicas: 2, picksPerMember: 1, idleAfter: '1m' } }),
    apiErrors: ['spec.autoscale.maxReplicas: must be at least minReplicas (3), got 2'],
    crd: 'api-only',
  },
  {
    what: 'an idleAfter that is not a duration',
    document: pool('sleepy', { template, autoscale: { minReplicas: 0, maxReplicas: 2, picksPerMember: 1, idleAfter: 'soon' } }),
    apiErrors: ['spec.autoscale.idleAfter: expected a duration of at least 1s, such as 30s or 10m, got "soon"'],
    crd: 'rejects',
  },
];
