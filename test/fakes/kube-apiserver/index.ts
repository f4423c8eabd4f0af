export { FakeKubeApiserver, startFakeKubeApiserver, type FakeKubeOptions, type KubeFault, type KubeRequest } from './server.ts';
export type { FakePod, PodStatusUpdate, DeletionMode } from './pod-store.ts';
export { parseLabelSelector, matchesLabels, SelectorError } from './selectors.ts';
export type { FakeObject } from './object-store.ts';
export { base64ErrorOffset } from './secret-rules.ts';
export { NODE_PORT_MIN, NODE_PORT_MAX } from './service-rules.ts';
export { podEnv } from './kubelet.ts';
