/**
 * The LMDB environment and the account half of Burrow's data: accounts, tokens, reservations; the
 * embedded implementation of `AccountStore` (src/store/account-store.ts).
 *
 * One environment in the data directory, a named database per kind of record (DESIGN.md section 3).
 * Writes that must hold together (a token and its account index, a revoke) run in one lmdb transaction,
 * checks first and writes last, so a crash leaves either all of it or none. Other processes (`burrow
 * admin`) may write while the edge runs; nothing here is cached in memory, so the edge sees their writes.
 * A write whose commit fails (a full disk) is reported and refused with 503 STORAGE_FULL (issue 23).
 */
import { mkdirSync } from 'node:fs';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { open, type Database, type RootDatabase } from 'lmdb';
import { closeAfterWrites } from './lmdb-close.js';
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
  SessionOptions,
  StoreOptions,
  TokenInfo,
  TokenRecord,
  UsageCounter,
} from './account-store.js';
import { OfflineQueueStore, type OfflineMode } from './offline-queue.js';
import type { StoredPolicy } from '../protocol/policy.js';
import { DEFAULT_PLANS, type PlanLimits, type PlanName } from './plans.js';
import { FixedWindowLimiter } from './rate-limit.js';
import { SessionStore } from './sessions.js';
import { UsageMeter } from './usage.js';
import { guardLmdbRejections, isWriteFailure, WriteFailures } from './write-failures.js';

export type { AccountRecord, TokenRecord, ReservationRecord, TokenInfo, CreatedToken, Principal, AuthOutcome, StoreOptions } from './account-store.js';

type Key = string | (string | number)[];

export interface LmdbStoreOptions extends StoreOptions {
  /** Where failed writes are counted and logged (the edge shares one with its capture store). */
  failures?: WriteFailures;
}

/** Sorts after every token id segment and subdomain in an account's index ranges. */
const RANGE_END = '\uffff';

export class Store implements AccountStore {
  readonly kind = 'lmdb' as const;
  readonly root: RootDatabase;
  private readonly accounts: Database<AccountRecord, string>;
  private readonly accountsByEmail: Database<string, string>;
  private readonly tokens: Database<TokenRecord, string>;
  private readonly tokenLastUsed: Database<number, string>;
  private readonly accountTokens: Database<true, Key>;
  private readonly reservations: Database<ReservationRecord, string>;
  private readonly accountReservations: Database<true, Key>;
  private readonly plans: Record<PlanName, PlanLimits>;
  /** Webhooks held for offline reserved subdomains. */
  readonly queue: OfflineQueueStore;
  readonly failures: WriteFailures;
  private closed = false;

  private constructor(root: RootDatabase, options: LmdbStoreOptions) {
    this.root = root;
    this.failures = options.failures ?? new WriteFailures();
    this.accounts = root.openDB({ name: 'accounts', encoding: 'msgpack' });
    this.accountsByEmail = root.openDB({ name: 'accounts-by-email', encoding: 'msgpack' });
    this.tokens = root.openDB({ name: 'tokens', encoding: 'msgpack' });
    this.tokenLastUsed = root.openDB({ name: 'token-last-used', encoding: 'msgpack' });
    this.accountTokens = root.openDB({ name: 'account-tokens', encoding: 'msgpack' });
    this.reservations = root.openDB({ name: 'reservations', encoding: 'msgpack' });
    this.accountReservations = root.openDB({ name: 'account-reservations', encoding: 'msgpack' });
    this.queue = new OfflineQueueStore(root, {
      reservation: (subdomain) => this.reservations.get(subdomain),
      subdomainsOf: (accountId) => this.listReservations(accountId).map((record) => record.subdomain),
    });
    this.plans = {
      FREE: { ...DEFAULT_PLANS.FREE, ...options.plans?.FREE },
      PRO: { ...DEFAULT_PLANS.PRO, ...options.plans?.PRO },
    };
  }

  /** Opens (creating when needed) the environment in `dir` and clears stale readers of dead processes. */
  static open(dir: string, options: LmdbStoreOptions = {}): Store {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    guardLmdbRejections();
    // noSubdir false: `dir` is always a directory; lmdb-js would take a name with a dot ("burrow.data")
    // for a file and fail to open it.
    const root = open({ path: dir, noSubdir: false, maxDbs: 32, compression: false });
    root.readerCheck();
    const store = new Store(root, options);
    store.ensureDecoy();
    return store;
  }

