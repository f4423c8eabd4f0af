/**
 * Opening a connection: AUTH_LIST first (always), AUTH_POLKIT when the daemon asks for polkit,
 * CONNECT_SUPPORTS_FEATURE(10) so the daemon pings us, then CONNECT_OPEN(uri). Any failure
 * destroys the stream and is thrown as is (the caller wraps it as its dial stage).
 */
import type { Duplex } from 'node:stream';
import { AuthType, CONNECT_RO, FEATURE_PROGRAM_KEEPALIVE } from './constants.ts';
import { LibvirtAuthError } from './errors.ts';
import { LibvirtConnection, type LibvirtConnectionOptions } from './connection.ts';
import { toError } from '../../errors.ts';

export interface OpenLibvirtOptions extends LibvirtConnectionOptions {
  /** The URI to open on the daemon, e.g. `qemu:///system` or `test:///default`. */
  uri: string;
  /** Bounds the whole open sequence; not kept afterwards. */
  signal: AbortSignal;
  /** Open with VIR_CONNECT_RO. */
  readOnly?: boolean;
}

export async function openLibvirtConnection(stream: Duplex, options: OpenLibvirtOptions): Promise<LibvirtConnection> {
  let conn: LibvirtConnection;
  try {
    conn = new LibvirtConnection(stream, options);
  } catch (err) {
    stream.destroy();
    throw err;
  }
  const { signal } = options;
  try {
    const types = await conn.authList(signal);
    if (types.length === 0 || types.includes(AuthType.NONE)) {
      conn.authenticated = true;
    } else if (types.includes(AuthType.POLKIT)) {
      const complete = await conn.authPolkit(signal);
      if (complete === 0) throw new LibvirtAuthError('libvirt polkit authentication did not complete', types);
      conn.authenticated = true;
    } else {
      throw new LibvirtAuthError(
        `libvirt daemon offers only authentication types [${types.join(', ')}]; this client supports none (0) and polkit (2), not SASL`,
        types,
      );
    }
    const keepalive = await conn.supportsFeature(FEATURE_PROGRAM_KEEPALIVE, signal);
    if (!keepalive) options.logger.debug('libvirt daemon does not support keepalive pings');
    await conn.connectOpen(options.uri, options.readOnly ? CONNECT_RO : 0, signal);
    return conn;
  } catch (err) {
    const error = toError(err);
    conn.destroy(error);
    throw error;
  }
}
