/**
 * Dashboard sessions (docs/dashboard.md): a browser pastes an access token once and gets a random
 * session id in an HttpOnly cookie instead. Only the id's SHA-256 is stored, so a copy of the data
 * directory names no usable session. A session stands for its token: it stops working the moment the
 * token is revoked (checked on every use, no cache), after `idleMs` without use, and at `maxAgeMs` after
 * sign-in whatever the use. A token holds at most `perToken` sessions: a new one ends the oldest.
 *
 * Two indexes beside the records keep every operation proportional to what it touches: one by end
 * (`[ends at, hash]`), so the sweep reads the ended sessions only, never the live ones; one by token
 * (`[token id segment, created at, hash]`), so the cap counts one token's sessions only. A record and
 * its index entries are written in one transaction.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { DashboardSessions, Principal, ResolvedSession, SessionOptions, SessionRecord } from './account-store.js';
import type { Database, RootDatabase } from 'lmdb';
import { isWriteFailure, WriteFailures } from './write-failures.js';

export type { SessionRecord, SessionOptions } from './account-store.js';

export const SESSION_IDLE_MS = 12 * 3_600_000;
export const SESSION_MAX_AGE_MS = 7 * 24 * 3_600_000;
/** Live sessions per token at most; the 21st sign-in ends the oldest. */
export const SESSIONS_PER_TOKEN = 20;
/** Sliding the idle deadline costs a write; one per minute per session is plenty. */
export const TOUCH_EVERY_MS = 60_000;
/** Ended sessions one sweep removes at most; the rest wait for the next sweep (a minute later). */
export const SWEEP_BATCH = 10_000;
const SESSION_ID = /^[A-Za-z0-9_-]{43}$/;
/** Sorts after every session hash in a token's index range. */
const RANGE_END = '\uffff';

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

/** The key a session is stored under: the SHA-256 of its id, never the id. */
export function sessionKeyOf(id: string): string {
  return createHash('sha256').update(id).digest('hex');
}

export function newSessionId(): string {
  return randomBytes(32).toString('base64url');
}

type EndKey = [number, string];
type TokenKey = [string, number, string];

export class SessionStore implements DashboardSessions {
  private readonly sessions: Database<SessionRecord, string>;
  private readonly ends: Database<true, EndKey>;
  private readonly byToken: Database<true, TokenKey>;
  readonly idleMs: number;
  readonly maxAgeMs: number;
  readonly perToken: number;

  /** `tokens` is the LMDB `Store` the sessions live beside (its `activePrincipal`, read on every use). */
  constructor(
    private readonly root: RootDatabase,
    private readonly tokens: { activePrincipal(idSegment: string): Principal | undefined },
    options: SessionOptions = {},
    private readonly failures = new WriteFailures(),
  ) {
    this.sessions = root.openDB({ name: 'dashboard-sessions', encoding: 'msgpack' });
    this.ends = root.openDB({ name: 'dashboard-session-ends', encoding: 'msgpack' });
    this.byToken = root.openDB({ name: 'dashboard-session-tokens', encoding: 'msgpack' });
    this.idleMs = options.idleMs ?? SESSION_IDLE_MS;
    this.maxAgeMs = options.maxAgeMs ?? SESSION_MAX_AGE_MS;
    this.perToken = options.perToken ?? SESSIONS_PER_TOKEN;
    this.indexUnindexed();
  }

  /**
   * Sessions written before the indexes existed (an upgrade) get their entries once, at start-up; from
   * then on every write keeps them. An empty index beside stored sessions is that case. On a full disk
   * the edge still starts: the entries are written at the next start.
   */
  private indexUnindexed(): void {
    if (this.ends.getKeysCount({ limit: 1 }) > 0 || this.sessions.getKeysCount({ limit: 1 }) === 0) return;
    try {
      this.root.transactionSync(() => {
        for (const { key, value } of this.sessions.getRange()) this.writeIndexes(key, value);
      });
    } catch (error) {
      if (!isWriteFailure(error)) throw error;
      this.failures.report('sessions', error);
    }
  }

