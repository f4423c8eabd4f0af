export { FakeKubeApiserver, startFakeKubeApiserver, type FakeKubeOptions, type KubeFault, type KubeRequest } from './server.ts';
export type { FakePod, PodStatusUpdate, DeletionMode } from './pod-store.ts';
export { parseLabelSelector, matchesLabels, SelectorError } from './selectors.ts';
