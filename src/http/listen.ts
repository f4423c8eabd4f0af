import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { ConfigError } from '../errors.ts';
import type { Logger } from '../logging.ts';

export interface ListenOptions {
  hostname: string;
  port: number;
  /** The flag that chose the port, named in the error when it is taken (`--port`, `--metrics-port`). */
  portFlag: string;
  /** Where errors of the listening socket go once it listens (failed accepts, say). */
  logger: Logger;
  /** What the listener is, for that log line (`api`, `metrics`). */
  name: string;
}

/**
 * Serves `fetch` on `hostname:port`. A failure to listen is a ConfigError naming the flag. Once
 * listening, an error of the server socket (an accept that failed: out of file descriptors) is
 * logged and the listener keeps serving: closing it there would leave a live process that
 * silently refuses every connection.
 */
export function listenHttp(fetch: (req: Request) => Response | Promise<Response>, options: ListenOptions): Promise<ServerType> {
  const { hostname, port, portFlag, logger, name } = options;
  return new Promise<ServerType>((resolve, reject) => {
    const onStartError = (err: NodeJS.ErrnoException): void => {
      server.close();
      if (err.code === 'EADDRINUSE')
        reject(
          new ConfigError(portFlag, `${hostname}:${port} is already in use (EADDRINUSE): another process listens there; choose another ${portFlag}`, {
            cause: err,
          }),
        );
      else if (err.code === 'EADDRNOTAVAIL')
        reject(new ConfigError('--host', `cannot listen on ${hostname}:${port}: not an address of this machine (EADDRNOTAVAIL)`, { cause: err }));
      else if (err.code === 'EACCES') reject(new ConfigError(portFlag, `cannot listen on ${hostname}:${port}: permission denied (EACCES)`, { cause: err }));
      else reject(err);
    };
    const server = serve({ fetch, hostname, port }, () => {
      server.off('error', onStartError);
      const address = server.address() as AddressInfo;
      server.on('error', (err: NodeJS.ErrnoException) =>
        logger.error({ listener: name, port: address.port, code: err.code, err: err.message }, `${name} listener error; still listening`),
      );
      resolve(server);
    });
    server.once('error', onStartError);
  });
}
