/**
 * A `direct-streamlocal@openssh.com` channel to a unix socket on the SSH server (ssh2's
 * `openssh_forwardOutStreamLocal`), bounded by an AbortSignal.
 */
import type { ClientChannel } from 'ssh2';
import type { SshSession } from './session.ts';

/** Opens the channel; on abort the request is abandoned and a late channel is closed. */
export function openStreamLocal(session: SshSession, socketPath: string, signal: AbortSignal): Promise<ClientChannel> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(reasonOf(signal.reason));
      return;
    }
    let done = false;
    const onAbort = (): void => {
      if (done) return;
      done = true;
      reject(reasonOf(signal.reason));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      session.client.openssh_forwardOutStreamLocal(socketPath, (err, channel) => {
        signal.removeEventListener('abort', onAbort);
        if (done) {
          channel?.on('error', () => undefined);
          channel?.destroy();
          return;
        }
        done = true;
        if (err) reject(err);
        else resolve(channel);
      });
    } catch (err) {
      // ssh2 throws synchronously when the client is no longer connected.
      signal.removeEventListener('abort', onAbort);
      done = true;
      reject(reasonOf(err));
    }
  });
}

function reasonOf(reason: unknown): Error {
  return reason instanceof Error ? reason : new Error(String(reason));
}
