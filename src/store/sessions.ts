/**
 * Dashboard sessions (docs/dashboard.md): a browser pastes an access token once and gets a random
 * session id in an HttpOnly cookie instead. Only the id's SHA-256 is stored, so a copy of the data
 * directory names no usable session. A session stands for its token: it stops working the moment the
 * token is revoked (checked on every use, no cache), after `idleMs` without use, and at `maxAgeMs` after
 * sign-in whatever the use.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { DashboardSessions, Principal, SessionOptions, SessionRecord } from './account-store.js';
import type { Database, RootDatabase } from 'lmdb';
import { WriteFailures } from './write-failures.js';

export type { SessionRecord, SessionOptions } from './account-store.js';

export const SESSION_IDLE_MS = 12 * 3_600_000;
export const SESSION_MAX_AGE_MS = 7 * 24 * 3_600_000;
/** Sliding the idle deadline costs a write; one per minute per session is plenty. */
const TOUCH_EVERY_MS = 60_000;
const SESSION_ID = /^[A-Za-z0-9_-]{43}$/;

// The rules both implementations (this one on LMDB, RedisSessions in src/store/redis-store.ts) follow.

/** Whether `id` can be a session id at all (43 base64url characters); anything else is never looked up. */
export function isSessionId(id: string): boolean {
  return SESSION_ID.test(id);
}

/** When a session ends at the latest if it is not used again. */
export function sessionEndsAt(record: SessionRecord, idleMs: number, maxAgeMs: number): number {
  return Math.min(record.lastSeenAt + idleMs, record.createdAt + maxAgeMs);
}

/** The session's record with its use moved to `now`, or null when the last write of it is recent enough. */
export function touchedSession(record: SessionRecord, now: number): SessionRecord | null {
  return now - record.lastSeenAt > TOUCH_EVERY_MS ? { ...record, lastSeenAt: now } : null;
}

/** Whether a session still stands for `principal`: its token active and of the same account. */
export function sessionPrincipalHolds(record: SessionRecord, principal: Principal | undefined): principal is Principal {
  return principal !== undefined && principal.account.id === record.accountId;
}

export class SessionStore implements DashboardSessions {
  private readonly sessions: Database<SessionRecord, string>;
  readonly idleMs: number;
  readonly maxAgeMs: number;

  /** `tokens` is the LMDB `Store` the sessions live beside (its `activePrincipal`, read on every use). */
  constructor(
    root: RootDatabase,
    private readonly tokens: { activePrincipal(idSegment: string): Principal | undefined },
    options: SessionOptions = {},
    private readonly failures = new WriteFailures(),
  ) {
    this.sessions = root.openDB({ name: 'dashboard-sessions', encoding: 'msgpack' });
    this.idleMs = options.idleMs ?? SESSION_IDLE_MS;
    this.maxAgeMs = options.maxAgeMs ?? SESSION_MAX_AGE_MS;
  }

  /** Opens a session for an authenticated token; the returned id goes into the cookie and nowhere else. */
  async open(principal: Principal, now = Date.now()): Promise<string> {
    const id = randomBytes(32).toString('base64url');
    const record = { tokenIdSegment: principal.token.idSegment, accountId: principal.account.id, createdAt: now, lastSeenAt: now };
    await this.failures.guard('sessions', this.sessions.put(keyOf(id), record), 'the session');
    return id;
  }

  /** The principal a session id stands for, or undefined (unknown, expired, or its token revoked). */
  resolve(id: string, now = Date.now()): { principal: Principal; record: SessionRecord } | undefined {
    if (!isSessionId(id)) return undefined;
    const key = keyOf(id);
    const record = this.sessions.get(key);
    if (record === undefined) return undefined;
    if (now > this.expiresAt(record)) {
      this.sessions.remove(key).catch(() => undefined);
      return undefined;
    }
    const principal = this.tokens.activePrincipal(record.tokenIdSegment);
    if (!sessionPrincipalHolds(record, principal)) {
      this.sessions.remove(key).catch(() => undefined);
      return undefined;
    }
    const touched = touchedSession(record, now);
    if (touched !== null) this.sessions.put(key, touched).catch(() => undefined);
    return { principal, record: touched ?? record };
  }

  /** When the session ends at the latest if it is not used again. */
  expiresAt(record: SessionRecord): number {
    return sessionEndsAt(record, this.idleMs, this.maxAgeMs);
  }

  /** Ends a session (sign out); false when there was none. */
  async close(id: string): Promise<boolean> {
    if (!isSessionId(id)) return false;
    const key = keyOf(id);
    // lmdb's remove answers true for a key that is not there: a second sign-out said it ended a session.
    if (this.sessions.get(key) === undefined) return false;
    return this.sessions.remove(key);
  }

  /** Drops expired and orphaned sessions; the edge calls this from its coarse timer now and then. */
  sweep(now = Date.now()): void {
    for (const { key, value } of this.sessions.getRange()) {
      const expired = now > this.expiresAt(value);
      if (expired || this.tokens.activePrincipal(value.tokenIdSegment) === undefined) this.sessions.remove(key).catch(() => undefined);
    }
  }
}

function keyOf(id: string): string {
  return createHash('sha256').update(id).digest('hex');
}