  /** Opens a session for an authenticated token; the returned id goes into the cookie and nowhere else. */
  async open(principal: Principal, now = Date.now()): Promise<string> {
    const id = newSessionId();
    const key = sessionKeyOf(id);
    const segment = principal.token.idSegment;
    const record: SessionRecord = { tokenIdSegment: segment, accountId: principal.account.id, createdAt: now, lastSeenAt: now };
    const opened = this.root.transaction(() => {
      this.sessions.put(key, record);
      this.writeIndexes(key, record);
      // The token's sessions, oldest first: those beyond the cap end now.
      const keys = [...this.byToken.getKeys({ start: [segment], end: [segment, RANGE_END] })] as TokenKey[];
      for (const oldest of keys.slice(0, Math.max(0, keys.length - this.perToken))) this.removeInTransaction(oldest[2]);
    });
    await this.failures.guard('sessions', opened, 'the session');
    return id;
  }

  /** The principal a session id stands for, or undefined (unknown, expired, or its token revoked). */
  resolve(id: string, now = Date.now()): ResolvedSession | undefined {
    if (!isSessionId(id)) return undefined;
    const key = sessionKeyOf(id);
    const record = this.sessions.get(key);
    if (record === undefined) return undefined;
    if (now > this.endOf(record)) {
      this.remove(key);
      return undefined;
    }
    const principal = this.tokens.activePrincipal(record.tokenIdSegment);
    if (!sessionPrincipalHolds(record, principal)) {
      this.remove(key);
      return undefined;
    }
    const touched = touchedSession(record, now);
    if (touched !== null) {
      this.root
        .transaction(() => {
          // A sign-out or a sweep that landed meanwhile stays: only the record read here is moved.
          const current = this.sessions.get(key);
          if (current === undefined || current.lastSeenAt !== record.lastSeenAt) return;
          this.ends.remove([this.endOf(current), key]);
          this.sessions.put(key, touched);
          this.ends.put([this.endOf(touched), key], true);
        })
        .catch(() => undefined);
    }
    const current = touched ?? record;
    return { principal, record: current, expiresAt: this.endOf(current) };
  }

  /** Ends a session (sign out); false when there was none. */
  async close(id: string): Promise<boolean> {
    if (!isSessionId(id)) return false;
    const key = sessionKeyOf(id);
    return this.failures.guard('sessions', this.root.transaction(() => this.removeInTransaction(key)), 'the sign-out');
  }

  /**
   * Drops ended sessions, reading only those (the index by end), at most SWEEP_BATCH per call; the edge
   * calls this from its coarse timer. Returns how many index entries it visited. A revoked token's
   * sessions stop working at once (checked on use) and are removed on their next use or when they end.
   */
  sweep(now = Date.now()): number {
    const ended = [...this.ends.getKeys({ end: [now], limit: SWEEP_BATCH })] as EndKey[];
    if (ended.length === 0) return 0;
    this.root
      .transaction(() => {
        for (const entry of ended) {
          const key = entry[1];
          const record = this.sessions.get(key);
          if (record !== undefined && this.endOf(record) === entry[0]) {
            this.removeInTransaction(key);
            continue;
          }
          // A stale entry (its session gone, or indexed under other lifetimes): dropped, and a session
          // that is still there indexed under its end as these lifetimes have it.
          this.ends.remove(entry);
          if (record !== undefined) this.ends.put([this.endOf(record), key], true);
        }
      })
      .catch(() => undefined);
    return ended.length;
  }

  /** How many sessions are stored (tests, and the flood's bound). */
  count(): number {
    return this.sessions.getKeysCount();
  }

  private endOf(record: SessionRecord): number {
    return sessionEndsAt(record, this.idleMs, this.maxAgeMs);
  }

  private writeIndexes(key: string, record: SessionRecord): void {
    this.ends.put([this.endOf(record), key], true);
    this.byToken.put([record.tokenIdSegment, record.createdAt, key], true);
  }

  private remove(key: string): void {
    this.root.transaction(() => this.removeInTransaction(key)).catch(() => undefined);
  }

  /** Inside a write transaction: the record and both its index entries; false when there was none. */
  private removeInTransaction(key: string): boolean {
    const record = this.sessions.get(key);
    if (record === undefined) return false;
    this.sessions.remove(key);
    this.ends.remove([this.endOf(record), key]);
    this.byToken.remove([record.tokenIdSegment, record.createdAt, key]);
    return true;
  }
}
