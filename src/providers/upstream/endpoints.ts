/**
 * The live list of an upstream provider's endpoints: those of its configuration and those of its
 * `endpointsFile`, with their passwords from their password files. Files are looked at (stat) at
 * every read and read again only when they changed, so an edited list or a rotated password applies
 * at the next reconcile, check or sync without a restart. Every password read is told to the
 * process's secret registry before it is used anywhere, so no log, event, status or span shows it.
 */
import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { UpstreamEndpointsError } from './endpoints-error.ts';
import { ListUrl } from './list-url.ts';
import type { ChainHop } from '../../forward-proxy/chain-hop.ts';
import type { Logger } from '../../logging.ts';
import type { SecretSink } from '../../secrets/secret-registry.ts';
import { endpointProxyName, type UpstreamProviderConfig } from './config.ts';

export { UpstreamEndpointsError };

export interface UpstreamEndpoint {
  /** The endpoint's name (from the configuration, the file's line, or its host and port). */
  name: string;
  /** Its Proxy's name, `<provider>-<name>`. */
  proxy: string;
  /** `scheme://host:port`: what may be shown (no user, no password). */
  url: string;
  labels: Record<string, string>;
  /** The route with its credentials: for the proxy host's control socket and the check only. */
  hop: ChainHop;
  /** The sticky-session username template, when the vendor has sessions. */
  usernameTemplate?: string;
}

/** A Proxy's session on a vendor with sessions: its name in the characters vendors accept in a username. */
export function sessionOf(proxy: string): string {
  return proxy.replace(/[^a-zA-Z0-9]/g, '');
}

/** The hop a Proxy uses on `endpoint`: its own sticky-session username when the endpoint has a template. */
export function hopFor(endpoint: UpstreamEndpoint, proxy: string): ChainHop {
  const template = endpoint.usernameTemplate;
  if (template === undefined) return endpoint.hop;
  const username = template.replaceAll('{user}', endpoint.hop.username ?? '').replaceAll('{session}', sessionOf(proxy));
  return { ...endpoint.hop, username };
}

/**
 * The endpoint of a Proxy that is not an endpoint's own (a pool member on this provider, a Proxy
 * applied by hand): chosen by highest random weight over the names listed, so each Proxy keeps its
 * endpoint while the list changes around it, and Proxies spread evenly.
 */
export function endpointByHash(endpoints: readonly UpstreamEndpoint[], proxy: string): UpstreamEndpoint | undefined {
  let best: UpstreamEndpoint | undefined;
  let bestScore = '';
  for (const e of endpoints) {
    const score = createHash('sha256').update(`${e.name}\0${proxy}`).digest('hex');
    if (best === undefined || score > bestScore) {
      best = e;
      bestScore = score;
    }
  }
  return best;
}

interface CachedFile {
  key: string;
  text: string;
}

/** A name for a file line that gives none: its host and port, in the characters a name allows. */
function derivedName(url: URL): string {
  const raw = `${url.hostname}-${url.port}`.toLowerCase().replace(/[^a-z0-9]+/g, '-');
  return raw
    .replace(/^-+|-+$/g, '')
    .slice(0, 30)
    .replace(/-+$/, '');
}

const NAME = /^[a-z0-9]([-a-z0-9]{0,28}[a-z0-9])?$/;

export interface EndpointSourceOptions {
  logger: Logger;
  secrets?: SecretSink;
  /** The time, for tests of the list URL's refresh. */
  now?: () => number;
}

export class EndpointSource {
  readonly #config: UpstreamProviderConfig;
  readonly #o: EndpointSourceOptions;
  readonly #files = new Map<string, CachedFile>();
  /** Every endpoint Proxy this process has seen listed (see routeOf). */
  readonly #everListed = new Set<string>();
  /** The vendor's list endpoint, when configured. */
  readonly #list: ListUrl | undefined;

  constructor(config: UpstreamProviderConfig, options: EndpointSourceOptions) {
    this.#config = config;
    this.#o = options;
    const list = config.endpointsUrl;
    this.#list = list
      ? new ListUrl({
          url: list.url,
          refreshMs: list.refresh,
          ...(list.tokenFile !== undefined ? { tokenFile: list.tokenFile } : {}),
          owner: `upstream:${config.name}:list-token`,
          ...(options.secrets ? { secrets: options.secrets } : {}),
          logger: options.logger,
          ...(options.now ? { now: options.now } : {}),
        })
      : undefined;
  }

