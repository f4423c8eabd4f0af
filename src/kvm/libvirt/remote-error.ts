/** Turns a `remote_error` payload into a LibvirtError (or a protocol error when it does not decode). */
import { remoteErrorCodec } from './codecs.ts';
import { LibvirtError, LibvirtProtocolError } from './errors.ts';
import { decodeXdr } from './xdr.ts';

export function decodeRemoteError(payload: Buffer, procedure: number, procedureName: string, authenticated: boolean): Error {
  try {
    const remote = decodeXdr(payload, remoteErrorCodec.read);
    return new LibvirtError(remote, { procedure, procedureName, authenticated });
  } catch (err) {
    return new LibvirtProtocolError(`${procedureName}: undecodable error payload`, { cause: err });
  }
}
