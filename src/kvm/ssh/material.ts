/**
 * SSH material of a host, read from files at dial time: the private key (never logged, never
 * put in an error message) and the known_hosts entries. Any failure is a DialError of stage
 * `ssh-material`.
 */
import { readFile } from 'node:fs/promises';
import ssh2 from 'ssh2';
import { EgressError } from '../../errors.ts';
import { DialError } from '../dial.ts';
import { parseKnownHosts, type KnownHostEntry } from './known-hosts.ts';

/** A key or known_hosts file that exists but cannot be used. */
export class SshMaterialError extends EgressError {
  readonly file: string;
  constructor(file: string, message: string, options: { cause?: unknown } = {}) {
    super('ERR_KVM_SSH_MATERIAL', message, { retryable: true, ...options });
    this.file = file;
  }
}

export interface SshMaterial {
  /** The private key file's content, as ssh2 wants it. */
  privateKey: Buffer;
  /** Entries of the known_hosts file; undefined when verification is skipped. */
  knownHosts: KnownHostEntry[] | undefined;
}

export interface SshMaterialSource {
  name: string;
  privateKeyFile: string;
  knownHostsFile?: string | undefined;
  insecureIgnoreHostKey: boolean;
}

export async function loadSshMaterial(host: SshMaterialSource, signal: AbortSignal): Promise<SshMaterial> {
  try {
    signal.throwIfAborted();
    const privateKey = await readFile(host.privateKeyFile, { signal });
    const parsed = ssh2.utils.parseKey(privateKey);
    if (parsed instanceof Error) {
      // ssh2's message names the problem (format, missing passphrase), never the key itself.
      throw new SshMaterialError(host.privateKeyFile, `private key file ${host.privateKeyFile}: ${parsed.message}`, { cause: parsed });
    }
    let knownHosts: KnownHostEntry[] | undefined;
    if (!host.insecureIgnoreHostKey) {
      if (!host.knownHostsFile) {
        throw new SshMaterialError('', `host ${host.name}: no knownHostsFile and insecureIgnoreHostKey is false`);
      }
      knownHosts = parseKnownHosts(await readFile(host.knownHostsFile, { encoding: 'utf8', signal }));
    }
    return { privateKey, knownHosts };
  } catch (err) {
    throw new DialError('ssh-material', host.name, err);
  }
}
