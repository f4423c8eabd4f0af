/**
 * A small OTLP/HTTP trace receiver for tests: `POST /v1/traces` in `application/json` or
 * `application/x-protobuf` (decoded here from the wire format, for the fields tests look at),
 * answering 200 like a collector. Spans are kept in arrival order, and the raw bodies too, so a
 * test can search everything that left the process.
 */
import { EventEmitter } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

export type AttributeValue = string | number | boolean | AttributeValue[] | undefined;

export interface ReceivedSpan {
  /** `service.name` of the resource that sent it. */
  service: string;
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, AttributeValue>;
  events: { name: string; attributes: Record<string, AttributeValue> }[];
  links: { traceId: string; spanId: string }[];
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string };
}

export interface OtlpReceiver {
  /** Base URL (`http://127.0.0.1:PORT`): OTEL_EXPORTER_OTLP_ENDPOINT. */
  readonly url: string;
  readonly spans: ReceivedSpan[];
  /** Each export request's content type and raw body. */
  readonly requests: { contentType: string; body: Buffer }[];
  /** Resolves with the spans once `predicate` holds for those received so far (checked on every export). */
  waitFor(predicate: (spans: readonly ReceivedSpan[]) => boolean, signal?: AbortSignal): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

// ---- protobuf wire format (just what ExportTraceServiceRequest needs) ----

interface Field {
  no: number;
  wire: number;
  /** varint / fixed values */
  num?: bigint;
  bytes?: Buffer;
}

function readVarint(buf: Buffer, pos: number): [bigint, number] {
  let result = 0n;
  let shift = 0n;
  for (;;) {
    const b = buf[pos++];
    if (b === undefined) throw new Error('truncated varint');
    result |= BigInt(b & 0x7f) << shift;
    if ((b & 0x80) === 0) return [result, pos];
    shift += 7n;
  }
}

function fields(buf: Buffer): Field[] {
  const out: Field[] = [];
  let pos = 0;
  while (pos < buf.length) {
    const [tag, next] = readVarint(buf, pos);
    pos = next;
    const no = Number(tag >> 3n);
    const wire = Number(tag & 7n);
    if (wire === 0) {
      const [v, p] = readVarint(buf, pos);
      out.push({ no, wire, num: v });
      pos = p;
    } else if (wire === 1) {
      out.push({ no, wire, num: buf.readBigUInt64LE(pos), bytes: buf.subarray(pos, pos + 8) });
      pos += 8;
    } else if (wire === 2) {
      const [len, p] = readVarint(buf, pos);
      out.push({ no, wire, bytes: buf.subarray(p, p + Number(len)) });
      pos = p + Number(len);
    } else if (wire === 5) {
      out.push({ no, wire, num: BigInt(buf.readUInt32LE(pos)) });
      pos += 4;
    } else {
      throw new Error(`unsupported wire type ${wire}`);
    }
  }
  return out;
}

const sub = (fs: Field[], no: number): Buffer[] => fs.filter((f) => f.no === no && f.bytes).map((f) => f.bytes as Buffer);
const str = (fs: Field[], no: number): string => sub(fs, no)[0]?.toString('utf8') ?? '';
const hex = (fs: Field[], no: number): string => sub(fs, no)[0]?.toString('hex') ?? '';
const num = (fs: Field[], no: number): number => Number(fs.find((f) => f.no === no)?.num ?? 0n);

function pbAnyValue(buf: Buffer): AttributeValue {
  const fs = fields(buf);
  const f = fs[0];
  if (!f) return undefined;
  switch (f.no) {
    case 1:
      return f.bytes?.toString('utf8');
    case 2:
      return f.num === 1n;
    case 3:
      return Number(BigInt.asIntN(64, f.num ?? 0n));
    case 4:
      return f.bytes?.readDoubleLE(0);
    case 5:
      return sub(fields(f.bytes ?? Buffer.alloc(0)), 1).map(pbAnyValue);
    default:
      return f.bytes?.toString('base64');
  }
}

function pbAttributes(bufs: Buffer[]): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const kv of bufs) {
    const fs = fields(kv);
    const value = sub(fs, 2)[0];
    out[str(fs, 1)] = value ? pbAnyValue(value) : undefined;
  }
  return out;
}

