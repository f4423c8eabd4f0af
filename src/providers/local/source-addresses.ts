import { isIP } from 'node:net';
import { mkdir, open, readdir, readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import ipaddr from 'ipaddr.js';
import { z } from 'zod';
import { ProvisioningError } from '../lifecycle.ts';

/**
 * `sourceAddresses` of the local provider: addresses of this machine (single ones or CIDR blocks,
 * IPv4 or IPv6, e.g. an IPv6 /64 routed to the host) that local proxies send their traffic from,
 * one per proxy. Each proxy's address is claimed by a file `<dataDir>/addresses/<address>` created
 * exclusively (so workers sharing the data directory never hand one out twice), recorded in its
 * `intent.json` (so it survives host restarts) and released when the proxy is deleted.
 */

/** One entry: an IP address or a CIDR block, in the canonical text `net.isIP` accepts. */
export const sourceAddressEntry = z.string().superRefine((text, ctx) => {
  if (parseEntry(text) === undefined) {
    ctx.addIssue({ code: 'custom', message: `"${text.slice(0, 80)}" is not an IP address or a CIDR block (e.g. 127.0.0.2, 10.0.0.0/24, 2001:db8:1::/64)` });
  }
});

export const sourceAddressesSchema = z.array(sourceAddressEntry).min(1, 'give at least one address or CIDR block, or leave the field out');

interface Block {
  v6: boolean;
  /** First and last usable address, as integers. */
  first: bigint;
  last: bigint;
}

function toBigInt(address: ipaddr.IPv4 | ipaddr.IPv6): bigint {
  return address.toByteArray().reduce((n, byte) => (n << 8n) | BigInt(byte), 0n);
}

function fromBigInt(value: bigint, v6: boolean): string {
  const bytes: number[] = [];
  for (let i = 0, v = value; i < (v6 ? 16 : 4); i++, v >>= 8n) bytes.unshift(Number(v & 0xffn));
  return ipaddr.fromByteArray(bytes).toString();
}

function parseEntry(text: string): Block | undefined {
  const [addressText, prefixText, ...rest] = text.split('/');
  if (addressText === undefined || rest.length > 0 || isIP(addressText) === 0) return undefined;
  let address: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    address = ipaddr.parse(addressText);
  } catch {
    return undefined;
  }
  const v6 = address.kind() === 'ipv6';
  const bits = v6 ? 128 : 32;
  if (prefixText !== undefined && !/^[0-9]{1,3}$/.test(prefixText)) return undefined;
  const prefix = prefixText === undefined ? bits : Number(prefixText);
  if (prefix > bits) return undefined;
  const size = 1n << BigInt(bits - prefix);
  const base = (toBigInt(address) / size) * size;
  let first = base;
  let last = base + size - 1n;
  // The network and broadcast addresses of an IPv4 block, and an IPv6 block's subnet-router anycast, are no source.
  if (!v6 && prefix <= 30) {
    first += 1n;
    last -= 1n;
  } else if (v6 && prefix <= 126) first += 1n;
  return { v6, first, last };
}

/** The addresses of `entries` in order (lazily: a /64 is never spelled out). Entries must have passed the schema. */
export function* sourceAddressCandidates(entries: readonly string[]): Generator<string> {
  const seen = new Set<string>();
  for (const entry of entries) {
    const block = parseEntry(entry);
    if (!block) continue;
    for (let n = block.first; n <= block.last; n++) {
      const address = fromBigInt(n, block.v6);
      if (seen.has(address)) continue;
      seen.add(address);
      yield address;
    }
  }
}

/** Whether `address` lies in one of `entries`' usable ranges. */
export function inSourceAddresses(entries: readonly string[], address: string): boolean {
  const one = parseEntry(address);
  if (!one) return false;
  return entries.some((entry) => {
    const block = parseEntry(entry);
    return block !== undefined && block.v6 === one.v6 && one.first >= block.first && one.first <= block.last;
  });
}

export function addressesDir(dataDir: string): string {
  return join(dataDir, 'addresses');
}

/** The claim file of an address (`:` is fine in a Linux file name). */
function claimPath(dataDir: string, address: string): string {
  return join(addressesDir(dataDir), address);
}

/** A claim older than this whose instance has no intent naming it is a leftover of a crash, free again. */
const ORPHAN_AFTER_MS = 60_000;

async function claimedBy(dataDir: string, address: string): Promise<string | undefined> {
  return (await readFile(claimPath(dataDir, address), 'utf8').catch(() => '')).trim() || undefined;
}

export interface SourceAddressPool {
  /**
   * The address of instance `name`: the one it already claimed, else the first free one, claimed now.
   * `recorded` is what its intent.json says (kept when it is still claimed by it, or free).
   * Throws ProvisioningError when every address is taken.
   */
  claim(name: string, recorded: string | undefined, signal: AbortSignal): Promise<string>;
  /** Frees the address of instance `name` (no error when it holds none). */
  release(name: string, address: string | undefined): Promise<void>;
}

/**
 * `intentAddress(name)` reads what an instance's intent records (undefined when it has no intent):
 * a claim whose instance records another address, or none for a minute, was left by a crash.
 */
export function createSourceAddressPool(
  dataDir: string,
  entries: readonly string[],
  intentAddress: (name: string) => Promise<string | undefined>,
): SourceAddressPool {
  async function tryClaim(name: string, address: string): Promise<boolean> {
    try {
      const handle = await open(claimPath(dataDir, address), 'wx', 0o600);
      await handle.writeFile(`${name}\n`);
      await handle.close();
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw err;
    }
  }

  async function isOrphan(address: string, owner: string): Promise<boolean> {
    if ((await intentAddress(owner)) === address) return false;
    const since = await stat(claimPath(dataDir, address)).then(
      (s) => Date.now() - s.mtimeMs,
      () => 0,
    );
    return since > ORPHAN_AFTER_MS;
  }

  return {
    async claim(name, recorded, signal) {
      await mkdir(addressesDir(dataDir), { recursive: true, mode: 0o700 });
      if (recorded !== undefined && inSourceAddresses(entries, recorded)) {
        const owner = await claimedBy(dataDir, recorded);
        if (owner === name || (owner === undefined && (await tryClaim(name, recorded)))) return recorded;
      }
      const taken = new Map<string, string>();
      for (const file of await readdir(addressesDir(dataDir))) {
        if (file.endsWith('.tmp')) continue;
        const owner = await claimedBy(dataDir, file);
        // A claim left by a crash between claiming and recording it: the same instance takes it back.
        if (owner === name) return file;
        if (owner !== undefined) taken.set(file, owner);
      }
      let checked = 0;
      for (const address of sourceAddressCandidates(entries)) {
        if (++checked % 1024 === 0) signal.throwIfAborted();
        const owner = taken.get(address);
        if (owner !== undefined) {
          if (!(await isOrphan(address, owner))) continue;
          await rm(claimPath(dataDir, address), { force: true });
        }
        if (await tryClaim(name, address)) return address;
      }
      throw new ProvisioningError(
        `sourceAddresses: every address is taken (${taken.size} claimed by local proxies of ${dataDir}; configured: ${entries.join(', ')}); add addresses or delete proxies`,
      );
    },
    async release(name, address) {
      if (address === undefined) return;
      if ((await claimedBy(dataDir, address)) === name) await rm(claimPath(dataDir, address), { force: true });
    },
  };
}
