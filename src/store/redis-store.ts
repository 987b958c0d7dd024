/**
 * The Redis implementation of `AccountStore` (src/store/account-store.ts) for cluster mode (issue 17,
 * docs/cluster.md): every edge of a cluster reads and writes the same accounts, tokens, reservations,
 * dashboard sessions, usage and limiter windows. Same semantics as the LMDB `Store`, method by method;
 * test/store/account-store.suite.ts runs against both.
 *
 * Keys, all under one prefix (default `burrow:`):
 *   account:<account id>                 JSON AccountRecord
 *   accounts-by-email                    HASH normalised e-mail → account id (unique e-mail, list order)
 *   token:<id segment>                   JSON TokenRecord, `hash` as 64 hex characters (SHA-256 only)
 *   token:~decoy, account:~decoy         the decoy token an unknown id is compared against, and its account
 *   token-last-used                      HASH id segment → ms of the last use
 *   account-tokens:<account id>          SET of the account's active token id segments (the cap's count)
 *   reservation:<subdomain>              JSON ReservationRecord (its policy a JSON string inside)
 *   account-reservations:<account id>    SET of the account's reserved subdomains
 *   session:<SHA-256 hex of session id>  JSON SessionRecord (times on Redis's clock), PX = until it ends
 *                                        unless used again: Redis alone judges a session's end
 *   token-sessions:<id segment>          ZSET of the token's session hashes by creation (the per-token cap)
 *   usage:<account id>:<period start ms> HASH requests / bytesIn / bytesOut (HINCRBY)
 *   usage-flush:<batch id>               marker that a usage batch was applied (24 h)
 *   limit:<limiter name>:<key>           a fixed window's count, PX = the window's rest
 *
 * Atomicity: each write that must hold together is one Lua script (src/store/redis-scripts.ts, EVALSHA via
 * ioredis defineCommand): createAccount (e-mail unique), createToken (the plan's cap counted inside the
 * script, so creates racing on different edges never pass it), revokeToken, reserve (cap, another
 * account's name), setOfflineMode, releaseReservation, setPlan, a usage flush and a limiter hit. Plain
 * reads are single commands or one MGET/MULTI. Token id segments (8 hex) are drawn here and a script
 * refuses one already taken ('id-collision'; drawn again), so every key a script writes is declared in
 * KEYS. A token check (verify) is one read-only script: one round trip, the same reads for
 * an unknown id as for a known one.
 *
 * Redis unreachable: commands fail at once (no offline queue, no resend, bounded connect and command
 * timeouts) with 503 STORE_UNAVAILABLE and `Retry-After: 1`; ioredis keeps reconnecting, and the same
 * RedisStore works again when Redis is back. The persistence cluster mode asks for is Redis's own
 * (appendonly, docs/cluster.md).
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { Redis, ReplyError, type RedisOptions } from 'ioredis';
import { BurrowError } from '../errors.js';
import {
  hashToken,
  newAccountId,
  newTokenIdSegment,
  newTokenSecret,
  parseToken,
  tokenIdOf,
  tokenPrefixOf,
} from '../ids.js';
import type {
  AccountRecord,
  AccountStore,
  AuthOutcome,
  CreatedToken,
  DashboardSessions,
  Principal,
  RateLimiter,
  ReservationRecord,
  ResolvedSession,
  SessionOptions,
  SessionRecord,
  StoreOptions,
  TokenInfo,
  TokenRecord,
  Usage,
  UsageCounter,
} from './account-store.js';
import type { OfflineMode } from './offline-queue.js';
import type { StoredPolicy } from '../protocol/policy.js';
import { DEFAULT_PLANS, type PlanLimits, type PlanName } from './plans.js';
import type { RateDecision } from './rate-limit.js';
import { REDIS_SCRIPTS, type ScriptName } from './redis-scripts.js';
import { redisTarget, type RedisTarget } from './redis-url.js';
import { isSessionId, newSessionId, SESSION_IDLE_MS, SESSION_MAX_AGE_MS, sessionKeyOf, sessionPrincipalHolds, SESSIONS_PER_TOKEN, TOUCH_EVERY_MS } from './sessions.js';
import { CurrentPeriod } from './usage.js';

export interface RedisStoreOptions extends StoreOptions {
  /** Prefix of every key (default `burrow:`): several deployments, or tests, on one Redis. */
  keyPrefix?: string;
  /** A call Redis does not answer within this fails with STORE_UNAVAILABLE (default 5 s). */
  commandTimeoutMs?: number;
}

