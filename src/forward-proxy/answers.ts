import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

const TEXT = 'text/plain; charset=utf-8';

/** A refusal or failure on a plain request, answered in order behind the responses before it on the connection. */
export function answer(res: ServerResponse, status: number, message: string, headers: Readonly<Record<string, string>> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { 'content-type': TEXT, 'content-length': String(Buffer.byteLength(message)), ...headers });
  res.end(message);
}

/** The same on a CONNECT's socket, which then closes (nothing follows a refused CONNECT). */
export function answerSocket(socket: Socket, status: number, message: string, headers: Readonly<Record<string, string>> = {}): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}`,
    `content-type: ${TEXT}`,
    `content-length: ${Buffer.byteLength(message)}`,
    'connection: close',
  ];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  socket.end(`${lines.join('\r\n')}\r\n\r\n${message}`);
}
