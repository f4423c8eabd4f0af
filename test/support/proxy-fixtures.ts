/**
 * Proxy documents the API's tests use, valid and invalid, in one place: the API's validation
 * (src/proxies/parse-documents.ts) and the generated Proxy CRD's schema are both held to them
 * (test/crds/crd-fixtures.test.ts). `apiErrors` is what the API answers for a document alone.
 *
 * `crd` says what the CRD's schema does with an invalid document: `rejects`, or `api-only` for the
 * rules OpenAPI cannot express (they are listed in docs/kubernetes-store.md). The fake
 * kube-apiserver makes the checks a real one makes (label keys and values, the CRD's metadata.name restrictions).
 */
export interface InvalidProxyFixture {
  what: string;
  document: Record<string, unknown>;
  apiErrors: string[];
  crd: 'rejects' | 'api-only';
}

export const VALID_PROXY_DOCUMENTS: readonly { what: string; document: Record<string, unknown> }[] = [
  { what: 'the least: a name and a provider', document: { metadata: { name: 'web' }, spec: { provider: 'local' } } },
  {
    what: 'labels and a placement',
    document: { metadata: { name: 'crawl-1', labels: { team: 'crawl', 'example.com/tier': 'gold' } }, spec: { provider: 'kvm-home', placement: 'beelink' } },
  },
  { what: 'the longest name and placement', document: { metadata: { name: `a${'b'.repeat(61)}c` }, spec: { provider: 'gce', placement: 'z'.repeat(63) } } },
  { what: 'an empty label value', document: { metadata: { name: 'd3', labels: { team: '' } }, spec: { provider: 'other' } } },
];

export const INVALID_PROXY_DOCUMENTS: readonly InvalidProxyFixture[] = [
  {
    what: 'a name with capitals and an underscore',
    document: { metadata: { name: 'Bad_Name' }, spec: { provider: 'local' } },
    apiErrors: ['metadata.name: expected a lower-case name of letters, digits and dashes, got "Bad_Name"'],
    crd: 'rejects',
  },
  {
    what: 'a name of 64 characters',
    document: { metadata: { name: 'n'.repeat(64) }, spec: { provider: 'local' } },
    apiErrors: ['metadata.name: expected at most 63 characters, got 64 characters'],
    crd: 'rejects',
  },
  { what: 'no spec', document: { metadata: { name: 'a' } }, apiErrors: ['spec: required'], crd: 'rejects' },
  { what: 'no provider', document: { metadata: { name: 'j' }, spec: {} }, apiErrors: ['spec.provider: required'], crd: 'rejects' },
  {
    what: 'a provider that is a number',
    document: { metadata: { name: 'a' }, spec: { provider: 5 } },
    apiErrors: ['spec.provider: expected a string, got 5'],
    crd: 'rejects',
  },
  {
    what: 'a provider that is not a name',
    document: { metadata: { name: 'a' }, spec: { provider: 'Nowhere!' } },
    apiErrors: ['spec.provider: expected a lower-case name of letters, digits and dashes, got "Nowhere!"'],
    crd: 'rejects',
  },
  {
    what: 'an empty placement',
    document: { metadata: { name: 'a' }, spec: { provider: 'local', placement: '' } },
    apiErrors: ['spec.placement: must not be empty'],
    crd: 'rejects',
  },
  {
    what: 'a placement of 64 characters',
    document: { metadata: { name: 'a' }, spec: { provider: 'local', placement: 'p'.repeat(64) } },
    apiErrors: ['spec.placement: expected at most 63 characters, got 64 characters'],
    crd: 'rejects',
  },
  {
    what: 'an unknown key in spec (kubectl sends fieldValidation=Strict)',
    document: { metadata: { name: 'a' }, spec: { provider: 'local', colour: 'red' } },
    apiErrors: ['spec: unknown key "colour"'],
    crd: 'rejects',
  },
  {
    what: 'a bad label key and a label value of 70 characters (the API server checks labels itself)',
    document: { metadata: { name: 'a', labels: { '-bad': 'x', team: 'v'.repeat(70) } }, spec: { provider: 'local' } },
    apiErrors: [
      'metadata.labels.-bad: not an accepted key: expected a label key such as team or example.com/team',
      'metadata.labels.team: expected at most 63 characters, got 70 characters',
    ],
    crd: 'rejects',
  },
];