/** A token record as stored: the digest as hex, JSON having no bytes. */
interface StoredToken extends Omit<TokenRecord, 'hash'> {
  hash: string;
}

const DEFAULT_PREFIX = 'burrow:';
const DECOY_SEGMENT = '~decoy';
const DECOY_ACCOUNT: AccountRecord = { id: '~decoy', email: '', plan: 'FREE', createdAt: 0 };
/** How long a connection attempt may take before a command fails with STORE_UNAVAILABLE. */
const CONNECT_TIMEOUT_MS = 2_000;
/** A Redis that accepts the connection but does not answer (stopped, swapping) fails the call after this. */
const COMMAND_TIMEOUT_MS = 5_000;
/** The longest pause between two attempts to reach Redis again. */
const RECONNECT_MAX_DELAY_MS = 500;
/** A usage batch's applied-marker outlives any retry of the batch. */
const FLUSH_MARKER_MS = 24 * 3_600_000;
/** Replies that mean "Redis cannot serve now" (loading, a replica after failover, ...), not a bad command. */
const UNAVAILABLE_REPLY = /^(LOADING|READONLY|MASTERDOWN|BUSY|TRYAGAIN|CLUSTERDOWN|NOREPLICAS|MISCONF)\b/;

export class RedisStore implements AccountStore {
  readonly kind = 'redis' as const;
  private readonly plans: Record<PlanName, PlanLimits>;
  private readonly prefix: string;
  private closed = false;
  /** Why the connection is down, while it is: more telling than the "Connection is closed." of a call. */
  private connectionError: Error | undefined;

  /** The URL without its password, for messages. */
  readonly displayUrl: string;

  private constructor(
    /** The connection, shared with the lease registry (src/store/redis-leases.ts). */
    readonly redis: Redis,
    /** Where Redis is (one, or through Sentinel) and how many replicas must acknowledge a lease. */
    readonly target: RedisTarget,
    options: RedisStoreOptions,
  ) {
    this.displayUrl = target.display;
    this.prefix = options.keyPrefix ?? DEFAULT_PREFIX;
    this.plans = {
      FREE: { ...DEFAULT_PLANS.FREE, ...options.plans?.FREE },
      PRO: { ...DEFAULT_PLANS.PRO, ...options.plans?.PRO },
    };
  }

  /**
   * Connects to `url` (redis://[:PASSWORD@]HOST:PORT[/DB], or redis-sentinel://... for a master found
   * through Sentinel: src/store/redis-url.ts) and makes sure the decoy token exists; rejects with
   * STORE_UNAVAILABLE when Redis cannot be reached within the connect timeout, and refuses a Redis
   * Cluster node (the scripts touch keys of many hash slots).
   */
  static async connect(url: string, options: RedisStoreOptions = {}): Promise<RedisStore> {
    let target: RedisTarget;
    try {
      target = redisTarget(url);
    } catch (error) {
      throw new BurrowError('INVALID_REQUEST', (error as Error).message);
    }
    const connection: RedisOptions = {
      ...target.options,
      lazyConnect: true,
      // Fail fast while Redis is away instead of queueing calls of a public request for minutes; the
      // retry strategy keeps reconnecting, so the store recovers by itself.
      enableOfflineQueue: false,
      // Calls in flight when the connection drops fail at once and are never sent again after the
      // reconnect: their callers were told STORE_UNAVAILABLE, a late createToken must not happen behind them.
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      connectTimeout: CONNECT_TIMEOUT_MS,
      commandTimeout: options.commandTimeoutMs ?? COMMAND_TIMEOUT_MS,
      // ioredis waits this long for a dropped socket's close, even one that failed to connect: a CLI
      // facing a dead Redis would linger for it after printing its error.
      disconnectTimeout: 200,
      // Back within half a second of Redis (ioredis' default waits up to 2 s between attempts): the
      // lease registry renews the moment it is connected again (issue 28).
      retryStrategy: (attempt: number) => Math.min(attempt * 50, RECONNECT_MAX_DELAY_MS),
      // A master demoted to a replica (a failover it missed) answers writes READONLY: find the master again.
      reconnectOnError: (error: Error) => (error.message.startsWith('READONLY') ? 1 : false),
      ...(target.sentinel
        ? {
            // Asked again after every lost connection; a failover announced by the sentinels
            // (+switch-master) drops the connection to the old master at once.
            sentinelRetryStrategy: (attempt: number) => Math.min(attempt * 100, RECONNECT_MAX_DELAY_MS),
            failoverDetector: true,
            sentinelMaxConnections: 3,
          }
        : {}),
    };
    const redis = target.url === null ? new Redis(connection) : new Redis(target.url, connection);
    for (const [name, { lua, numberOfKeys }] of Object.entries(REDIS_SCRIPTS)) {
      // No numberOfKeys: ioredis takes the key count as the first argument (a usage batch's keys vary).
      redis.defineCommand(name, numberOfKeys < 0 ? { lua } : { lua, numberOfKeys });
    }
    const store = new RedisStore(redis, target, options);
    // A listener also keeps ioredis from printing every failed reconnect; each call reports its own.
    redis.on('error', (error: Error) => (store.connectionError = error));
    redis.on('ready', () => (store.connectionError = undefined));
    try {
      await redis.connect();
      await refuseRedisCluster(redis);
      // Revoked and in no index (never active, whatever its hash), its account in no e-mail index (never
      // listed or counted): an unknown id reads a token and an account as a known one does.
      const decoy: StoredToken = {
        idSegment: DECOY_SEGMENT,
        accountId: DECOY_ACCOUNT.id,
        label: 'decoy',
        hash: randomBytes(32).toString('hex'),
        createdAt: 0,
        revokedAt: 0,
      };
      await redis
        .multi()
        .set(store.key('token', DECOY_SEGMENT), JSON.stringify(decoy), 'NX')
        .set(store.key('account', DECOY_ACCOUNT.id), JSON.stringify(DECOY_ACCOUNT), 'NX')
        .exec();
    } catch (error) {
      redis.disconnect();
      throw store.unavailable(error);
    }
    store.reconnectWhenEnded(redis);
    return store;
  }

