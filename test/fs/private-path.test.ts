import { chmod, chown, mkdir, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeEach, describe, expect, test } from 'vitest';
import { ensureOwnedDir, resolveTrustedDir, UnsafePathError, verifyOwnedFile, verifyTrustedDir } from '../../src/fs/private-path.ts';
import { tempDir } from '../support/temp-dirs.ts';

/** The tests run as root (the project's test machine and CI); hostile directories belong to nobody. */
const NOBODY = 65534;
const ME = process.getuid?.() ?? 0;

let base: string;

beforeEach(async () => {
  base = await tempDir('egress-private-path-');
});

/** Makes `path` with `mode` (chmod, so the umask does not narrow it) and owner `uid`. */
async function dir(path: string, mode: number, uid = ME): Promise<string> {
  await mkdir(path, { recursive: true });
  await chown(path, uid, uid);
  await chmod(path, mode);
  return path;
}

async function refusal(run: Promise<unknown>): Promise<UnsafePathError> {
  const err = await run.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(UnsafePathError);
  return err as UnsafePathError;
}

const mine = (uid = ME): string => `it must be owned by uid ${uid} and not writable by group or others`;
const above = (leaf: string): string =>
  `every directory above ${leaf} must be owned by uid 0 and not writable by group or others (a sticky directory owned by uid 0, like /tmp, excepted)`;

