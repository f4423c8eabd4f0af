import { randomInt } from 'node:crypto';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
/** Characters of a member name's suffix: `<pool>-<5 characters>`. */
export const MEMBER_SUFFIX_LENGTH = 5;

/** Five random lower-case letters and digits (36^5, about 60 million names per pool). */
export function randomSuffix(): string {
  let out = '';
  for (let i = 0; i < MEMBER_SUFFIX_LENGTH; i++) out += ALPHABET[randomInt(ALPHABET.length)];
  return out;
}

/** A member name not in `taken`: `<pool>-<suffix>`, drawing suffixes until one is free. */
export function newMemberName(pool: string, taken: ReadonlySet<string>, suffix: () => string = randomSuffix): string {
  for (let attempt = 0; attempt < 100; attempt++) {
    const name = `${pool}-${suffix()}`;
    if (!taken.has(name)) return name;
  }
  throw new Error(`no free member name for pool "${pool}" after 100 draws`);
}