  /**
   * A connection of this store (its own, or a `duplicate()` of it) that ioredis ends while the store is
   * open connects again. ioredis (5.x) ends a client for good when an attempt to reconnect is cut short:
   * its failover detector, still subscribed to the sentinels from the last connection, hears
   * +switch-master while the next attempt is asking a sentinel where the master is, calls the
   * connector's `disconnect()`, and the attempt's rejection ends the client instead of retrying. An
   * edge then never reached the new master and its leases lapsed, while the other edges recovered
   * (test/cluster/issue-28-sentinel-failover.test.ts, on a loaded machine, where that window is wide).
   */
  reconnectWhenEnded(redis: Redis): void {
    redis.on('end', () => {
      if (this.closed) return;
      const retry = setTimeout(() => {
        if (!this.closed && redis.status === 'end') redis.connect().catch(() => undefined);
      }, RECONNECT_MAX_DELAY_MS);
      retry.unref();
    });
  }

  planLimits(plan: PlanName): PlanLimits {
    return this.plans[plan];
  }

  // ---- accounts -------------------------------------------------------------------------------

  async getAccount(id: string): Promise<AccountRecord | undefined> {
    return parse<AccountRecord>(await this.call(() => this.redis.get(this.key('account', id))));
  }

  async countAccounts(): Promise<number> {
    return this.call(() => this.redis.hlen(this.key('accounts-by-email')));
  }

  async findAccountByEmail(email: string): Promise<AccountRecord | undefined> {
    const id = await this.call(() => this.redis.hget(this.key('accounts-by-email'), email.trim().toLowerCase()));
    return id === null ? undefined : this.getAccount(id);
  }

  async listAccounts(): Promise<AccountRecord[]> {
    const byEmail = await this.call(() => this.redis.hgetall(this.key('accounts-by-email')));
    const emails = Object.keys(byEmail).sort();
    if (emails.length === 0) return [];
    const stored = await this.call(() => this.redis.mget(emails.map((email) => this.key('account', byEmail[email]!))));
    return stored.flatMap((json) => (json === null ? [] : [JSON.parse(json) as AccountRecord]));
  }

  async setPlan(accountId: string, plan: PlanName): Promise<AccountRecord | undefined> {
    const changed = await this.script<string | null>('burrowSetPlan', [this.key('account', accountId)], [plan]);
    return parse<AccountRecord>(changed);
  }

