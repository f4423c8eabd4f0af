import { lookup } from 'node:dns/promises';
import { readFile, stat } from 'node:fs';
import { networkInterfaces } from 'node:os';
import type { Logger } from '../logging.ts';
import { parsePolicyDocument } from './policy-document.ts';
import type { GuardedEndpoint, ProxyEgressPolicy } from './policy-config.ts';
import { compileEgressPolicy, NO_POLICY, type EgressPolicy } from './policy.ts';

/**
 * The policy a running proxy enforces, kept current: the document (a file, re-read when it
 * changes or on reload(); else the `EGRESS_PROXY_POLICY` text), this machine's interface
 * addresses and the guarded host names' addresses (both refreshed every `refreshMs`).
 *
 * Fails closed: without a readable document the default deny applies (no allow, no echo). A
 * document that becomes unreadable later leaves the last good one in force (logged).
 */
export interface LivePolicy {
  current(): EgressPolicy;
  /** Bumped whenever the compiled policy changes (the caller drops pooled upstream sockets). */
  readonly generation: number;
  /** Whether a document was read (false: the fail-closed default). */
  readonly loaded: boolean;
  reload(): Promise<void>;
  /** Adds a listener to refuse whatever the document says (the proxy's own, known once it listens). */
  guard(endpoint: GuardedEndpoint): Promise<void>;
  close(): void;
}

export interface LivePolicyOptions {
  file?: string;
  /** The document's text from the environment; used only when no file is given. */
  envText?: string;
  logger: Logger;
  /** How often interface addresses and guarded host names are refreshed (default 30 s). */
  refreshMs?: number;
  /** How often the file's stat is polled for changes (default 500 ms). */
  watchMs?: number;
  /** Called once a changed document is in force (the proxy host tells its relays to read it at once). */
  onDocument?: () => void;
  /** Reads the document's file (default: fs.readFile as UTF-8); a seam for tests that change the file mid-read. */
  readText?: (file: string) => Promise<string>;
}

function localAddresses(): string[] {
  return Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address));
}

function readUtf8(file: string): Promise<string> {
  return new Promise((resolve, reject) => readFile(file, 'utf8', (err, text) => (err ? reject(err) : resolve(text))));
}

/**
 * What identifies one version of the file: device, inode, size and times, or why there is none.
 * Taken just before each read, so a change at any moment after it (even one the read itself
 * missed) differs from it at the next poll.
 */
function stampOf(file: string): Promise<string> {
  return new Promise((resolve) =>
    stat(file, { bigint: true }, (err, s) => resolve(err ? `missing:${err.code ?? 'error'}` : `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`)),
  );
}

export async function startLivePolicy(options: LivePolicyOptions): Promise<LivePolicy> {
  const { file, envText, logger } = options;
  const readText = options.readText ?? readUtf8;
  /** The file's stamp as of the last read (undefined before the first). */
  let readStamp: string | undefined;
  let doc: ProxyEgressPolicy = NO_POLICY;
  let loaded = false;
  let resolved = new Map<string, readonly string[]>();
  let compiled = compileEgressPolicy(doc, { localAddresses: localAddresses(), resolved });
  let generation = 0;
  let lastText: string | undefined;
  const ownGuards: GuardedEndpoint[] = [];
  const effective = (): ProxyEgressPolicy => ({ ...doc, guarded: [...doc.guarded, ...ownGuards] });

  async function resolveNames(names: readonly string[]): Promise<Map<string, readonly string[]>> {
    const next = new Map<string, readonly string[]>();
    for (const name of names) {
      try {
        const found = await lookup(name, { all: true, verbatim: true });
        next.set(
          name,
          found.map((a) => a.address),
        );
      } catch (err) {
        const previous = resolved.get(name);
        if (previous) next.set(name, previous);
        logger.warn({ host: name, err: (err as Error).message }, 'guarded host name did not resolve; refusing every address on its port until it does');
      }
    }
    return next;
  }

  async function recompile(): Promise<void> {
    const first = compileEgressPolicy(effective(), { localAddresses: localAddresses(), resolved });
    resolved = await resolveNames(first.hostNames);
    compiled = compileEgressPolicy(effective(), { localAddresses: localAddresses(), resolved });
    generation++;
  }

  async function readDocument(): Promise<void> {
    let text: string | undefined;
    let source: string;
    if (file !== undefined) {
      source = file;
      readStamp = await stampOf(file);
      try {
        text = await readText(file);
      } catch (err) {
        logger.error(
          { file, err: (err as Error).message },
          loaded ? 'egress policy unreadable; keeping the last one' : 'egress policy unreadable; default deny only',
        );
        return;
      }
    } else {
      source = 'EGRESS_PROXY_POLICY';
      text = envText;
      if (text === undefined) {
        logger.error('no egress policy given (no file, no EGRESS_PROXY_POLICY); default deny only');
        return;
      }
    }
    if (text === lastText) return;
    try {
      doc = parsePolicyDocument(text);
    } catch (err) {
      logger.error(
        { source, err: (err as Error).message },
        loaded ? 'egress policy invalid; keeping the last one' : 'egress policy invalid; default deny only',
      );
      return;
    }
    lastText = text;
    loaded = true;
    await recompile();
    options.onDocument?.();
    logger.info({ source, allow: doc.allow, deny: doc.deny, guarded: doc.guarded.length, echo: doc.echo !== undefined }, 'egress policy loaded');
  }

  // One reload at a time; a request for another while one runs is coalesced into one more.
  let running: Promise<void> | undefined;
  let again = false;
  function reload(): Promise<void> {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        await readDocument();
      } while (again);
    })()
      .catch((err: unknown) => logger.error({ err: (err as Error).message }, 'egress policy reload failed; keeping the last one'))
      .finally(() => (running = undefined));
    return running;
  }

  await reload();
  const refresh = setInterval(() => {
    recompile().catch((err: unknown) => logger.error({ err: (err as Error).message }, 'egress policy refresh failed'));
  }, options.refreshMs ?? 30_000);
  refresh.unref();
  // Polled rather than fs.watchFile: a watcher started after the first read takes its baseline
  // then, so a file written between the two (the policy sync racing the proxy's start) was never
  // reported. Comparing with the stamp taken before each read has no such window.
  let polling = false;
  const poll =
    file === undefined
      ? undefined
      : setInterval(() => {
          if (polling || running) return;
          polling = true;
          void stampOf(file)
            .then((now) => (now !== readStamp ? reload() : undefined))
            .finally(() => (polling = false));
        }, options.watchMs ?? 500);
  poll?.unref();

  return {
    current: () => compiled,
    get generation() {
      return generation;
    },
    get loaded() {
      return loaded;
    },
    reload,
    guard(endpoint) {
      ownGuards.push({ ...endpoint });
      return recompile();
    },
    close() {
      clearInterval(refresh);
      clearInterval(poll);
    },
  };
}
