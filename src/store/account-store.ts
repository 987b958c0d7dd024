/**
 * What every edge must agree on, behind one interface with two implementations (DESIGN.md section 6):
 * `Store` on the embedded LMDB (the default, `npm start`) and `RedisStore` for cluster mode
 * (docs/cluster.md). Accounts, tokens, reservations, dashboard sessions, usage counters and the
 * fixed-window limiters (API rate limit, failed-authentication throttling).
 *
 * Reads return `Awaitable`: LMDB answers in the same turn (the edge's connect path stays synchronous in
 * single-edge mode), Redis with a promise. Callers always `await`. Writes that must hold together (a
 * token and its account's index, a cap checked and the record written) are atomic in both
 * implementations: an LMDB write transaction, a Redis Lua script. One shared suite
 * (test/store/account-store.suite.ts) runs against both.
 */
import type { PlanLimits, PlanName } from './plans.js';
import type { RateDecision } from './rate-limit.js';
import type { OfflineMode } from './offline-queue.js';
import type { StoredPolicy } from '../protocol/policy.js';

export type Awaitable<T> = T | Promise<T>;

export interface AccountRecord {
  id: string;
  email: string;
  plan: PlanName;
  createdAt: number;
}

export interface TokenRecord {
  idSegment: string;
  accountId: string;
  label: string;
  hash: Uint8Array;
  createdAt: number;
  revokedAt: number | null;
}

export interface ReservationRecord {
  /** The reserved name: a subdomain, or `tcp:PORT` for a TCP port (docs/tcp.md). */
  subdomain: string;
  accountId: string;
  createdAt: number;
  /**
   * `tls`: the name is for TLS passthrough tunnels (`burrow tls`), and a TLS connection to it is never
   * terminated by the edge; `tcp`: a TCP port. Absent: an HTTP subdomain.
   */
  kind?: 'tls' | 'tcp';
  /** What the edge answers while no tunnel is connected (docs/offline.md); absent means 'off'. */
  offline?: OfflineMode;
  /** Who may reach the name and what the edge does to its traffic (docs/policies.md); absent means none. */
  policy?: StoredPolicy;
  /**
   * Names this reservation among every reservation the name ever had (issue 23): events held for the
   * name carry it, so what was accepted for an earlier owner never reaches the next one. Absent on
   * records made before it existed (they count as '').
   */
  generation?: string;
}

/** A token as callers see it; the secret appears only on the create result. */
export interface TokenInfo {
  id: string;
  idSegment: string;
  accountId: string;
  label: string;
  prefix: string;
  createdAt: number;
  lastUsedAt: number | null;
}

export interface CreatedToken extends TokenInfo {
  token: string;
}

export interface Principal {
  account: AccountRecord;
  token: TokenInfo;
}

/**
 * What a bearer token turned out to be. A failure names the token's id segment when the token is one
 * of ours (a wrong secret, or revoked), so failures can be counted against that credential.
 */
export type AuthOutcome =
  | { principal: Principal }
  | { failure: 'malformed' | 'unknown' }
  | { failure: 'wrong-secret' | 'revoked'; idSegment: string };

export interface StoreOptions {
  /** Overrides of the plans' limits, merged over the defaults. */
  plans?: Partial<Record<PlanName, Partial<PlanLimits>>>;
}

// ---- dashboard sessions -------------------------------------------------------------------------------

export interface SessionRecord {
  /** The id segment of the token the session was opened with. */
  tokenIdSegment: string;
  accountId: string;
  createdAt: number;
  lastSeenAt: number;
}

export interface SessionOptions {
  /** A session unused this long ends (sliding). */
  idleMs?: number;
  /** A session ends this long after sign-in, used or not. */
  maxAgeMs?: number;
  /** Live sessions per token at most: a new one ends the token's oldest (default 20). */
  perToken?: number;
}

export interface ResolvedSession {
  principal: Principal;
  record: SessionRecord;
  /** When the session ends unless used again, on the caller's clock (epoch ms). */
  expiresAt: number;
}

/**
 * Dashboard sessions (docs/dashboard.md): only the session id's SHA-256 is stored; a session stands for its
 * token and ends with it, after `idleMs` without use, and `maxAgeMs` after sign-in; a token holds at most
 * `perToken` sessions (a new one ends the oldest). No operation reads every session: the LMDB store
 * keeps an index by end and one by token, the Redis store lets Redis expire them.
 */
export interface DashboardSessions {
  readonly idleMs: number;
  readonly maxAgeMs: number;
  readonly perToken: number;
  /** Opens a session for an authenticated token (ending its oldest beyond `perToken`); the id goes into the cookie and nowhere else. */
  open(principal: Principal, now?: number): Promise<string>;
  /** The principal a session id stands for, or undefined (unknown, expired, or its token revoked). */
  resolve(id: string, now?: number): Awaitable<ResolvedSession | undefined>;
  /** Ends a session (sign out); false when there was none. */
  close(id: string): Promise<boolean>;
  /** Drops ended sessions, reading those only; returns how many it visited (0 where the store expires them itself). */
  sweep(now?: number): number;
}

// ---- usage ----------------------------------------------------------------------------------------------

