import { randomBytes } from 'node:crypto';
import { readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ConfigError } from '../errors.ts';
import { isAlive } from '../redis/process-info.ts';

/**
 * How the user who runs `egress up` (or `egress api`) reaches its API without anyone else on the
 * machine doing so: the process keeps an API token in its data directory (0600 in a 0700
 * directory), and records where it listens beside it; the CLI of the same user, run with the same
 * data directory, finds both by itself. Kept free of heavy imports: every client command loads it.
 */

/** `<dataDir>/api-token`: one named token line (`local:<token>`), usable as `--api-token-file` and `--token-file`. */
export const LOCAL_TOKEN_FILE = 'api-token';
/** `<dataDir>/api-header`: the header line for `curl -H @<dataDir>/api-header`. */
export const LOCAL_HEADER_FILE = 'api-header';
/** `<dataDir>/api.json`: where the running API listens (its URL and pid), while it runs. */
export const RUNNING_API_RECORD = 'api.json';
/** The name events record for callers that use the local token. */
export const LOCAL_TOKEN_NAME = 'local';

const FILE_MODE = 0o600;

/** An octal mode as `ls` users read it: `0644`. */
function octal(mode: number): string {
  return `0${(mode & 0o777).toString(8).padStart(3, '0')}`;
}

/**
 * OpenSSH's rule for private keys, applied to token files: a file of ours that group or others
 * may read or write is refused, and so is any file every local user may read (whoever owns it).
 * A file owned by root or another user and shared only with a group (a Kubernetes Secret volume,
 * 0440 under `fsGroup`) is that owner's decision and is accepted. `allowOpen` (the flag to insist)
 * turns the refusal into a warning, returned for the log.
 */
export async function checkTokenFileMode(file: string, flag: string, allowOpen: boolean): Promise<string | undefined> {
  let st;
  try {
    st = await stat(file);
  } catch (err) {
    throw new ConfigError(flag, `cannot read ${file}: ${(err as Error).message}`, { cause: err });
  }
  const uid = process.getuid?.();
  const ours = uid === undefined || st.uid === uid;
  const open = (ours && (st.mode & 0o077) !== 0) || (st.mode & 0o007) !== 0;
  if (!open) return undefined;
  const problem = `${file} (mode ${octal(st.mode)}, owner uid ${st.uid}) can be read by other users: every token in it is theirs too`;
  if (allowOpen) return `${flag}: ${problem}; used anyway (--allow-open-token-file)`;
  throw new ConfigError(flag, `${problem}; chmod 600 it, or pass --allow-open-token-file to use it anyway`);
}

/** Writes `file` 0600 through a temporary name, so a reader never sees half of it. */
async function writePrivateFile(file: string, text: string): Promise<void> {
  const temp = `${file}.${process.pid}.tmp`;
  await writeFile(temp, text, { mode: FILE_MODE, flag: 'w' });
  await rename(temp, file);
}

/** The token of a token file's first line (`name:token` or `token`). */
function tokenOfLine(text: string): string | undefined {
  const line = text
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l && !l.startsWith('#'));
  if (line === undefined) return undefined;
  const named = /^[A-Za-z][A-Za-z0-9._-]{0,62}:(.+)$/.exec(line);
  return named?.[1] ?? line;
}

export interface LocalToken {
  token: string;
  /** `<dataDir>/api-token`. */
  file: string;
  /** `<dataDir>/api-header`, for `curl -H @…`. */
  headerFile: string;
  /** A warning for the log (an open file used under `--allow-open-token-file`). */
  warning?: string;
}

/**
 * The data directory's API token: read when it exists (refused when others can read it, as any
 * token file), otherwise generated (32 random bytes) with `wx`, so two starters never write two.
 * `dataDir` must already be private (0700, ours). The curl header file is rewritten each time.
 */
export async function ensureLocalToken(dataDir: string, allowOpen = false): Promise<LocalToken> {
  const file = join(dataDir, LOCAL_TOKEN_FILE);
  const headerFile = join(dataDir, LOCAL_HEADER_FILE);
  try {
    await writeFile(file, `${LOCAL_TOKEN_NAME}:${randomBytes(32).toString('base64url')}\n`, { mode: FILE_MODE, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const warning = await checkTokenFileMode(file, '--data-dir', allowOpen);
  const token = tokenOfLine(await readFile(file, 'utf8'));
  if (token === undefined || token.length < 16)
    throw new ConfigError('--data-dir', `${file} holds no usable API token (delete it to have a new one made at the next start)`);
  await writePrivateFile(headerFile, `Authorization: Bearer ${token}\n`);
  return { token, file, headerFile, ...(warning ? { warning } : {}) };
}

/** What `<dataDir>/api.json` holds. */
export interface RunningApi {
  url: string;
  pid: number;
  /** The data directory's token file, when the API uses it (absent: `--api-token-file` or `--no-auth`). */
  tokenFile?: string;
}

/** Records where this process's API listens; the returned function removes the record if it is still ours. */
export async function recordRunningApi(dataDir: string, api: RunningApi): Promise<() => Promise<void>> {
  const file = join(dataDir, RUNNING_API_RECORD);
  await writePrivateFile(file, `${JSON.stringify(api)}\n`);
  return async () => {
    const now = await readRunningApiRecord(dataDir);
    if (now?.pid === api.pid) await rm(file, { force: true });
  };
}

function isRecord(value: unknown): value is RunningApi {
  const v = value as Partial<RunningApi> | null;
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof v.url === 'string' &&
    Number.isInteger(v.pid) &&
    (v.tokenFile === undefined || typeof v.tokenFile === 'string')
  );
}

async function readRunningApiRecord(dataDir: string): Promise<RunningApi | undefined> {
  let text: string;
  try {
    text = await readFile(join(dataDir, RUNNING_API_RECORD), 'utf8');
  } catch {
    return undefined;
  }
  try {
    const parsed: unknown = JSON.parse(text);
    return isRecord(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** The API running from `dataDir`, if its record is there and its process alive; never throws. */
export async function findRunningApi(dataDir: string): Promise<RunningApi | undefined> {
  const record = await readRunningApiRecord(dataDir);
  return record && isAlive(record.pid) ? record : undefined;
}

/** The token of a token file (its first token line), for the CLI. */
export async function readTokenFile(file: string): Promise<string | undefined> {
  return tokenOfLine(await readFile(file, 'utf8'));
}