  /**
   * A token record no token can name (its key is not 8 hex characters, its hash matches nothing):
   * authenticating an unknown id reads and decodes it, as a known id's record is read and decoded.
   */
  private ensureDecoy(): void {
    if (this.tokens.get(DECOY_KEY) !== undefined) return;
    // Stored as revoked and in no account's index: it is never active, whatever its hash.
    const decoy: TokenRecord = { idSegment: DECOY_KEY, accountId: '', label: 'decoy', hash: randomBytes(32), createdAt: 0, revokedAt: 0 };
    try {
      this.tokens.putSync(DECOY_KEY, decoy);
    } catch (error) {
      // A full disk must not stop the edge from starting; the next start writes it.
      if (!isWriteFailure(error)) throw error;
      this.failures.report('accounts', error);
    }
  }

  /** A write transaction; a failed commit is reported and rejected with 503 STORAGE_FULL. */
  private write<T>(transaction: () => T): Promise<T> {
    return this.failures.guard('accounts', this.root.transaction(transaction));
  }

  planLimits(plan: PlanName): PlanLimits {
    return this.plans[plan];
  }

  // ---- accounts -------------------------------------------------------------------------------

  getAccount(id: string): AccountRecord | undefined {
    return this.accounts.get(id);
  }

  countAccounts(): number {
    return this.accounts.getKeysCount();
  }

  /** The account with this e-mail address (compared trimmed and lower-cased), for `burrow admin`. */
  findAccountByEmail(email: string): AccountRecord | undefined {
    const id = this.accountsByEmail.get(email.trim().toLowerCase());
    return id === undefined ? undefined : this.accounts.get(id);
  }

  /** Every account, by e-mail address. */
  listAccounts(): AccountRecord[] {
    const accounts: AccountRecord[] = [];
    for (const { value: id } of this.accountsByEmail.getRange()) {
      const account = this.accounts.get(id);
      if (account !== undefined) accounts.push(account);
    }
    return accounts;
  }

  /** Moves an account to another plan; its limits apply from the next request on. */
  async setPlan(accountId: string, plan: PlanName): Promise<AccountRecord | undefined> {
    return this.write(() => {
      const account = this.accounts.get(accountId);
      if (account === undefined) return undefined;
      const updated = { ...account, plan };
      this.accounts.put(accountId, updated);
      return updated;
    });
  }

  /** Creates an account with a first token labelled `tokenLabel`, atomically. */
  async createAccount(email: string, plan: PlanName, tokenLabel: string, now = Date.now()): Promise<{ account: AccountRecord; token: CreatedToken }> {
    const normalisedEmail = email.trim().toLowerCase();
    const account: AccountRecord = { id: newAccountId(), email: normalisedEmail, plan, createdAt: now };
    const created = await this.write(() => {
      if (this.accountsByEmail.get(normalisedEmail) !== undefined) return null;
      this.accounts.put(account.id, account);
      this.accountsByEmail.put(normalisedEmail, account.id);
      return this.writeNewToken(account.id, tokenLabel, now);
    });
    if (created === null) throw new BurrowError('INVALID_REQUEST', `an account with e-mail ${normalisedEmail} exists already`);
    return { account, token: created };
  }

  // ---- tokens ---------------------------------------------------------------------------------

  /** Creates a token unless the plan's active-token cap is reached (403 TOKEN_LIMIT_REACHED). */
  async createToken(account: AccountRecord, label: string, now = Date.now()): Promise<CreatedToken> {
    const cap = this.planLimits(account.plan).activeTokens;
    const created = await this.write(() => {
      if (this.countActiveTokens(account.id) >= cap) return null;
      return this.writeNewToken(account.id, label, now);
    });
    if (created === null) {
      throw new BurrowError(
        'TOKEN_LIMIT_REACHED',
        `The ${account.plan} plan allows ${cap} active tokens. Revoke a token or upgrade.`,
      );
    }
    return created;
  }

  /** Runs inside a write transaction: picks a free id segment and writes token and index together. */
  private writeNewToken(accountId: string, label: string, now: number): CreatedToken {
    let idSegment = newTokenIdSegment();
    while (this.tokens.get(idSegment) !== undefined) idSegment = newTokenIdSegment();
    const secret = newTokenSecret(idSegment);
    const record: TokenRecord = { idSegment, accountId, label, hash: hashToken(secret), createdAt: now, revokedAt: null };
    this.tokens.put(idSegment, record);
    this.accountTokens.put([accountId, idSegment], true);
    return { ...toTokenInfo(record, null), token: secret };
  }

  countActiveTokens(accountId: string): number {
    return this.accountTokens.getKeysCount({ start: [accountId], end: [accountId, RANGE_END] });
  }