  async createAccount(email: string, plan: PlanName, tokenLabel: string, now = Date.now()): Promise<{ account: AccountRecord; token: CreatedToken }> {
    const normalisedEmail = email.trim().toLowerCase();
    const account: AccountRecord = { id: newAccountId(), email: normalisedEmail, plan, createdAt: now };
    for (;;) {
      const { stored, created } = newToken(account.id, tokenLabel, now);
      const status = await this.script<string>(
        'burrowCreateAccount',
        [this.key('accounts-by-email'), this.key('account', account.id), this.key('token', stored.idSegment), this.key('account-tokens', account.id)],
        [normalisedEmail, JSON.stringify(account), JSON.stringify(stored), stored.idSegment, account.id],
      );
      if (status === 'email-taken') throw new BurrowError('INVALID_REQUEST', `an account with e-mail ${normalisedEmail} exists already`);
      if (status === 'ok') return { account, token: created };
    }
  }

  // ---- tokens ---------------------------------------------------------------------------------

  async createToken(account: AccountRecord, label: string, now = Date.now()): Promise<CreatedToken> {
    const cap = this.planLimits(account.plan).activeTokens;
    for (;;) {
      const { stored, created } = newToken(account.id, label, now);
      const status = await this.script<string>(
        'burrowCreateToken',
        [this.key('account-tokens', account.id), this.key('token', stored.idSegment)],
        [capArgument(cap), JSON.stringify(stored), stored.idSegment],
      );
      if (status === 'cap') {
        throw new BurrowError('TOKEN_LIMIT_REACHED', `The ${account.plan} plan allows ${cap} active tokens. Revoke a token or upgrade.`);
      }
      if (status === 'ok') return created;
    }
  }

  async countActiveTokens(accountId: string): Promise<number> {
    return this.call(() => this.redis.scard(this.key('account-tokens', accountId)));
  }

  async listTokens(accountId: string): Promise<TokenInfo[]> {
    const segments = await this.call(() => this.redis.smembers(this.key('account-tokens', accountId)));
    if (segments.length === 0) return [];
    const [records, lastUsed] = await this.call(() =>
      Promise.all([this.redis.mget(segments.map((segment) => this.key('token', segment))), this.redis.hmget(this.key('token-last-used'), ...segments)]),
    );
    const list: TokenInfo[] = [];
    records.forEach((json, index) => {
      const record = parse<StoredToken>(json);
      if (record === undefined || record.revokedAt !== null) return;
      list.push(toTokenInfo(record, numberOrNull(lastUsed[index])));
    });
    list.sort((a, b) => a.createdAt - b.createdAt || a.idSegment.localeCompare(b.idSegment));
    return list;
  }

  async revokeToken(accountId: string, idSegment: string, now = Date.now()): Promise<boolean> {
    const keys = [this.key('token', idSegment), this.key('account-tokens', accountId)];
    const revoked = await this.script<number>('burrowRevokeToken', keys, [accountId, String(now), idSegment]);
    return revoked === 1;
  }

  /**
   * As Store.verify: the presented token's SHA-256 and the stored one compared as equal-length digests
   * in constant time. One script reads the id's record or the decoy, and that record's account and last
   * use, so an unknown id costs the same round trip, reads, parse, hash and comparison as a known id with
   * a wrong secret; a valid token needs no second round trip.
   */
  async verify(bearer: string): Promise<AuthOutcome> {
    const parsed = parseToken(bearer);
    if (parsed === null) return MALFORMED;
    const [json, decoyJson, accountJson, lastUsed] = await this.script<[string | null, string | null, string | null, string | null]>(
      'burrowVerifyRead',
      [this.key('token', parsed.idSegment), this.key('token', DECOY_SEGMENT), this.key('token-last-used')],
      [this.key('account', ''), parsed.idSegment],
    );
    const record = parse<StoredToken>(json);
    const compared = record ?? parse<StoredToken>(decoyJson);
    const account = parse<AccountRecord>(accountJson);
    const presented = hashToken(bearer);
    const stored = compared === undefined ? NO_TOKEN_HASH : Buffer.from(compared.hash, 'hex');
    const equal = stored.byteLength === presented.byteLength && timingSafeEqual(stored, presented);
    if (record === undefined) return UNKNOWN;
    if (!equal) return { failure: 'wrong-secret', idSegment: parsed.idSegment };
    if (record.revokedAt !== null) return { failure: 'revoked', idSegment: parsed.idSegment };
    if (account === undefined) return UNKNOWN;
    return { principal: { account, token: toTokenInfo(record, numberOrNull(lastUsed)) } };
  }

