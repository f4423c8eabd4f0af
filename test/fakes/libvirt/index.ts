export { FakeLibvirtServer } from './server.ts';
export type { FakeLibvirtServerOptions, RequestRecord, UploadRecord } from './server.ts';
export { FakeSession } from './session.ts';
export { FakeFaults, ReplyGate } from './faults.ts';
export { FakeLibvirtState, FakeFault, fault } from './model.ts';
export type { FakeDomain, FakePool, FakeVolume, FakeDriver } from './model.ts';
export { duplexPair } from './duplex-pair.ts';
