/** Types shared by the RPC core and the layers above it. */
import type { Logger } from '../../logging.ts';
import type { Frame } from './frame.ts';
import type { KeepaliveOptions } from './keepalive.ts';

/** Receives the STREAM packets of one serial. */
export interface StreamHandler {
  /** Procedure name, for errors. */
  readonly name: string;
  onPacket(status: number, payload: Buffer): void;
  fail(err: Error): void;
}

export interface RpcStats {
  /** Calls written and not answered, tombstones of aborted calls included (the daemon still counts them). */
  inFlight: number;
  /** Calls waiting for a slot. */
  queued: number;
  tombstones: number;
  /** Open data streams. */
  streams: number;
  /** Keepalive PINGs this client sent. */
  pingsSent: number;
  /** PINGs from the peer this client answered with a PONG. */
  pingsAnswered: number;
  /** PONGs the peer sent back for this client's PINGs. */
  pongsReceived: number;
}

export interface CallOptions {
  /** Registered for the call's serial before the CALL is written. */
  stream?: StreamHandler;
  /** Skip the in-flight cap (CONNECT_CLOSE only). */
  priority?: boolean;
  /** Filled in with the serial once assigned (for logs). */
  trace?: { serial?: number };
  /** Classify 39/7 as an auth error while false. */
  authenticated?: () => boolean;
}

export interface RpcCoreOptions {
  logger: Logger;
  maxInFlight: number;
  keepalive: KeepaliveOptions | false;
  /** Bound of the bytes waiting to be written (write-queue.ts); past it the connection drops. */
  maxQueuedBytes?: number;
}

export type MessageListener = (frame: Frame) => void;
