/**
 * A minimal HTTP/1.1 client for load generators: raw keep-alive sockets and a response reader
 * (Content-Length bodies), so the generator costs far less per request than node:http and is not
 * what limits the rate or the measured latency.
 */
import { connect, type Socket } from 'node:net';

export interface Answer {
  status: number;
  /** The server closes the connection after this response (`Connection: close`, HTTP/1.0): the next request opens a new one. */
  close: boolean;
}

/** Reads whole HTTP responses off a socket, one at a time. */
export class ResponseReader {
  #buffer: Buffer = Buffer.alloc(0);
  /** The server closed the connection (or said it would). */
  closed = false;
  #waiting: { resolve: (answer: Answer) => void; reject: (err: Error) => void; headOnly: boolean } | undefined;

  constructor(socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
      this.#drain();
    });
    const fail = (err: Error): void => {
      const w = this.#waiting;
      this.#waiting = undefined;
      w?.reject(err);
    };
    socket.on('error', fail);
    socket.on('close', () => {
      this.closed = true;
      fail(new Error('connection closed'));
    });
  }

  /** The next response's status, and whether the server closes after it; `headOnly` for a CONNECT answer (no body follows). */
  next(headOnly = false): Promise<Answer> {
    return new Promise((resolve, reject) => {
      this.#waiting = { resolve, reject, headOnly };
      this.#drain();
    });
  }

  #drain(): void {
    const w = this.#waiting;
    if (!w) return;
    const end = this.#buffer.indexOf('\r\n\r\n');
    if (end < 0) return;
    const head = this.#buffer.subarray(0, end).toString('latin1');
    const status = Number(head.slice(9, 12));
    const length = w.headOnly ? 0 : Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? '0');
    const total = end + 4 + length;
    if (this.#buffer.length < total) return;
    this.#buffer = this.#buffer.subarray(total);
    this.#waiting = undefined;
    w.resolve({ status, close: /\r\n(proxy-)?connection:\s*close/i.test(head) || head.startsWith('HTTP/1.0') });
  }
}

export function open(host: string, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, noDelay: true });
    socket.once('connect', () => resolve(socket));
    socket.once('error', reject);
  });
}