  async activePrincipal(idSegment: string): Promise<Principal | undefined> {
    const record = parse<StoredToken>(await this.call(() => this.redis.get(this.key('token', idSegment))));
    if (record === undefined || record.revokedAt !== null) return undefined;
    return this.principalOf(record);
  }

  private async principalOf(record: StoredToken): Promise<Principal | undefined> {
    const [accountJson, lastUsed] = await this.call(() =>
      Promise.all([this.redis.get(this.key('account', record.accountId)), this.redis.hget(this.key('token-last-used'), record.idSegment)]),
    );
    const account = parse<AccountRecord>(accountJson);
    if (account === undefined) return undefined;
    return { account, token: toTokenInfo(record, numberOrNull(lastUsed)) };
  }

  async touchToken(idSegment: string, now = Date.now()): Promise<unknown> {
    return this.call(() => this.redis.hset(this.key('token-last-used'), idSegment, String(now)));
  }

  // ---- reservations ---------------------------------------------------------------------------

  async getReservation(subdomain: string): Promise<ReservationRecord | undefined> {
    return parseReservation(await this.call(() => this.redis.get(this.key('reservation', subdomain))));
  }

  /** The account's reservations, by name (the LMDB index's order). */
  async listReservations(accountId: string): Promise<ReservationRecord[]> {
    const names = (await this.call(() => this.redis.smembers(this.key('account-reservations', accountId)))).sort();
    if (names.length === 0) return [];
    const records = await this.call(() => this.redis.mget(names.map((name) => this.key('reservation', name))));
    return records.flatMap((json) => {
      const record = parseReservation(json);
      return record !== undefined && record.accountId === accountId ? [record] : [];
    });
  }

  async reserve(accountId: string, subdomain: string, now = Date.now(), cap = Infinity, offline?: OfflineMode, kind?: ReservationRecord['kind']): Promise<ReservationRecord> {
    const generation = randomBytes(8).toString('hex');
    const record: ReservationRecord = { subdomain, accountId, createdAt: now, generation, ...(offline === undefined ? {} : { offline }), ...(kind === undefined ? {} : { kind }) };
    const [status, json] = await this.script<[string, string]>(
      'burrowReserve',
      [this.key('reservation', subdomain), this.key('account-reservations', accountId)],
      [accountId, JSON.stringify(record), capArgument(cap), offline ?? '', subdomain],
    );
    if (status === 'cap') throw new BurrowError('RESERVATION_LIMIT_REACHED', `The plan allows ${cap} reserved subdomains. Release one or upgrade.`);
    if (status === 'taken') throw new BurrowError('SUBDOMAIN_TAKEN', `The subdomain "${subdomain}" is reserved by another account.`);
    return parseReservation(json)!;
  }

  async setOfflineMode(accountId: string, subdomain: string, offline: OfflineMode): Promise<ReservationRecord | undefined> {
    return parseReservation(await this.script<string | null>('burrowSetOfflineMode', [this.key('reservation', subdomain)], [accountId, offline]));
  }

  async setPolicy(accountId: string, subdomain: string, policy: StoredPolicy | undefined, expected?: StoredPolicy): Promise<ReservationRecord | undefined> {
    const json = policy === undefined ? '' : JSON.stringify(policy);
    // The stored policy is the JSON string this method wrote; parsed and stringified again it is the same text.
    const check = expected === undefined ? [] : [JSON.stringify(expected)];
    return parseReservation(await this.script<string | null>('burrowSetPolicy', [this.key('reservation', subdomain)], [accountId, json, ...check]));
  }

  /**
   * Releases the account's reservation; false when it holds none. Unlike the LMDB Store this cannot
   * drop the webhooks held for the name: the offline queue stays in each edge's LMDB, and the edge
   * clears its own after a release.
   */
  async releaseReservation(accountId: string, subdomain: string): Promise<boolean> {
    const keys = [this.key('reservation', subdomain), this.key('account-reservations', accountId)];
    const released = await this.script<number>('burrowReleaseReservation', keys, [accountId, subdomain]);
    return released === 1;
  }

  // ---- sessions, usage, limiters ------------------------------------------------------------

  dashboardSessions(options: SessionOptions = {}): DashboardSessions {
    return new RedisSessions(this, options);
  }

  usageCounter(clock: () => number = Date.now): UsageCounter {
    return new RedisUsageCounter(this, clock);
  }

