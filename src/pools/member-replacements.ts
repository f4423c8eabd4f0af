/**
 * Member replacement requests live in src/store/member-replacements.ts beside the other Redis
 * adapters: src/store/create-stores.ts builds them, and a store that imported src/pools would make
 * src/store and src/pools import each other as soon as src/pools reads a store (the layering test).
 * This module keeps the contract's import path.
 */
export { RedisMemberReplacements, type MemberReplacements, type ReplacementRequest } from '../store/member-replacements.ts';
