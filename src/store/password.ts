/**
 * Basic-auth passwords at rest: scrypt (node:crypto) with a random salt, stored as
 * `scrypt$N$r$p$<salt b64>$<hash b64>`, and checked by recomputing and comparing in constant time.
 * N=2^14, r=8, p=1 costs about 30-60 ms of one core and 16 MiB per check, which is why the edge caches
 * successful checks (src/edge/policy/basic-auth.ts).
 */
import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

const COST = 16384;
const BLOCK = 8;
const PARALLEL = 1;
const KEY_BYTES = 32;

function scryptAsync(password: string, salt: Buffer, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password, salt, KEY_BYTES, options, (error, key) => (error === null ? resolve(key) : reject(error)));
  });
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await scryptAsync(password, salt, { N: COST, r: BLOCK, p: PARALLEL, maxmem: 64 * 1024 * 1024 });
  return `scrypt$${COST}$${BLOCK}$${PARALLEL}$${salt.toString('base64')}$${hash.toString('base64')}`;
}

export function isPasswordHash(value: string): boolean {
  return /^scrypt\$[0-9]+\$[0-9]+\$[0-9]+\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/.test(value);
}

/** Whether `password` matches `stored`; false for a malformed hash. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [N, r, p] = [Number(parts[1]), Number(parts[2]), Number(parts[3])];
  if (!(N >= 2 && N <= 1 << 20 && r >= 1 && r <= 32 && p >= 1 && p <= 16)) return false;
  const expected = Buffer.from(parts[5]!, 'base64');
  if (expected.length !== KEY_BYTES) return false;
  const actual = await scryptAsync(password, Buffer.from(parts[4]!, 'base64'), { N, r, p, maxmem: 256 * N * r + 1024 * 1024 * 64 });
  return timingSafeEqual(actual, expected);
}