function decodeProtobuf(body: Buffer): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const rs of sub(fields(body), 1)) {
    const rsf = fields(rs);
    const resource = sub(rsf, 1)[0];
    const service = String(pbAttributes(resource ? sub(fields(resource), 1) : [])['service.name'] ?? '');
    for (const ss of sub(rsf, 2)) {
      for (const s of sub(fields(ss), 2)) {
        const sf = fields(s);
        const status = sub(sf, 15)[0];
        const stf = status ? fields(status) : [];
        spans.push({
          service,
          traceId: hex(sf, 1),
          spanId: hex(sf, 2),
          parentSpanId: hex(sf, 4),
          name: str(sf, 5),
          kind: num(sf, 6),
          attributes: pbAttributes(sub(sf, 9)),
          events: sub(sf, 11).map((e) => {
            const ef = fields(e);
            return { name: str(ef, 2), attributes: pbAttributes(sub(ef, 3)) };
          }),
          links: sub(sf, 13).map((l) => {
            const lf = fields(l);
            return { traceId: hex(lf, 1), spanId: hex(lf, 2) };
          }),
          status: { code: num(stf, 3), message: str(stf, 2) },
        });
      }
    }
  }
  return spans;
}

// ---- OTLP/JSON ----

interface JsonAnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: number | string;
  doubleValue?: number;
  arrayValue?: { values?: JsonAnyValue[] };
}
interface JsonKeyValue {
  key: string;
  value?: JsonAnyValue;
}
interface JsonSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind?: number;
  attributes?: JsonKeyValue[];
  events?: { name: string; attributes?: JsonKeyValue[] }[];
  links?: { traceId: string; spanId: string }[];
  status?: { code?: number; message?: string };
}
interface JsonRequest {
  resourceSpans?: { resource?: { attributes?: JsonKeyValue[] }; scopeSpans?: { spans?: JsonSpan[] }[] }[];
}

function jsonValue(v: JsonAnyValue | undefined): AttributeValue {
  if (!v) return undefined;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(jsonValue);
  return undefined;
}

function jsonAttributes(kvs: JsonKeyValue[] | undefined): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const kv of kvs ?? []) out[kv.key] = jsonValue(kv.value);
  return out;
}

function decodeJson(body: Buffer): ReceivedSpan[] {
  const request = JSON.parse(body.toString('utf8')) as JsonRequest;
  const spans: ReceivedSpan[] = [];
  for (const rs of request.resourceSpans ?? []) {
    const service = String(jsonAttributes(rs.resource?.attributes)['service.name'] ?? '');
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        spans.push({
          service,
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ?? '',
          name: s.name,
          kind: s.kind ?? 0,
          attributes: jsonAttributes(s.attributes),
          events: (s.events ?? []).map((e) => ({ name: e.name, attributes: jsonAttributes(e.attributes) })),
          links: (s.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
          status: { code: s.status?.code ?? 0, message: s.status?.message ?? '' },
        });
      }
    }
  }
  return spans;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const requests: { contentType: string; body: Buffer }[] = [];
  const events = new EventEmitter();
  const server = createServer((req, res) => {
    void (async () => {
      const body = await readBody(req);
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      const contentType = (req.headers['content-type'] ?? '').split(';')[0]?.trim() ?? '';
      requests.push({ contentType, body });
      try {
        const decoded = contentType === 'application/json' ? decodeJson(body) : decodeProtobuf(body);
        spans.push(...decoded);
      } catch (err) {
        res.writeHead(400, { 'content-type': 'text/plain' }).end((err as Error).message);
        return;
      }
      // An empty ExportTraceServiceResponse: `{}` in JSON, no bytes in protobuf.
      if (contentType === 'application/json') res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      else res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      events.emit('spans');
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    requests,
    waitFor(predicate, signal) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          if (!predicate(spans)) return;
          events.off('spans', check);
          signal?.removeEventListener('abort', onAbort);
          resolve([...spans]);
        };
        const onAbort = (): void => {
          events.off('spans', check);
          reject(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        events.on('spans', check);
        check();
      });
    },
    close() {
      server.closeAllConnections();
      return new Promise((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    },
  };
}

/** The spans of one trace, and helpers to walk it. */
export function traceOf(spans: readonly ReceivedSpan[], traceId: string): ReceivedSpan[] {
  return spans.filter((s) => s.traceId === traceId);
}

export function parentOf(spans: readonly ReceivedSpan[], span: ReceivedSpan): ReceivedSpan | undefined {
  return spans.find((s) => s.spanId === span.parentSpanId && s.traceId === span.traceId);
}

/** True when `ancestor` is above `span` in its trace. */
export function descendsFrom(spans: readonly ReceivedSpan[], span: ReceivedSpan, ancestor: ReceivedSpan): boolean {
  for (let p = parentOf(spans, span); p; p = parentOf(spans, p)) if (p.spanId === ancestor.spanId) return true;
  return false;
}
