import { EventEmitter } from 'node:events';
import { Server as ProxyServer } from 'proxy-chain';
import type { ProxyCredentials } from '../../src/model/proxy-credentials.ts';

/**
 * A real forward proxy on 127.0.0.1 (proxy-chain, Basic Proxy-Authorization) that a test can
 * pause: while paused it still accepts TCP connections (as the kernel does for a SIGSTOPped
 * process, whose listen backlog keeps filling) but answers no request until resumed. Emits `held`
 * for each request it holds and `answered` for each it lets through, so tests wait on events.
 */
export interface PausableProxy extends EventEmitter<{ held: []; answered: [] }> {
  readonly port: number;
  readonly url: string;
  readonly paused: boolean;
  pause(): void;
  resume(): void;
  close(): Promise<void>;
}

export async function startPausableProxy(credentials: ProxyCredentials): Promise<PausableProxy> {
  const events = new EventEmitter<{ held: []; answered: [] }>();
  let gate: { promise: Promise<void>; open: () => void } | undefined;
  const server = new ProxyServer({
    host: '127.0.0.1',
    port: 0,
    prepareRequestFunction: async ({ username, password }) => {
      if (gate) {
        events.emit('held');
        await gate.promise;
      }
      events.emit('answered');
      return { requestAuthentication: username !== credentials.username || password !== credentials.password };
    },
  });
  await server.listen();
  return Object.assign(events, {
    port: server.port,
    url: `http://127.0.0.1:${server.port}`,
    get paused() {
      return gate !== undefined;
    },
    pause() {
      if (gate) return;
      let open!: () => void;
      const promise = new Promise<void>((resolve) => (open = resolve));
      gate = { promise, open };
    },
    resume() {
      gate?.open();
      gate = undefined;
    },
    async close() {
      gate?.open();
      gate = undefined;
      await server.close(true);
    },
  });
}
