/**
 * Secrets at rest (docs/policies.md, "Secrets at rest"): webhook secrets and OIDC client secrets on
 * reservations are sealed with AES-256-GCM under a key the edge keeps in a file of its own, outside the
 * LMDB environment and outside Redis, so a copy of the database (`burrow admin backup`, a Redis dump)
 * does not reveal them. The same key seals the OIDC sign-in cookies.
 *
 * The key file is text, mode 0600, one key per line, the first one current:
 *     burrow-secret-key v1 <key id: 8 hex> <32 bytes, base64>
 * A sealed value is `sk1.<key id>.<base64url(iv[12] | ciphertext | tag[16])>` and names its key, so a
 * rotation (`burrow admin rotate-secret-key`) can add a key, re-seal everything under it, then drop the
 * old one, and every edge of a cluster can hold both keys while that happens.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, statSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { BurrowError } from '../errors.js';

const LINE = /^burrow-secret-key v1 ([0-9a-f]{8}) ([A-Za-z0-9+/]{43}=)$/;
const SEALED = /^sk1\.([0-9a-f]{8})\.([A-Za-z0-9_-]+)$/;
const IV_BYTES = 12;
const TAG_BYTES = 16;

interface Key {
  id: string;
  bytes: Buffer;
}

/** The default key file: beside the LMDB files in the data directory, never inside the environment. */
export function defaultSecretKeyFile(dataDir: string): string {
  return join(dataDir, 'secret.key');
}

export class SecretBox {
  private keys: Key[];
  private reloadedAt = 0;
  /** The key file as last read (inode and modification time): a rotation replaces it. */
  private fileStamp: string;

  private constructor(
    readonly path: string,
    keys: Key[],
    private readonly clock: () => number = Date.now,
  ) {
    this.keys = keys;
    this.fileStamp = stampOf(path);
  }

  /**
   * Opens the key file, creating it (mode 0600, one fresh key) when it does not exist. Refuses a file
   * that others can read or that holds no valid key: the message names the file and the fix.
   */
  static open(path: string, { create = true } = {}): SecretBox {
    if (!existsSync(path)) {
      if (!create) throw new BurrowError('INVALID_REQUEST', `The secret key file ${path} does not exist.`);
      mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
      writeKeyFile(path, [newKey()], 'wx');
    }
    return new SecretBox(path, readKeyFile(path));
  }

  /** The current key's id (the one new values are sealed with). */
  get currentKeyId(): string {
    return this.keys[0]!.id;
  }

  get keyIds(): string[] {
    return this.keys.map((key) => key.id);
  }