  /** One window per key for the whole cluster; Redis's clock runs it, so `clock` is not used. */
  rateLimiter(name: string, limit: number, windowMs: number): RateLimiter {
    return new RedisRateLimiter(this, name, limit, windowMs);
  }

  // ---- lifecycle ------------------------------------------------------------------------------

  /** Quits (Redis answers the commands sent before); a Redis already gone is just disconnected. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.redis.status === 'ready') {
      try {
        await this.redis.quit();
      } catch {
        // the connection broke meanwhile
      }
    }
    // Also ends what quit leaves open: the connections to the sentinels that watch for a failover.
    this.redis.disconnect();
  }

  // ---- plumbing (also for the sessions, usage and limiters below) ---------------------------

  key(...parts: string[]): string {
    return this.prefix + parts.join(':');
  }

  /** Runs Redis work; a failure of Redis itself becomes 503 STORE_UNAVAILABLE. */
  async call<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      throw this.unavailable(error);
    }
  }

  async script<T>(name: ScriptName, keys: string[], args: string[]): Promise<T> {
    const command = (this.redis as unknown as Record<ScriptName, (...args: (string | number)[]) => Promise<T>>)[name];
    const variadic = REDIS_SCRIPTS[name].numberOfKeys < 0;
    return this.call(() => (variadic ? command.call(this.redis, keys.length, ...keys, ...args) : command.call(this.redis, ...keys, ...args)));
  }

  /** STORE_UNAVAILABLE for Redis's own failures; a BurrowError or a reply to a bad command passes as it is. */
  unavailable(error: unknown): Error {
    if (error instanceof BurrowError) return error;
    if (error instanceof (ReplyError as typeof Error) && !UNAVAILABLE_REPLY.test(error.message)) return error;
    const reason = this.connectionError?.message ?? (error instanceof Error ? error.message : String(error));
    return new BurrowError('STORE_UNAVAILABLE', `The cluster's Redis at ${this.displayUrl} is unreachable (${reason}); retry shortly.`, {
      'Retry-After': '1',
    });
  }
}

// ---- dashboard sessions ---------------------------------------------------------------------------

/**
 * Dashboard sessions in Redis with the rules of src/store/sessions.ts: only the id's SHA-256 is a key,
 * the session ends with its token (checked on every use), after `idleMs` without use and `maxAgeMs`
 * after sign-in, and a token keeps at most `perToken`. Every time is Redis's own (TIME inside the
 * scripts) and each record carries a PX until its end, so Redis drops ended sessions itself and an edge
 * whose clock is wrong can neither end nor prolong anyone's session.
 */
class RedisSessions implements DashboardSessions {
  readonly idleMs: number;
  readonly maxAgeMs: number;
  readonly perToken: number;

  constructor(private readonly store: RedisStore, options: SessionOptions) {
    this.idleMs = options.idleMs ?? SESSION_IDLE_MS;
    this.maxAgeMs = options.maxAgeMs ?? SESSION_MAX_AGE_MS;
    this.perToken = options.perToken ?? SESSIONS_PER_TOKEN;
  }

  /** `now` is not used: the session's times are Redis's. */
  async open(principal: Principal): Promise<string> {
    const id = newSessionId();
    const hash = sessionKeyOf(id);
    const segment = principal.token.idSegment;
    await this.store.script<[number, number]>(
      'burrowOpenSession',
      [this.store.key('session', hash), this.store.key('token-sessions', segment)],
      [JSON.stringify({ tokenIdSegment: segment, accountId: principal.account.id }), String(this.idleMs), String(this.maxAgeMs), String(this.perToken), hash, this.store.key('session', '')],
    );
    return id;
  }

  /** `now` only dates the answer's `expiresAt` (now + what Redis says is left); Redis decides the rest. */
  async resolve(id: string, now = Date.now()): Promise<ResolvedSession | undefined> {
    if (!isSessionId(id)) return undefined;
    const key = this.keyOf(id);
    const used = await this.store.script<[string, number] | null>('burrowUseSession', [key], [String(this.idleMs), String(this.maxAgeMs), String(TOUCH_EVERY_MS)]);
    if (used === null) return undefined;
    const record = JSON.parse(used[0]) as SessionRecord;
    const principal = await this.store.activePrincipal(record.tokenIdSegment);
    if (!sessionPrincipalHolds(record, principal)) {
      this.store.redis.del(key).catch(() => undefined);
      return undefined;
    }
    return { principal, record, expiresAt: now + Math.max(0, used[1]) };
  }

