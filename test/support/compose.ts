import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { parse } from 'yaml';
import { ROOT } from './cli.ts';

export interface ComposeService {
  image?: string;
  build?: string;
  entrypoint?: string[];
  user?: string;
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  secrets?: string[];
  healthcheck?: { test?: string[] };
  depends_on?: Record<string, { condition: string }>;
}

export interface ComposeFile {
  services: Record<string, ComposeService>;
  secrets: Record<string, { file: string }>;
}

/** docker-compose.yml of the repository, parsed. */
export async function readCompose(): Promise<ComposeFile> {
  return parse(await readFile(resolve(ROOT, 'docker-compose.yml'), 'utf8')) as ComposeFile;
}

/** The named volume the one-shot `tokens` service copies the API tokens secret into, and the file's name in it. */
export const TOKENS_VOLUME = 'egress-tokens';
export const TOKENS_FILE = 'api-tokens';

/** The services built from this repository's Dockerfile that run an egress role (not the one-shot `tokens`), by name. */
export function egressServices(compose: ComposeFile): [string, ComposeService][] {
  return Object.entries(compose.services).filter(([, s]) => s.build !== undefined && s.entrypoint === undefined);
}

/** Container paths of a service's bind mounts, secrets and the tokens volume's file, mapped to files on this machine. */
export function mountsOf(service: ComposeService, secretFile: string): Map<string, string> {
  const mounts = new Map<string, string>();
  for (const v of service.volumes ?? []) {
    const [host, container] = v.split(':');
    if (host === TOKENS_VOLUME && container) mounts.set(`${container}/${TOKENS_FILE}`, secretFile);
    else if (host && container) mounts.set(container, resolve(ROOT, host));
  }
  for (const secret of service.secrets ?? []) mounts.set(`/run/secrets/${secret}`, secretFile);
  return mounts;
}

/** The value after `flag` in a command line. */
export function flagValue(args: readonly string[], flag: string): string | undefined {
  const at = args.indexOf(flag);
  return at >= 0 ? args[at + 1] : undefined;
}

/** A copy of `args` with the value after `flag` replaced (the flag must be there). */
export function withFlag(args: readonly string[], flag: string, value: string): string[] {
  const at = args.indexOf(flag);
  if (at < 0) throw new Error(`${flag} is not in ${args.join(' ')}`);
  return args.map((a, i) => (i === at + 1 ? value : a));
}