  /**
   * Seals `plain`. `purpose` is authenticated with it (GCM's additional data): a value sealed for one
   * purpose (a webhook secret, one host's sign-in cookie) does not open as another.
   */
  seal(plain: string | Buffer, purpose = 'secret'): string {
    // A rotation (`burrow admin rotate-secret-key`, maybe while this edge runs) put a new key first:
    // seal under it from now on. One stat per seal; seals are rare (a policy stored, a sign-in).
    if (stampOf(this.path) !== this.fileStamp) this.reload(true);
    const key = this.keys[0]!;
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key.bytes, iv);
    cipher.setAAD(Buffer.from(purpose, 'utf8'));
    const body = Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
    return `sk1.${key.id}.${body.toString('base64url')}`;
  }

  /** Opens a sealed value; null when it is not one, was sealed for another purpose, or was altered. */
  openBytes(sealed: string, purpose = 'secret'): Buffer | null {
    const match = SEALED.exec(sealed);
    if (match === null) return null;
    let key = this.keys.find((candidate) => candidate.id === match[1]);
    if (key === undefined && this.reload()) key = this.keys.find((candidate) => candidate.id === match[1]);
    if (key === undefined) return null;
    const body = Buffer.from(match[2]!, 'base64url');
    if (body.length < IV_BYTES + TAG_BYTES) return null;
    try {
      const decipher = createDecipheriv('aes-256-gcm', key.bytes, body.subarray(0, IV_BYTES));
      decipher.setAAD(Buffer.from(purpose, 'utf8'));
      decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
      return Buffer.concat([decipher.update(body.subarray(IV_BYTES, body.length - TAG_BYTES)), decipher.final()]);
    } catch {
      return null;
    }
  }

  open(sealed: string, purpose = 'secret'): string | null {
    return this.openBytes(sealed, purpose)?.toString('utf8') ?? null;
  }

  /** The key id a sealed value names, or null. */
  static keyIdOf(sealed: string): string | null {
    return SEALED.exec(sealed)?.[1] ?? null;
  }

  /** Puts a new key first (the current one); old keys stay so values sealed under them still open. */
  addKey(): string {
    const key = newKey();
    this.keys = [key, ...readKeyFile(this.path)];
    writeKeyFile(this.path, this.keys, 'replace');
    this.fileStamp = stampOf(this.path);
    return key.id;
  }

  /** Keeps only the current key (after everything was re-sealed under it). */
  dropOldKeys(): string[] {
    this.keys = readKeyFile(this.path);
    const dropped = this.keys.slice(1).map((key) => key.id);
    this.keys = this.keys.slice(0, 1);
    if (dropped.length > 0) writeKeyFile(this.path, this.keys, 'replace');
    this.fileStamp = stampOf(this.path);
    return dropped;
  }

  /**
   * Reads the file again when a value names a key this process does not hold (another edge or the admin
   * command rotated): at most once a second, so forged key ids cannot make every request read a file.
   */
  private reload(changed = false): boolean {
    const now = this.clock();
    if (!changed && now - this.reloadedAt < 1000) return false;
    this.reloadedAt = now;
    try {
      const stamp = stampOf(this.path);
      this.keys = readKeyFile(this.path);
      this.fileStamp = stamp;
      return true;
    } catch {
      // A file being replaced, or made unreadable: keep the keys in memory.
      return false;
    }
  }
}

/** What changes when the file is replaced or rewritten: its inode, size and modification time. */
function stampOf(path: string): string {
  try {
    const stat = statSync(path);
    return `${stat.ino}:${stat.size}:${stat.mtimeMs}`;
  } catch {
    return '';
  }
}

function newKey(): Key {
  return { id: randomBytes(4).toString('hex'), bytes: randomBytes(32) };
}

function readKeyFile(path: string): Key[] {
  const mode = statSync(path).mode & 0o777;
  if ((mode & 0o077) !== 0) {
    throw new BurrowError('INVALID_REQUEST', `The secret key file ${path} is readable by others (mode ${mode.toString(8)}); run: chmod 600 ${path}`);
  }
  const keys: Key[] = [];
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#')) continue;
    const match = LINE.exec(trimmed);
    if (match === null) throw new BurrowError('INVALID_REQUEST', `The secret key file ${path} has a line that is not "burrow-secret-key v1 <id> <base64 key>".`);
    keys.push({ id: match[1]!, bytes: Buffer.from(match[2]!, 'base64') });
  }
  if (keys.length === 0) throw new BurrowError('INVALID_REQUEST', `The secret key file ${path} holds no key.`);
  return keys;
}

/** Writes the whole file: a new file exclusively, or a replacement through a 0600 temporary and a rename. */
function writeKeyFile(path: string, keys: Key[], how: 'wx' | 'replace'): void {
  const text =
    '# Burrow edge secret key (docs/policies.md). Keep it private, back it up apart from the data.\n' +
    keys.map((key) => `burrow-secret-key v1 ${key.id} ${key.bytes.toString('base64')}\n`).join('');
  const target = how === 'wx' ? path : `${path}.${process.pid}.tmp`;
  const fd = openSync(target, 'wx', 0o600);
  try {
    writeSync(fd, text);
  } finally {
    closeSync(fd);
  }
  chmodSync(target, 0o600);
  if (how === 'replace') renameSync(target, path);
}