  async close(id: string): Promise<boolean> {
    if (!isSessionId(id)) return false;
    const hash = sessionKeyOf(id);
    const key = this.store.key('session', hash);
    const record = parse<SessionRecord>(await this.store.call(() => this.store.redis.get(key)));
    if (record === undefined) return false;
    const replies = await this.store.call(() => this.store.redis.multi().del(key).zrem(this.store.key('token-sessions', record.tokenIdSegment), hash).exec());
    return replies?.[0]?.[1] === 1;
  }

  /** Redis expires ended sessions itself; a revoked token's are dropped on their next use. */
  sweep(): number {
    return 0;
  }

  private keyOf(id: string): string {
    return this.store.key('session', sessionKeyOf(id));
  }
}

// ---- usage ------------------------------------------------------------------------------------------

interface UsageDelta extends Usage {
  accountId: string;
  start: number;
}

interface UsageBatch {
  id: string;
  deltas: UsageDelta[];
  sending: boolean;
}

/**
 * Usage shared by the cluster's edges. `count` only adds to this process's deltas; `flush` sends them as
 * one batch, applied by one script with HINCRBY at most once (a batch whose reply was lost is sent again
 * with the same id, and its marker in Redis says it was applied). A batch stays in memory until Redis
 * confirmed it, and `current` reads the totals together with the batches' markers in one MULTI: a
 * batch counts from memory exactly while its marker is absent, so a flush is never counted twice nor
 * missed, whenever `current` runs (test/store/usage-flush-double-count.test.ts is the LMDB trap).
 */
class RedisUsageCounter implements UsageCounter {
  /** Counted since the last flush, by `<period start>:<account id>`. */
  private pending = new Map<string, UsageDelta>();
  private readonly batches = new Map<string, UsageBatch>();
  private readonly period: CurrentPeriod;

  constructor(
    private readonly store: RedisStore,
    clock: () => number,
  ) {
    this.period = new CurrentPeriod(clock);
  }

  count(accountId: string, bytesIn: number, bytesOut: number): void {
    const start = this.period.startNow();
    const slot = `${start}:${accountId}`;
    let delta = this.pending.get(slot);
    if (delta === undefined) {
      delta = { accountId, start, requests: 0, bytesIn: 0, bytesOut: 0 };
      this.pending.set(slot, delta);
    }
    delta.requests++;
    delta.bytesIn += bytesIn;
    delta.bytesOut += bytesOut;
  }

  async current(accountId: string): Promise<Usage> {
    const start = this.period.startNow();
    const batches = [...this.batches.values()].flatMap((batch) => {
      const delta = batch.deltas.find((d) => d.accountId === accountId && d.start === start);
      return delta === undefined ? [] : [{ batch, delta }];
    });
    const transaction = this.store.redis.multi().hmget(this.store.key('usage', accountId, String(start)), 'requests', 'bytesIn', 'bytesOut');
    for (const { batch } of batches) transaction.exists(this.store.key('usage-flush', batch.id));
    const replies = await this.store.call(async () => {
      const result = await transaction.exec();
      if (result === null) throw new Error('the usage read was aborted');
      for (const [error] of result) if (error !== null) throw error;
      return result.map(([, value]) => value);
    });
    const [requests, bytesIn, bytesOut] = replies[0] as (string | null)[];
    const usage: Usage = { requests: Number(requests ?? 0), bytesIn: Number(bytesIn ?? 0), bytesOut: Number(bytesOut ?? 0) };
    batches.forEach(({ delta }, index) => {
      if (replies[index + 1] === 0) add(usage, delta);
    });
    const unflushed = this.pending.get(`${start}:${accountId}`);
    if (unflushed !== undefined) add(usage, unflushed);
    return usage;
  }

