/**
 * Two connected in-memory Duplex ends (Node 20 has no stream.duplexPair). Writes on one end are
 * readable on the other; ending or destroying one end ends the other's readable side.
 * Backpressure is not modelled: use the unix socket of FakeLibvirtServer.listen() for that.
 */
import { Duplex } from 'node:stream';

export function duplexPair(): [Duplex, Duplex] {
  const ends: Duplex[] = [];
  const make = (peer: () => Duplex): Duplex =>
    new Duplex({
      read() {},
      write(chunk: Buffer, _enc, cb) {
        const p = peer();
        if (!p.destroyed) p.push(chunk);
        cb();
      },
      final(cb) {
        const p = peer();
        if (!p.destroyed) p.push(null);
        cb();
      },
      destroy(err, cb) {
        const p = peer();
        if (!p.destroyed && !p.readableEnded) p.push(null);
        cb(err);
      },
    });
  ends.push(
    make(() => ends[1]!),
    make(() => ends[0]!),
  );
  return [ends[0]!, ends[1]!];
}