  /** The account's active tokens, oldest first. */
  listTokens(accountId: string): TokenInfo[] {
    const list: TokenInfo[] = [];
    for (const key of this.accountTokens.getKeys({ start: [accountId], end: [accountId, RANGE_END] })) {
      const idSegment = (key as [string, string])[1];
      const record = this.tokens.get(idSegment);
      if (record === undefined || record.revokedAt !== null) continue;
      list.push(toTokenInfo(record, this.tokenLastUsed.get(idSegment) ?? null));
    }
    list.sort((a, b) => a.createdAt - b.createdAt || a.idSegment.localeCompare(b.idSegment));
    return list;
  }

  /** Revokes an active token of the account; false when there is no such token on it. */
  async revokeToken(accountId: string, idSegment: string, now = Date.now()): Promise<boolean> {
    return this.write(() => {
      const record = this.tokens.get(idSegment);
      if (record === undefined || record.accountId !== accountId || record.revokedAt !== null) return false;
      this.tokens.put(idSegment, { ...record, revokedAt: now });
      this.accountTokens.remove([accountId, idSegment]);
      return true;
    });
  }

  /** The account and token a bearer token stands for, or null when it is malformed, unknown or revoked. */
  authenticate(bearer: string): Principal | null {
    const outcome = this.verify(bearer);
    return 'principal' in outcome ? outcome.principal : null;
  }

  /**
   * Checks a bearer token. The stored SHA-256 and the presented token's are compared as equal-length
   * digests in constant time, and an unknown id does the same work as a known one with a wrong secret
   * (a record read and decoded, a hash, a comparison): measured medians of 2,000 tries were 8 µs for a
   * wrong secret against 3.5 µs for an unknown id before the decoy, when only the hit decoded a record.
   */
  verify(bearer: string): AuthOutcome {
    const parsed = parseToken(bearer);
    if (parsed === null) return MALFORMED;
    const record = this.tokens.get(parsed.idSegment);
    const compared = record ?? this.tokens.get(DECOY_KEY);
    const presented = hashToken(bearer);
    const stored = compared?.hash ?? NO_TOKEN_HASH;
    const equal = stored.byteLength === presented.byteLength && timingSafeEqual(stored, presented);
    if (record === undefined) return UNKNOWN;
    if (!equal) return { failure: 'wrong-secret', idSegment: parsed.idSegment };
    if (record.revokedAt !== null) return { failure: 'revoked', idSegment: parsed.idSegment };
    const account = this.accounts.get(record.accountId);
    if (account === undefined) return UNKNOWN;
    return { principal: { account, token: toTokenInfo(record, this.tokenLastUsed.get(parsed.idSegment) ?? null) } };
  }

  /** The principal of an active token by its id segment (a dashboard session's token), or undefined once revoked. */
  activePrincipal(idSegment: string): Principal | undefined {
    const record = this.tokens.get(idSegment);
    if (record === undefined || record.revokedAt !== null) return undefined;
    const account = this.accounts.get(record.accountId);
    if (account === undefined) return undefined;
    return { account, token: toTokenInfo(record, this.tokenLastUsed.get(idSegment) ?? null) };
  }

  /**
   * Records a use of a token; not awaited by callers, lmdb batches it with other writes. Put off while
   * writes fail (a full disk): a last-use time can wait.
   */
  touchToken(idSegment: string, now = Date.now()): Promise<boolean> {
    if (this.failures.failing) return Promise.resolve(false);
    return this.tokenLastUsed.put(idSegment, now);
  }

  // ---- reservations ---------------------------------------------------------------------------

  getReservation(subdomain: string): ReservationRecord | undefined {
    return this.reservations.get(subdomain);
  }

  listReservations(accountId: string): ReservationRecord[] {
    const list: ReservationRecord[] = [];
    for (const key of this.accountReservations.getKeys({ start: [accountId], end: [accountId, RANGE_END] })) {
      const record = this.reservations.get((key as [string, string])[1]);
      if (record !== undefined && record.accountId === accountId) list.push(record);
    }
    return list;
  }