  /** Sends what was counted since the last flush, and again any batch an earlier flush could not confirm. */
  async flush(): Promise<void> {
    if (this.pending.size > 0) {
      const id = randomBytes(12).toString('hex');
      this.batches.set(id, { id, deltas: [...this.pending.values()], sending: false });
      this.pending = new Map();
    }
    const sends: Promise<void>[] = [];
    for (const batch of this.batches.values()) if (!batch.sending) sends.push(this.send(batch));
    const outcomes = await Promise.allSettled(sends);
    const failed = outcomes.find((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
  }

  private async send(batch: UsageBatch): Promise<void> {
    batch.sending = true;
    const keys = [this.store.key('usage-flush', batch.id), ...batch.deltas.map((d) => this.store.key('usage', d.accountId, String(d.start)))];
    const args = [String(FLUSH_MARKER_MS), ...batch.deltas.flatMap((d) => [String(d.requests), String(d.bytesIn), String(d.bytesOut)])];
    try {
      await this.store.script<number>('burrowFlushUsage', keys, args);
      this.batches.delete(batch.id);
    } finally {
      batch.sending = false;
    }
  }
}

function add(total: Usage, delta: Usage): void {
  total.requests += delta.requests;
  total.bytesIn += delta.bytesIn;
  total.bytesOut += delta.bytesOut;
}

// ---- limiters -----------------------------------------------------------------------------------

/** FixedWindowLimiter's decisions, one window per key for the whole cluster (src/store/redis-scripts.ts). */
class RedisRateLimiter implements RateLimiter {
  constructor(
    private readonly store: RedisStore,
    private readonly name: string,
    readonly limit: number,
    readonly windowMs: number,
  ) {}

  async hit(key: string): Promise<RateDecision> {
    const [count, leftMs] = await this.store.script<[number, number]>('burrowLimiterHit', [this.store.key('limit', this.name, key)], [String(this.windowMs)]);
    return {
      allowed: count <= this.limit,
      limit: this.limit,
      remaining: Math.max(0, this.limit - count),
      resetSeconds: Math.max(1, Math.ceil(leftMs / 1000)),
    };
  }

  /** Windows expire in Redis. */
  sweep(): void {}
}

// ---- helpers ------------------------------------------------------------------------------------

const NO_TOKEN_HASH = Buffer.alloc(32);
const MALFORMED: AuthOutcome = Object.freeze({ failure: 'malformed' as const });
const UNKNOWN: AuthOutcome = Object.freeze({ failure: 'unknown' as const });

/** A reservation record; its policy is kept as a JSON string inside it (see burrowSetPolicy). */
function parseReservation(json: string | null | undefined): ReservationRecord | undefined {
  const record = parse<Omit<ReservationRecord, 'policy'> & { policy?: string }>(json);
  if (record === undefined) return undefined;
  const { policy, ...rest } = record;
  return policy === undefined ? rest : { ...rest, policy: JSON.parse(policy) as StoredPolicy };
}

function parse<T>(json: string | null | undefined): T | undefined {
  return json === null || json === undefined ? undefined : (JSON.parse(json) as T);
}

function numberOrNull(value: string | null | undefined): number | null {
  return value === null || value === undefined ? null : Number(value);
}

/** Lua has no Infinity to receive: -1 stands for "no cap". */
function capArgument(cap: number): string {
  return Number.isFinite(cap) ? String(cap) : '-1';
}

function newToken(accountId: string, label: string, now: number): { stored: StoredToken; created: CreatedToken } {
  const idSegment = newTokenIdSegment();
  const secret = newTokenSecret(idSegment);
  const stored: StoredToken = { idSegment, accountId, label, hash: hashToken(secret).toString('hex'), createdAt: now, revokedAt: null };
  return { stored, created: { ...toTokenInfo(stored, null), token: secret } };
}

function toTokenInfo(record: StoredToken, lastUsedAt: number | null): TokenInfo {
  return {
    id: tokenIdOf(record.idSegment),
    idSegment: record.idSegment,
    accountId: record.accountId,
    label: record.label,
    prefix: tokenPrefixOf(record.idSegment),
    createdAt: record.createdAt,
    lastUsedAt,
  };
}

/**
 * Redis Cluster is refused at start-up with a message that says why: every lease script and several
 * account scripts touch keys of many hash slots in one atomic step, which Redis Cluster cannot run.
 */
async function refuseRedisCluster(redis: Redis): Promise<void> {
  const info = await redis.info('cluster');
  if (/^cluster_enabled:1\b/m.test(info)) {
    throw new BurrowError(
      'INVALID_REQUEST',
      'Redis Cluster is not supported as the cluster store: its scripts change keys of many hash slots in one atomic step. ' +
        'Use one Redis (redis://) or a master with replicas under Sentinel (redis-sentinel://HOST:PORT,.../MASTER); see docs/cluster.md.',
    );
  }
}
