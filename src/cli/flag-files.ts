/**
 * What the files the server flags name must hold: the API's bearer tokens (`--api-token-file`),
 * the Redis password (`--redis-password-file`) and the CA certificates Redis's TLS chains to
 * (`--redis-ca-file`). Each is read once at start; every refusal names the flag.
 */
import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { ConfigError } from '../errors.ts';
import { checkTokenFileMode } from './local-api-access.ts';

async function readFlagFile(flag: string, file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    throw new ConfigError(flag, `cannot read ${file}: ${(err as Error).message}`, { cause: err });
  }
}

/** A named token line: `name:token`, the name a letter then up to 62 of letters, digits, `.`, `_`, `-`. */
const NAMED_TOKEN = /^([A-Za-z][A-Za-z0-9._-]{0,62}):(.+)$/;

export interface TokenFile {
  tokens: string[];
  /** Each token's name, in the same order. */
  names: string[];
  /** The file is open to other users (allowed by `--allow-open-token-file`): what to warn. */
  warning?: string;
}

/**
 * The tokens of `--api-token-file`, one a line, each optionally named (`name:token`); a line
 * without a name stays valid and its caller is shown by its position (`#1` for the first token).
 * Names appear in events as who applied or deleted a proxy; the tokens themselves never leave here
 * but for the API's comparison.
 */
export async function readTokens(file: string, allowOpen: boolean): Promise<TokenFile> {
  const warning = await checkTokenFileMode(file, '--api-token-file', allowOpen);
  const lines = (await readFlagFile('--api-token-file', file))
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  if (lines.length === 0) throw new ConfigError('--api-token-file', `${file} holds no token (one token a line)`);
  const tokens: string[] = [];
  const names: string[] = [];
  for (const [i, line] of lines.entries()) {
    const named = NAMED_TOKEN.exec(line);
    const token = named?.[2] ?? line;
    const name = named?.[1] ?? `#${i + 1}`;
    if (token.length < 16) throw new ConfigError('--api-token-file', `every token in ${file} must be at least 16 characters (token ${name} is shorter)`);
    if (named && names.includes(name)) throw new ConfigError('--api-token-file', `${file} names two tokens "${name}": names must be unique`);
    tokens.push(token);
    names.push(name);
  }
  return { tokens, names, ...(warning ? { warning } : {}) };
}

/** The password in `--redis-password-file`: the whole file but one trailing line break. */
export async function readRedisPassword(file: string): Promise<string> {
  const password = (await readFlagFile('--redis-password-file', file)).replace(/\r?\n$/, '');
  if (password === '') throw new ConfigError('--redis-password-file', `${file} is empty: it must hold the password`);
  if (/[\r\n]/.test(password)) throw new ConfigError('--redis-password-file', `${file} must hold the password on one line`);
  return password;
}

/** The PEM certificates in `--redis-ca-file`, checked to parse as X.509. */
export async function readRedisCa(file: string): Promise<string> {
  const pem = await readFlagFile('--redis-ca-file', file);
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new ConfigError('--redis-ca-file', `${file} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
  for (const block of blocks) {
    try {
      new X509Certificate(block);
    } catch (err) {
      throw new ConfigError('--redis-ca-file', `${file} holds a certificate that does not parse: ${(err as Error).message}`, { cause: err });
    }
  }
  return pem;
}