  /** A file's text, read again only when its inode, size or modification time changed. */
  async #read(path: string): Promise<string> {
    let key: string;
    try {
      const s = await stat(path);
      key = `${s.ino}:${s.size}:${s.mtimeMs}`;
    } catch (err) {
      throw new UpstreamEndpointsError(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, { cause: err });
    }
    const cached = this.#files.get(path);
    if (cached?.key === key) return cached.text;
    const text = await readFile(path, 'utf8').catch((err: unknown) => {
      throw new UpstreamEndpointsError(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, { cause: err });
    });
    if (cached) this.#o.logger.info({ file: path }, 'upstream provider file changed; read again');
    this.#files.set(path, { key, text });
    return text;
  }

  async #password(file: string | undefined, owner: string, username: string): Promise<string | undefined> {
    if (file === undefined) return undefined;
    const password = (await this.#read(file)).replace(/\r?\n$/, '');
    if (password === '') throw new UpstreamEndpointsError(`password file ${file} is empty`);
    this.#o.secrets?.setCredentials(owner, { username, password });
    return password;
  }

  #endpoint(
    name: string,
    url: URL,
    password: string | undefined,
    labels: Record<string, string>,
    template: string | undefined,
    ca: string | undefined,
  ): UpstreamEndpoint {
    const scheme = url.protocol.slice(0, -1) as ChainHop['scheme'];
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    const username = decodeURIComponent(url.username);
    const hop: ChainHop = {
      scheme,
      host,
      port: Number(url.port),
      ...(username !== '' ? { username } : {}),
      ...(password !== undefined ? { password } : {}),
      ...(scheme === 'https' && ca !== undefined ? { ca } : {}),
    };
    return {
      name,
      proxy: endpointProxyName(this.#config.name, name),
      url: `${url.protocol}//${url.host}`,
      labels: { ...this.#config.labels, ...labels },
      hop,
      ...(template !== undefined ? { usernameTemplate: template } : {}),
    };
  }

  /** Every endpoint listed now, in order (the configuration's, then the file's); throws UpstreamEndpointsError when a file cannot be read. */
  async current(): Promise<UpstreamEndpoint[]> {
    const provider = this.#config.name;
    const out: UpstreamEndpoint[] = [];
    const names = new Set<string>();
    for (const e of this.#config.endpoints) {
      const url = new URL(e.url);
      const password = await this.#password(e.passwordFile ?? this.#config.passwordFile, `upstream:${provider}:${e.name}`, decodeURIComponent(url.username));
      const caFile = e.caFile ?? this.#config.caFile;
      const ca = caFile === undefined ? undefined : await this.#read(caFile);
      out.push(this.#endpoint(e.name, url, password, e.labels, e.usernameTemplate ?? this.#config.usernameTemplate, ca));
      names.add(e.name);
    }
    if (this.#config.endpointsFile !== undefined) {
      await this.#lines(await this.#read(this.#config.endpointsFile), this.#config.endpointsFile, out, names);
    }
    if (this.#list) await this.#lines(await this.#list.text(), this.#list.shown, out, names);
    for (const e of out) this.#everListed.add(e.proxy);
    return out;
  }

  /** Adds the endpoints of a list's text (`[name] URL` a line) to `out`. */
  async #lines(text: string, source: string, out: UpstreamEndpoint[], names: Set<string>): Promise<void> {
    const provider = this.#config.name;
    for (const [i, line] of text.split(/\r?\n/).entries()) {
      const content = line.replace(/#.*/, '').trim();
      if (content === '') continue;
      const parts = content.split(/\s+/);
      const where = `${source} line ${i + 1}`;
      if (parts.length > 2) throw new UpstreamEndpointsError(`${where}: expected "[name] URL"`);
      const urlText = parts.length === 2 ? parts[1]! : parts[0]!;
      let url: URL;
      try {
        url = new URL(urlText);
      } catch {
        // The line may hold a password: never quoted.
        throw new UpstreamEndpointsError(`${where}: not a URL`);
      }
      if (!['http:', 'https:', 'socks5:'].includes(url.protocol) || url.hostname === '' || url.port === '') {
        throw new UpstreamEndpointsError(`${where}: expected an http://, https:// or socks5:// URL with a host and a port`);
      }
      const name = parts.length === 2 ? parts[0]! : derivedName(url);
      if (!NAME.test(name)) throw new UpstreamEndpointsError(`${where}: "${name}" is not an endpoint name (lower-case letters, digits and dashes, at most 30)`);
      if (names.has(name)) throw new UpstreamEndpointsError(`${where}: endpoint "${name}" is listed twice`);
      names.add(name);
      const owner = `upstream:${provider}:${name}`;
      let password: string | undefined;
      if (url.password !== '') {
        password = decodeURIComponent(url.password);
        this.#o.secrets?.setCredentials(owner, { username: decodeURIComponent(url.username), password });
      } else {
        password = await this.#password(this.#config.passwordFile, owner, decodeURIComponent(url.username));
      }
      const ca = this.#config.caFile === undefined ? undefined : await this.#read(this.#config.caFile);
      out.push(this.#endpoint(name, url, password, {}, this.#config.usernameTemplate, ca));
    }
  }

  /**
   * Where `proxy` forwards: its own endpoint when it is an endpoint's Proxy (undefined once that
   * endpoint is no longer listed), else one chosen by hash among those listed (a pool member).
   */
  async routeOf(proxy: string): Promise<{ endpoint: UpstreamEndpoint; hop: ChainHop } | undefined> {
    const list = await this.current();
    const own = list.find((e) => e.proxy === proxy);
    // An endpoint's Proxy whose endpoint went is not moved to another one: it fails until the sync deletes it.
    const endpoint = own ?? (this.#everListed.has(proxy) ? undefined : endpointByHash(list, proxy));
    return endpoint ? { endpoint, hop: hopFor(endpoint, proxy) } : undefined;
  }
}
