/** The listeners of a libvirt connection's MESSAGE packets (domain events), by program and procedure. */
import type { Logger } from '../../logging.ts';
import type { Frame } from './frame.ts';
import type { MessageListener } from './rpc-types.ts';

export class MessageListeners {
  private readonly byKey = new Map<string, Set<MessageListener>>();

  /** Routes MESSAGE packets of `prog`/`proc` to `listener`; returns an unsubscribe function. */
  add(prog: number, proc: number, listener: MessageListener): () => void {
    const key = `${prog}/${proc}`;
    let set = this.byKey.get(key);
    if (!set) this.byKey.set(key, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  /** Hands `f` to each of its listeners; one that throws is logged and the others still hear it. */
  deliver(f: Frame, logger: Logger): void {
    for (const l of this.byKey.get(`${f.prog}/${f.proc}`) ?? []) {
      try {
        l(f);
      } catch (err) {
        logger.error({ err, proc: f.proc }, 'libvirt message listener threw');
      }
    }
  }
}
