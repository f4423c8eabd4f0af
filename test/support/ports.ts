import { connect } from 'node:net';

/** True when something accepts a TCP connection on 127.0.0.1:`port` now (the connection is closed at once). */
export function portAccepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
