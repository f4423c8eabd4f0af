export { FakeSshServer, generateKeyPair } from './server.ts';
export type { FakeSshBehaviour, FakeSshEvent, FakeSshServerOptions, SshKeyPair, StreamlocalTarget } from './server.ts';
export { closedPort } from './ports.ts';