export interface Usage {
  requests: number;
  bytesIn: number;
  bytesOut: number;
}

/**
 * Requests and bytes through an account's tunnels per calendar month (UTC). `count` is on the public hot
 * path and only adds in memory; `flush` (the edge's coarse timer) writes what was counted since the last
 * flush. `current` is the account's total over every writer (all edges in cluster mode), flushed or not.
 */
export interface UsageCounter {
  count(accountId: string, bytesIn: number, bytesOut: number): void;
  current(accountId: string): Awaitable<Usage>;
  flush(): Promise<void>;
}

// ---- limiters -------------------------------------------------------------------------------------------

/** N hits per fixed window per key; in cluster mode one window per key for the whole cluster. */
export interface RateLimiter {
  readonly limit: number;
  readonly windowMs: number;
  /** Counts one hit for `key` and says whether it is within the limit. */
  hit(key: string): Awaitable<RateDecision>;
  /** Drops finished windows (a no-op where the store expires them itself). */
  sweep(): void;
}

// ---- the store ------------------------------------------------------------------------------------------

export interface AccountStore {
  /** 'lmdb' (one edge, embedded) or 'redis' (cluster mode). */
  readonly kind: 'lmdb' | 'redis';

  planLimits(plan: PlanName): PlanLimits;

  getAccount(id: string): Awaitable<AccountRecord | undefined>;
  countAccounts(): Awaitable<number>;
  /** The account with this e-mail address (compared trimmed and lower-cased). */
  findAccountByEmail(email: string): Awaitable<AccountRecord | undefined>;
  /** Every account, by e-mail address. */
  listAccounts(): Awaitable<AccountRecord[]>;
  /** Moves an account to another plan; undefined when there is no such account. */
  setPlan(accountId: string, plan: PlanName): Promise<AccountRecord | undefined>;
  /** Creates an account with a first token labelled `tokenLabel`, atomically; 400 INVALID_REQUEST when the e-mail is taken. */
  createAccount(email: string, plan: PlanName, tokenLabel: string, now?: number): Promise<{ account: AccountRecord; token: CreatedToken }>;

  /** Creates a token unless the plan's active-token cap is reached (403 TOKEN_LIMIT_REACHED), atomically. */
  createToken(account: AccountRecord, label: string, now?: number): Promise<CreatedToken>;
  countActiveTokens(accountId: string): Awaitable<number>;
  /** The account's active tokens, oldest first. */
  listTokens(accountId: string): Awaitable<TokenInfo[]>;
  /** Revokes an active token of the account; false when there is no such token on it. */
  revokeToken(accountId: string, idSegment: string, now?: number): Promise<boolean>;
  /**
   * Checks a bearer token: the stored SHA-256 and the presented token's compared as equal-length digests
   * in constant time; an unknown id does the same work as a known one with a wrong secret.
   */
  verify(bearer: string): Awaitable<AuthOutcome>;
  /** The principal of an active token by its id segment (a dashboard session's token), or undefined once revoked. */
  activePrincipal(idSegment: string): Awaitable<Principal | undefined>;
  /** Records a use of a token; callers do not wait for it (but must handle its failure). */
  touchToken(idSegment: string, now?: number): Promise<unknown>;

  getReservation(subdomain: string): Awaitable<ReservationRecord | undefined>;
  listReservations(accountId: string): Awaitable<ReservationRecord[]>;
  /**
   * Reserves `subdomain` for the account: 409 SUBDOMAIN_TAKEN when another account holds it, 403
   * RESERVATION_LIMIT_REACHED when the account already holds `cap` names (checked atomically with the
   * write). Reserving a name the account already holds returns it (with `offline` applied when given; its
   * `kind` stays what it was). `kind`: a TLS passthrough name or a TCP port (docs/tcp.md).
   */
  reserve(accountId: string, subdomain: string, now?: number, cap?: number, offline?: OfflineMode, kind?: ReservationRecord['kind']): Promise<ReservationRecord>;
  /** Changes a reservation's offline mode; undefined when the account holds no such reservation. */
  setOfflineMode(accountId: string, subdomain: string, offline: OfflineMode): Promise<ReservationRecord | undefined>;
  /**
   * Replaces a reservation's policy (undefined removes it); undefined when the account holds no such
   * reservation. Every edge reads the new policy from here (in cluster mode through Redis). With
   * `expected`, only while the stored policy is still that one (undefined otherwise): a key rotation
   * re-sealing secrets never overwrites a change made through the API meanwhile.
   */
  setPolicy(accountId: string, subdomain: string, policy: StoredPolicy | undefined, expected?: StoredPolicy): Promise<ReservationRecord | undefined>;
  /** Releases a reservation of the account (and, on LMDB, the events held for it); false when it holds none. */
  releaseReservation(accountId: string, subdomain: string): Promise<boolean>;

  dashboardSessions(options?: SessionOptions): DashboardSessions;
  usageCounter(clock?: () => number): UsageCounter;
  rateLimiter(name: string, limit: number, windowMs: number, clock?: () => number): RateLimiter;

  /** Waits for queued writes, then closes. */
  close(): Promise<void>;
}
