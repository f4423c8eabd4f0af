import { Server as ProxyServer } from 'proxy-chain';

/**
 * A real forward proxy on 127.0.0.1 that a test plays a proxy container with (the fake apiserver
 * has no kubelet): it accepts exactly the credentials the test sets in `credentials`, and none
 * while they are empty.
 */
export interface ContainerProxy {
  readonly port: number;
  readonly credentials: { user: string; password: string };
  close(): Promise<void>;
}

export async function startContainerProxy(): Promise<ContainerProxy> {
  const credentials = { user: '', password: '' };
  const server = new ProxyServer({
    host: '127.0.0.1',
    port: 0,
    prepareRequestFunction: ({ username, password }) => ({
      requestAuthentication: !credentials.user || username !== credentials.user || password !== credentials.password,
    }),
  });
  await server.listen();
  return { port: server.port, credentials, close: () => server.close(true) };
}