  /**
   * Reserves `subdomain` for the account: 409 SUBDOMAIN_TAKEN when another account holds it, 403
   * RESERVATION_LIMIT_REACHED when the account already holds `cap` names. The cap is checked inside the
   * write transaction, so concurrent requests cannot reserve past it. Reserving a name the account
   * already holds returns that reservation.
   */
  async reserve(accountId: string, subdomain: string, now = Date.now(), cap = Infinity, offline?: OfflineMode, kind?: ReservationRecord['kind']): Promise<ReservationRecord> {
    const outcome = await this.write(() => {
      const existing = this.reservations.get(subdomain);
      if (existing !== undefined) {
        if (existing.accountId !== accountId || offline === undefined || (existing.offline ?? 'off') === offline) return existing;
        const changed: ReservationRecord = { ...existing, offline };
        this.reservations.put(subdomain, changed);
        return changed;
      }
      if (this.accountReservations.getKeysCount({ start: [accountId], end: [accountId, RANGE_END] }) >= cap) return null;
      const generation = randomBytes(8).toString('hex');
      const record: ReservationRecord = { subdomain, accountId, createdAt: now, generation, ...(offline === undefined ? {} : { offline }), ...(kind === undefined ? {} : { kind }) };
      this.reservations.put(subdomain, record);
      this.accountReservations.put([accountId, subdomain], true);
      return record;
    });
    if (outcome === null) {
      throw new BurrowError('RESERVATION_LIMIT_REACHED', `The plan allows ${cap} reserved subdomains. Release one or upgrade.`);
    }
    if (outcome.accountId !== accountId) {
      throw new BurrowError('SUBDOMAIN_TAKEN', `The subdomain "${subdomain}" is reserved by another account.`);
    }
    return outcome;
  }

  /** Changes a reservation's offline mode; undefined when the account holds no such reservation. */
  async setOfflineMode(accountId: string, subdomain: string, offline: OfflineMode): Promise<ReservationRecord | undefined> {
    return this.write(() => {
      const existing = this.reservations.get(subdomain);
      if (existing === undefined || existing.accountId !== accountId) return undefined;
      const changed: ReservationRecord = { ...existing, offline };
      this.reservations.put(subdomain, changed);
      return changed;
    });
  }

  async setPolicy(accountId: string, subdomain: string, policy: StoredPolicy | undefined, expected?: StoredPolicy): Promise<ReservationRecord | undefined> {
    return this.root.transaction(() => {
      const existing = this.reservations.get(subdomain);
      if (existing === undefined || existing.accountId !== accountId) return undefined;
      if (expected !== undefined && JSON.stringify(existing.policy) !== JSON.stringify(expected)) return undefined;
      const { policy: _previous, ...rest } = existing;
      const changed: ReservationRecord = policy === undefined ? rest : { ...rest, policy };
      this.reservations.put(subdomain, changed);
      return changed;
    });
  }

  async releaseReservation(accountId: string, subdomain: string): Promise<boolean> {
    return this.write(() => {
      const existing = this.reservations.get(subdomain);
      if (existing === undefined || existing.accountId !== accountId) return false;
      this.reservations.remove(subdomain);
      this.accountReservations.remove([accountId, subdomain]);
      // Held webhooks belong to the reservation: another account reserving the name must not get them.
      this.queue.clearInTransaction(subdomain);
      return true;
    });
  }

  // ---- sessions, usage, limiters ------------------------------------------------------------

  dashboardSessions(options: SessionOptions = {}): DashboardSessions {
    return new SessionStore(this.root, this, options, this.failures);
  }

  usageCounter(clock: () => number = Date.now): UsageCounter {
    return new UsageMeter(this.root, clock, this.failures);
  }

  /** In memory: one edge owns a data directory (src/store/data-lock.ts), so its windows are the only ones. */
  rateLimiter(_name: string, limit: number, windowMs: number, clock: () => number = Date.now): RateLimiter {
    return new FixedWindowLimiter(limit, windowMs, clock);
  }

  // ---- lifecycle ------------------------------------------------------------------------------

  /**
   * Waits for every queued write to commit, then closes the environment. After failed writes (a full
   * disk) it waits a second at most: lmdb-js waits for the newest batch's flush to disk, which never
   * comes when that batch failed to commit, and LMDB needs no close to stay consistent.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const closed = closeAfterWrites(this.root);
    if (this.failures.total === 0) return closed;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([closed.catch(() => undefined), new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_AFTER_FAILURES_MS)))]);
    clearTimeout(timer);
  }
}

const CLOSE_AFTER_FAILURES_MS = 1_000;
const NO_TOKEN_HASH = Buffer.alloc(32);
/** The key of the decoy token record: never an id segment (those are 8 hex characters). */
const DECOY_KEY = '~decoy';
const MALFORMED: AuthOutcome = Object.freeze({ failure: 'malformed' as const });
const UNKNOWN: AuthOutcome = Object.freeze({ failure: 'unknown' as const });

function toTokenInfo(record: TokenRecord, lastUsedAt: number | null): TokenInfo {
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