describe('a trusted directory (StrictModes-like checks)', () => {
  test.each([
    ['owned by another user', 0o700, NOBODY, '0700'],
    ['group-writable', 0o770, ME, '0770'],
    ['world-writable', 0o777, ME, '0777'],
    ['world-writable and another user’s', 0o777, NOBODY, '0777'],
  ])('is refused when %s, naming the path, the owner and the mode', async (_what, mode, uid, shown) => {
    const leaf = await dir(join(base, 'data'), mode, uid);
    const err = await refusal(resolveTrustedDir(leaf));
    expect(err.message).toBe(`${leaf} is owned by uid ${uid} with mode ${shown}; ${mine()}`);
    expect(err).toMatchObject({ code: 'ERR_UNSAFE_PATH', path: leaf, ownerUid: uid, mode, retryable: false });
    // Checked, never changed.
    expect((await stat(leaf)).mode & 0o7777).toBe(mode);
  });

  test('a sticky directory as the trusted one is refused with a hint, even when it is ours', async () => {
    const leaf = await dir(join(base, 'shared'), 0o1777);
    const err = await refusal(resolveTrustedDir(leaf, { create: true }));
    expect(err.message).toBe(`${leaf} is owned by uid ${ME} with mode 1777; ${mine()} (a shared directory, like /tmp: use a directory of its own inside it)`);
  });

  test('a root-owned sticky ancestor (like /tmp) is fine: the next component is ours', async () => {
    const shared = await dir(join(base, 'shared'), 0o1777, 0);
    const leaf = await dir(join(shared, 'mine'), 0o700);
    expect(await resolveTrustedDir(leaf)).toBe(leaf);
    await verifyTrustedDir(leaf);
  });

  test.each([
    ['a foreign-owned child of a sticky ancestor', 0o1777, 0, 0o755, NOBODY, 'evil', '0755'],
    ['a sticky ancestor that root does not own', 0o1777, NOBODY, 0o700, ME, 'shared', '1777'],
    ['a group-writable ancestor of ours', 0o775, ME, 0o700, ME, 'shared', '0775'],
    ['an ancestor owned by another user, not writable', 0o755, NOBODY, 0o700, ME, 'shared', '0755'],
  ])('is refused below %s, naming that ancestor', async (_what, sharedMode, sharedUid, middleMode, middleUid, named, shown) => {
    const shared = await dir(join(base, 'shared'), sharedMode, sharedUid);
    const middle = await dir(join(shared, 'evil'), middleMode, middleUid);
    const leaf = await dir(join(middle, 'data'), 0o700);
    const bad = named === 'shared' ? shared : middle;
    const err = await refusal(resolveTrustedDir(leaf));
    expect(err.message).toBe(`${bad} is owned by uid ${named === 'shared' ? sharedUid : middleUid} with mode ${shown}; ${above(leaf)}`);
    await refusal(verifyTrustedDir(leaf));
  });

  test('a foreign-owned directory directly in a sticky one is refused as the trusted directory itself', async () => {
    const shared = await dir(join(base, 'shared'), 0o1777, 0);
    const evil = await dir(join(shared, 'evil'), 0o777, NOBODY);
    expect((await refusal(resolveTrustedDir(evil))).message).toBe(`${evil} is owned by uid ${NOBODY} with mode 0777; ${mine()}`);
  });

  test('symbolic links are resolved once (the resolved path is returned and checked), and refused when checked again', async () => {
    const real = await dir(join(base, 'real'), 0o700);
    const link = join(base, 'link');
    await symlink(real, link);
    expect(await resolveTrustedDir(link)).toBe(real);
    expect(await resolveTrustedDir(join(link, 'sub'), { create: true })).toBe(join(real, 'sub'));
    const err = await refusal(verifyTrustedDir(join(link, 'sub')));
    expect(err.message).toBe(`${link} is a symbolic link (owned by uid ${ME}); a trusted path has none once resolved`);
    // A link to a directory that may not be trusted: the directory it points to is what is judged.
    const evil = await dir(join(base, 'evil'), 0o777, NOBODY);
    const toEvil = join(base, 'to-evil');
    await symlink(evil, toEvil);
    expect((await refusal(resolveTrustedDir(toEvil))).message).toBe(`${evil} is owned by uid ${NOBODY} with mode 0777; ${mine()}`);
  });

  test('with create, the missing part is made 0700 and group and other bits are taken off; without, nothing is made', async () => {
    const leaf = join(base, 'a', 'b');
    expect(await resolveTrustedDir(leaf)).toBe(leaf);
    await expect(stat(join(base, 'a'))).rejects.toThrow(/ENOENT/);
    expect(await resolveTrustedDir(leaf, { create: true })).toBe(leaf);
    expect((await stat(join(base, 'a'))).mode & 0o7777).toBe(0o700);
    expect((await stat(leaf)).mode & 0o7777).toBe(0o700);
    const readable = await dir(join(base, 'readable'), 0o755);
    await resolveTrustedDir(readable, { create: true });
    expect((await stat(readable)).mode & 0o7777).toBe(0o700);
    await refusal(verifyTrustedDir(join(base, 'missing')));
  });

  test('a non-root user: root-owned ancestors are fine, the directory itself must be the user’s', async () => {
    const leaf = await dir(join(base, 'data'), 0o700, 0);
    expect((await refusal(resolveTrustedDir(leaf, { uid: 1000 }))).message).toBe(`${leaf} is owned by uid 0 with mode 0700; ${mine(1000)}`);
    const theirs = await dir(join(base, 'theirs'), 0o700, 1000);
    expect(await resolveTrustedDir(theirs, { uid: 1000 })).toBe(theirs);
  });

  test('with treeDepth, what lies beneath must be ours and not writable by group or others', async () => {
    const leaf = await dir(join(base, 'data'), 0o700);
    await dir(join(leaf, 'instances', 'p1'), 0o700);
    await writeFile(join(leaf, 'instances', 'p1', 'intent.json'), '{}', { mode: 0o644 });
    expect(await resolveTrustedDir(leaf, { treeDepth: 3 })).toBe(leaf);
    const bin = await dir(join(leaf, 'bin'), 0o777, NOBODY);
    expect((await refusal(resolveTrustedDir(leaf, { treeDepth: 3 }))).message).toBe(`${bin} is owned by uid ${NOBODY} with mode 0777; ${mine()}`);
    await chown(bin, ME, ME);
    await chmod(bin, 0o700);
    const planted = join(leaf, 'instances', 'p1', 'credentials.json');
    await writeFile(planted, '{}');
    await chown(planted, NOBODY, NOBODY);
    expect((await refusal(resolveTrustedDir(leaf, { treeDepth: 3 }))).path).toBe(planted);
  });

  test('ensureOwnedDir makes a subdirectory 0700 or refuses one that is not ours; verifyOwnedFile refuses links and foreign files', async () => {
    const leaf = await dir(join(base, 'data'), 0o700);
    await ensureOwnedDir(join(leaf, 'bin'));
    expect((await stat(join(leaf, 'bin'))).mode & 0o7777).toBe(0o700);
    const host = await dir(join(leaf, 'host'), 0o777, NOBODY);
    expect((await refusal(ensureOwnedDir(host))).message).toBe(`${host} is owned by uid ${NOBODY} with mode 0777; ${mine()}`);
    const program = join(leaf, 'bin', 'program.cjs');
    await writeFile(program, 'x');
    await verifyOwnedFile(program);
    const link = join(leaf, 'bin', 'link.cjs');
    await symlink(program, link);
    expect((await refusal(verifyOwnedFile(link))).message).toBe(`${link} is not a regular file`);
    await chown(program, NOBODY, NOBODY);
    await refusal(verifyOwnedFile(program));
  });
});
