import { join, resolve } from 'node:path';
import { ConfigError, EgressError, UsageError } from '../errors.ts';
import type { ApiClientOptions } from './api-client.ts';
import { findRunningApi, LOCAL_TOKEN_FILE, readTokenFile } from './local-api-access.ts';

export const DEFAULT_API_URL = 'http://127.0.0.1:8080';

export interface ApiAccessFlags {
  /** `--api-url` / EGRESS_API_URL; absent: the running API of `dataDir`, else DEFAULT_API_URL. */
  apiUrl: string | undefined;
  /** `--token-file` / EGRESS_API_TOKEN_FILE. */
  tokenFile: string | undefined;
  /** EGRESS_API_TOKEN. */
  token: string | undefined;
  /** `--data-dir` / EGRESS_DATA_DIR (default `.egress`). */
  dataDir: string;
}

function parseUrl(text: string): URL {
  try {
    return new URL(text);
  } catch {
    throw new UsageError(`--api-url: not a URL: "${text}"`);
  }
}

/**
 * Which API the client commands talk to and with which token. Explicit flags and variables win;
 * otherwise the `egress up` running from the data directory: its recorded URL, and its token —
 * sent only to that URL (a token read from the data directory never goes to another listener,
 * which anyone could have opened on a free port).
 */
export async function resolveApiAccess(flags: ApiAccessFlags): Promise<ApiClientOptions> {
  const running = await findRunningApi(resolve(flags.dataDir));
  const baseUrl = flags.apiUrl ?? running?.url ?? DEFAULT_API_URL;
  const target = parseUrl(baseUrl);
  if (flags.tokenFile) {
    let token: string | undefined;
    try {
      token = await readTokenFile(flags.tokenFile);
    } catch (err) {
      throw new ConfigError('--token-file', `cannot read ${flags.tokenFile}: ${(err as Error).message}`, { cause: err });
    }
    if (!token) throw new ConfigError('--token-file', `${flags.tokenFile} holds no token`);
    return { baseUrl, token };
  }
  if (flags.token) return { baseUrl, token: flags.token };
  if (running?.tokenFile && parseUrl(running.url).origin === target.origin) {
    const token = await readTokenFile(running.tokenFile).catch(() => undefined);
    if (token) return { baseUrl, token };
  }
  return { baseUrl };
}

/** `egress token`: the data directory's API token, as `egress up` made it. */
export async function localTokenOf(dataDir: string): Promise<string> {
  const file = join(resolve(dataDir), LOCAL_TOKEN_FILE);
  const token = await readTokenFile(file).catch(() => undefined);
  if (!token)
    throw new EgressError('ERR_NO_TOKEN', `no API token in ${file}: \`egress up\` makes it at its first start (pass --data-dir for another data directory)`);
  return token;
}

/** `egress url`: the API the client commands would talk to; an error (exit 1) when none is given and none runs. */
export async function apiUrlOf(apiUrl: string | undefined, dataDir: string): Promise<string> {
  if (apiUrl !== undefined) return parseUrl(apiUrl).href.replace(/\/$/, '');
  const running = await findRunningApi(resolve(dataDir));
  if (!running)
    throw new EgressError(
      'ERR_NOT_RUNNING',
      `no \`egress up\` runs from ${resolve(dataDir)}: start it (npm start), or pass --data-dir (EGRESS_DATA_DIR) or --api-url (EGRESS_API_URL)`,
    );
  return running.url;
}
