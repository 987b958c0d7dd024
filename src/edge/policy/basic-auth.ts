/**
 * `--basic-auth USER:PASS` at the edge. Passwords are stored as scrypt hashes (src/store/password.ts),
 * which cost tens of milliseconds of CPU per check by design; a browser or a keep-alive client sends the
 * same Authorization value on every request, so a successful check is remembered for a while.
 *
 * The trade-off (docs/policies.md): the cache is keyed by an HMAC of the header value under a key that
 * lives only in this process, so memory holds no password and no plain hash of one; an entry lasts
 * CACHE_TTL_MS, and the whole cache goes with the compiled policy when the policy changes, so a removed
 * user or a changed password stops working at once on this edge. What the cache gives an attacker: none
 * of it helps guessing (failures are never cached, each costs a full scrypt, and are throttled per client
 * address by the caller); someone holding a working value skips the scrypt cost, as they would anyway.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { verifyPassword } from '../../store/password.js';

export const CACHE_ENTRIES = 1024;
export const CACHE_TTL_MS = 10 * 60_000;

/** Checked against an unknown user, so a wrong name costs what a wrong password does. */
const DECOY_HASH = 'scrypt$16384$8$1$ZGVjb3lkZWNveWRlY295$tIcCGv0LV0bVPAQ2UZ0Ypdk8A7w3ZyIb8iAP0m3G2Xs=';
const cacheKeySecret = randomBytes(32);

export type BasicAuthOutcome = 'ok' | 'missing' | 'wrong';

export class BasicAuthGate {
  private readonly users: Map<string, string>;
  /** HMAC of the header value → when the success expires. Insertion order is age order. */
  private readonly verified = new Map<string, number>();
  /** Checks under way, so a burst with one new value runs one scrypt. */
  private readonly pending = new Map<string, Promise<BasicAuthOutcome>>();

  constructor(
    users: readonly { user: string; hash: string }[],
    private readonly clock: () => number = Date.now,
  ) {
    this.users = new Map(users.map(({ user, hash }) => [user, hash]));
  }

  /** 'ok' from the cache at once; a Promise when scrypt has to run. */
  check(authorization: string | undefined): BasicAuthOutcome | Promise<BasicAuthOutcome> {
    if (authorization === undefined || !/^basic /i.test(authorization)) return 'missing';
    const key = createHmac('sha256', cacheKeySecret).update(authorization).digest('base64');
    const expires = this.verified.get(key);
    if (expires !== undefined) {
      if (expires > this.clock()) return 'ok';
      this.verified.delete(key);
    }
    let running = this.pending.get(key);
    if (running === undefined) {
      running = this.verify(authorization.slice(6).trim()).then((outcome) => {
        this.pending.delete(key);
        if (outcome === 'ok') this.remember(key);
        return outcome;
      });
      this.pending.set(key, running);
    }
    return running;
  }

  get cacheSize(): number {
    return this.verified.size;
  }

  private remember(key: string): void {
    if (this.verified.size >= CACHE_ENTRIES) this.verified.delete(this.verified.keys().next().value!);
    this.verified.set(key, this.clock() + CACHE_TTL_MS);
  }

  private async verify(encoded: string): Promise<BasicAuthOutcome> {
    const decoded = Buffer.from(encoded, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon === -1) return 'wrong';
    const hash = this.users.get(decoded.slice(0, colon));
    const matches = await verifyPassword(decoded.slice(colon + 1), hash ?? DECOY_HASH);
    return matches && hash !== undefined ? 'ok' : 'wrong';
  }
}
