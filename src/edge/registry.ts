/**
 * The live tunnels: name → session in a Map (the public hot path does one lookup), plus the names held
 * for a grace period after their tunnel ended (dropped, or closed cleanly by its client), so a
 * reconnecting or restarted client keeps its URL and no other account can take it meanwhile (DESIGN.md
 * section 6, "Subdomains"; issue 16). A name is a subdomain (http and tls tunnels) or `tcp:PORT`.
 *
 * A name served by a pool (`--pool`, pool.ts) maps to one of its members, whose `pool` field leads to the
 * others: the hot path pays one field check for it.
 */
import { BurrowError } from '../errors.js';
import { generateSubdomain, subdomainProblem } from '../subdomain.js';
import type { Store } from '../store/store.js';
import type { ReservationRecord } from '../store/account-store.js';
import type { ReplayOverrides, TunnelCloseReason, TunnelDirectory, TunnelInfo } from '../api/types.js';
import type { CaptureRecord } from '../store/captures.js';
import { GoAwayCode, TunnelKind, type GoAwayCodeValue, type TunnelKindValue } from '../protocol/constants.js';
import type { Awaitable } from '../store/account-store.js';
import type { StoredPolicy } from '../protocol/policy.js';
import { leavePool, MAX_POOL_MEMBERS, TunnelPool } from './pool.js';
import type { SessionDirectory, TunnelSession } from './session.js';

/** What a connecting tunnel tells the registry besides its account (cluster mode writes it into the lease). */
export interface AdmitDetails {
  tokenId: string;
  port: number;
  /** The public address the client connected from, as the edge believes it. */
  clientAddress: string;
  /**
   * The client process's id (the connect's `instance` parameter, docs/protocol.md section 1): the same
   * client reconnecting replaces its own old session; another client of the account is refused while
   * the name is online. null for a client that sends none (older clients), which replaces as before.
   */
  instance: string | null;
  /** The connect asked to take the name over from the account's other live tunnel (`--replace`). */
  replace: boolean;
  /**
   * The tunnel's one-run policy (docs/policies.md): in cluster mode it is written into the lease, so a
   * forwarding edge applies it before its hop.
   */
  policy?: StoredPolicy;
  /** 'http' when absent: a tls tunnel's name is a subdomain too, a tcp tunnel's is `tcp:PORT`. */
  kind?: TunnelKindValue;
  /** `--pool`: join the account's pool on the name when one is online, instead of being refused. */
  pool?: boolean;
  /**
   * Cluster mode: the client's earlier sessions this connect replaces (their attachments, from the
   * connect's `drop`): the edges that had them let go at once. Ignored on one edge, where a reconnect
   * replaces the old session anyway.
   */
  drop?: readonly number[];
}

/** The tunnel that holds a name online, as a refused connect is told about it. */
export interface OnlineTunnel {
  instance: string | null;
  clientAddress: string;
  port: number;
  startedAt: number;
  tokenId: string;
  /** The edge it is connected to, in cluster mode. */
  nodeId?: string;
  /** Its kind ('http' when absent) and whether it serves in a pool. */
  kind?: TunnelKindValue;
  pooled?: boolean;
}

/**
 * Whether a connect of the same account may take `subdomain` from the tunnel online on it: only its own
 * reconnect (same instance: the old session may be half-dead, DESIGN.md "Subdomains"), an explicit
 * `replace`, a `pool` joining a pool of the same kind, or a client that names no instance. Otherwise the
 * 409 names the running tunnel.
 */
export function takeoverRefusal(subdomain: string, online: OnlineTunnel, details: AdmitDetails): BurrowError | null {
  if (details.replace || details.instance === null || details.instance === online.instance) return null;
  const onlineKind = online.kind ?? TunnelKind.HTTP;
  const wantedKind = details.kind ?? TunnelKind.HTTP;
  if (details.pool === true && online.pooled === true && onlineKind === wantedKind) return null;
  const where = `${online.clientAddress === '' ? 'an unknown address' : online.clientAddress}${online.nodeId === undefined ? '' : ` on edge ${online.nodeId}`}`;
  const kindText = onlineKind === TunnelKind.HTTP ? 'a tunnel' : `a ${onlineKind} tunnel`;
  const poolHint =
    details.pool === true
      ? online.pooled === true
        ? ` It is a pool of ${onlineKind} tunnels; a ${wantedKind} tunnel cannot join it.`
        : ' It was started without --pool, so it serves alone; start every member with --pool to share the name.'
      : online.pooled === true
        ? ' It is a pool: add --pool to join it.'
        : '';
  return new BurrowError(
    'SUBDOMAIN_TAKEN',
    `The subdomain "${subdomain}" is already online for this account: ${kindText} to local port ${online.port}, ` +
      `connected from ${where} at ${new Date(online.startedAt).toISOString()} with token ${online.tokenId}.${poolHint} ` +
      'Stop that tunnel first, or take the name over with --replace (a client that died is noticed within about 30 s, then the name is free).',
  );
}

/**
 * A reservation of the account that is for another kind of tunnel: a name reserved for TLS passthrough
 * (`burrow reserve NAME --tls`) takes only `burrow tls`, any other reserved name only `burrow http`.
 */
export function reservedKindRefusal(name: string, reservation: ReservationRecord | undefined, kind: TunnelKindValue): BurrowError | null {
  if (reservation === undefined || kind === TunnelKind.TCP) return null;
  const reservedKind = reservation.kind === TunnelKind.TLS ? TunnelKind.TLS : TunnelKind.HTTP;
  if (reservedKind === kind) return null;
  return reservedKind === TunnelKind.TLS
    ? new BurrowError('INVALID_REQUEST', `The subdomain "${name}" is reserved for TLS passthrough tunnels (burrow tls); release it and reserve it again without --tls to serve HTTP on it.`)
    : new BurrowError('INVALID_REQUEST', `The subdomain "${name}" is reserved for HTTP tunnels; release it and reserve it again with --tls (burrow reserve ${name} --tls) to pass TLS through on it.`);
}

/** A name the account asks for: a valid subdomain, or `tcp:PORT` for a TCP tunnel. */
export function nameProblem(name: string, kind: TunnelKindValue): string | null {
  if (kind === TunnelKind.TCP) return /^tcp:[1-9][0-9]{0,4}$/.test(name) && Number(name.slice(4)) <= 65535 ? null : 'a TCP tunnel is named tcp:PORT';
  return subdomainProblem(name);
}

/**
 * The edge's registry in either mode: `TunnelRegistry` on one edge, `ClusterRegistry`
 * (src/edge/cluster/registry.ts) on a lease per subdomain in Redis. The edge and the offline queue see
 * only this.
 */
export interface EdgeRegistry extends TunnelDirectory, SessionDirectory {
  /** The live HTTP session that should serve a new request on `subdomain` (a pool's chosen member), if any: the public hot path. */
  session(subdomain: string): TunnelSession | undefined;
  /** The live session of any kind for a new stream on `name` (TCP and TLS passthrough connections). */
  tunnel(name: string): TunnelSession | undefined;
  /**
   * The live HTTP session holding `subdomain`, without choosing among a pool's members (`session` moves a
   * pool's turn on): for what they share (the policy, the capture ring) and whether the name is live.
   */
  holder(subdomain: string): TunnelSession | undefined;
  /** Whether `session` still serves its name (alone, or as a member of its pool still in the choice). */
  serving(session: TunnelSession): boolean;
  /** Every live session (every member of a pool). */
  sessions(): IterableIterator<TunnelSession>;
  readonly size: number;
  /**
   * Decides the name of a connecting tunnel (see TunnelRegistry.admit); in cluster mode it also takes
   * the name's lease. Throws (or rejects with) the BurrowError the upgrade or BIND answers with.
   */
  admit(accountId: string, tunnelCap: number, requested: string | null, details: AdmitDetails): Awaitable<string>;
  /** The upgrade of an admitted client did not happen: gives its name back. */
  abandon(subdomain: string, accountId: string): void;
  /** Drops expired holds; the edge's coarse timer calls it. */
  sweep(): void;
}

interface Hold {
  accountId: string;
  until: number;
}

export class TunnelRegistry implements EdgeRegistry {
  /** One member per live name (a pool's others through its `pool`). */
  private readonly live = new Map<string, TunnelSession>();
  private readonly held = new Map<string, Hold>();
  /** The names each account has live: its tunnel cap counts names, a pool once. */
  private readonly byAccount = new Map<string, Set<string>>();

  constructor(
    private readonly store: Store,
    private readonly graceMs: number,
    private readonly clock: () => number = Date.now,
  ) {}

  /** The live HTTP session to serve `subdomain` now, if any (a pool's choice): the public hot path. */
  session(subdomain: string): TunnelSession | undefined {
    const session = this.live.get(subdomain);
    if (session === undefined || session.fastHttp) return session;
    return session.kind === TunnelKind.HTTP ? session.pool!.pick() : undefined;
  }

  /** The live session of any kind to serve `name` now (a pool's choice): TCP and TLS connections. */
  tunnel(name: string): TunnelSession | undefined {
    const session = this.live.get(name);
    return session?.pool?.pick() ?? session;
  }

  holder(subdomain: string): TunnelSession | undefined {
    const session = this.live.get(subdomain);
    return session !== undefined && session.kind === TunnelKind.HTTP ? session : undefined;
  }

  serving(session: TunnelSession): boolean {
    const held = this.live.get(session.subdomain);
    return held === session || (held !== undefined && held.pool !== null && held.pool.members.includes(session));
  }

  *sessions(): IterableIterator<TunnelSession> {
    for (const session of this.live.values()) {
      if (session.pool === null) yield session;
      else yield* session.pool.members;
    }
  }

  get size(): number {
    return this.live.size;
  }

  /**
   * Decides the name a connecting tunnel of `accountId` gets: the one it asked for (validated, not
   * reserved or held by another account, within the tunnel cap) or a fresh generated one (http and tls;
   * a tcp tunnel always names its port). Throws the BurrowError the upgrade or BIND answers with.
   */
  admit(accountId: string, tunnelCap: number, requested: string | null, details: AdmitDetails): string {
    const kind = details.kind ?? TunnelKind.HTTP;
    let subdomain: string;
    if (requested !== null) {
      const problem = nameProblem(requested, kind);
      if (problem !== null) throw new BurrowError('INVALID_REQUEST', `Invalid subdomain "${requested}": ${problem}.`);
      const reservation = this.store.getReservation(requested);
      if (reservation !== undefined && reservation.accountId !== accountId) {
        throw new BurrowError('SUBDOMAIN_TAKEN', `The ${kind === TunnelKind.TCP ? 'port' : 'subdomain'} "${requested}" is reserved by another account.`);
      }
      const wrongKind = reservedKindRefusal(requested, reservation, kind);
      if (wrongKind !== null) throw wrongKind;
      const holder = this.holderOf(requested);
      if (holder !== undefined && holder !== accountId) {
        throw new BurrowError('SUBDOMAIN_TAKEN', `The ${kind === TunnelKind.TCP ? 'port' : 'subdomain'} "${requested}" is in use by another account.`);
      }
      const online = this.live.get(requested);
      if (online !== undefined) {
        const members = online.pool?.members ?? [online];
        // Its own reconnect replaces its old session; anyone else must be let in by the rule.
        if (!members.some((member) => details.instance !== null && member.instance === details.instance)) {
          const refusal = takeoverRefusal(requested, online, details);
          if (refusal !== null) throw refusal;
          if (details.pool === true && online.pooled && members.length >= MAX_POOL_MEMBERS) {
            throw new BurrowError('TUNNEL_LIMIT_REACHED', `The pool on "${requested}" has ${members.length} members, the most one pool takes.`);
          }
        }
      }
      subdomain = requested;
    } else {
      if (kind === TunnelKind.TCP) throw new BurrowError('INVALID_REQUEST', 'A TCP tunnel is admitted on a port the edge chose.');
      subdomain = this.freshName();
    }
    // Taking over or joining this account's live name does not count twice.
    const replacing = this.live.get(subdomain)?.accountId === accountId;
    const active = this.byAccount.get(accountId)?.size ?? 0;
    if (!replacing && active >= tunnelCap) {
      throw new BurrowError(
        'TUNNEL_LIMIT_REACHED',
        `The plan allows ${tunnelCap} active tunnels and ${active} are open. Close a tunnel or upgrade.`,
      );
    }
    return subdomain;
  }

  /** Nothing was taken at admission on one edge: the name is only in use once its session is added. */
  abandon(_subdomain: string, _accountId: string): void {}

  /**
   * Makes `session` live on its name: alone, beside the account's pool on it (both `--pool`), or in place
   * of the session(s) there before, which end with REPLACED (its own reconnect replaces only itself).
   */
  add(session: TunnelSession): void {
    const name = session.subdomain;
    const current = this.live.get(name);
    this.held.delete(name);
    if (current === undefined || current.accountId !== session.accountId) {
      this.live.set(name, session);
      this.addName(session.accountId, name);
      if (current !== undefined) this.replaceAll(current, session);
      return;
    }
    const members = current.pool === null ? [current] : [...current.pool.members];
    const own = session.instance === null ? undefined : members.find((member) => member.instance === session.instance && member !== session);
    if (session.pooled && current.pooled && current.kind === session.kind) {
      // A pool: the new member joins; its own earlier session (a reconnect) leaves.
      const pool = current.pool ?? new TunnelPool(name);
      pool.add(current);
      pool.add(session);
      if (own !== undefined) this.leavePool(own, pool, session);
      return;
    }
    this.live.set(name, session);
    this.addName(session.accountId, name);
    this.replaceAll(current, session);
  }

  /** Every member on the name before `next` ends with REPLACED. */
  private replaceAll(current: TunnelSession, next: TunnelSession): void {
    const members = current.pool === null ? [current] : [...current.pool.members];
    for (const member of members) {
      if (member === next) continue;
      leavePool(member);
      member.end(GoAwayCode.REPLACED, replacedReason(member, next));
    }
  }

  /** A reconnecting pool member's old session leaves the pool and is told why. */
  private leavePool(old: TunnelSession, pool: TunnelPool, next: TunnelSession): void {
    pool.remove(old);
    if (this.live.get(pool.name) === old) this.live.set(pool.name, pool.members[0]!);
    old.end(GoAwayCode.REPLACED, replacedReason(old, next));
  }

  private addName(accountId: string, name: string): void {
    let names = this.byAccount.get(accountId);
    if (names === undefined) {
      names = new Set();
      this.byAccount.set(accountId, names);
    }
    names.add(name);
  }

  /**
   * Forgets a session whose tunnel ended. A pool member leaves its pool, and the name stays live while
   * another member serves it; otherwise the name is held for the owner during the grace period. Ends that
   * release the name (closed through the API, token revoked, replaced) detach it first.
   */
  remove(session: TunnelSession): void {
    const name = session.subdomain;
    const current = this.live.get(name);
    const pool = session.pool;
    if (pool !== null && current !== undefined && current.pool === pool) {
      pool.remove(session);
      if (pool.size > 0) {
        if (current === session) this.live.set(name, pool.members[0]!);
        // Alone again: the name is back on the hot path's fast branch.
        if (pool.size === 1) pool.remove(pool.members[0]!);
        return;
      }
    }
    if (current !== session) return;
    this.detach(session);
    if (this.graceMs > 0) this.held.set(name, { accountId: session.accountId, until: this.clock() + this.graceMs });
  }

  private detach(session: TunnelSession): void {
    const name = session.subdomain;
    if (this.live.get(name) === session) {
      this.live.delete(name);
      const names = this.byAccount.get(session.accountId);
      if (names !== undefined) {
        names.delete(name);
        if (names.size === 0) this.byAccount.delete(session.accountId);
      }
    }
  }

  /** Drops expired holds; called from the edge's coarse timer. */
  sweep(): void {
    const now = this.clock();
    for (const [subdomain, hold] of this.held) if (hold.until <= now) this.held.delete(subdomain);
  }

  private freshName(): string {
    for (;;) {
      const name = generateSubdomain();
      if (!this.live.has(name) && !this.held.has(name) && this.store.getReservation(name) === undefined) return name;
    }
  }

  // ---- TunnelDirectory (the API's view) ------------------------------------------------------------

  holderOf(subdomain: string): string | undefined {
    const session = this.live.get(subdomain);
    if (session !== undefined) return session.accountId;
    const hold = this.held.get(subdomain);
    if (hold !== undefined && hold.until > this.clock()) return hold.accountId;
    return undefined;
  }

  listByAccount(accountId: string): TunnelInfo[] {
    const names = this.byAccount.get(accountId);
    if (names === undefined) return [];
    const infos: TunnelInfo[] = [];
    for (const name of names) {
      const session = this.live.get(name);
      if (session !== undefined) infos.push(session.info());
    }
    return infos.sort((a, b) => a.startedAt - b.startedAt);
  }

  get(subdomain: string): TunnelInfo | undefined {
    return this.live.get(subdomain)?.info();
  }

  close(subdomain: string, reason: TunnelCloseReason): boolean {
    return reason === 'token-revoked'
      ? this.evict(subdomain, GoAwayCode.TOKEN_REVOKED, 'the token of this tunnel was revoked')
      : this.evict(subdomain, GoAwayCode.CLOSED_BY_API, 'the tunnel was closed through the API');
  }

  /** Ends every live session on `subdomain` (a pool's every member) with `code`, without a grace hold; false when there is none. */
  evict(subdomain: string, code: GoAwayCodeValue, message: string): boolean {
    const session = this.live.get(subdomain);
    if (session === undefined) return false;
    const members = session.pool === null ? [session] : [...session.pool.members];
    this.detach(session);
    for (const member of members) {
      leavePool(member);
      member.end(code, message);
    }
    return true;
  }

  closeByToken(tokenId: string): number {
    let closed = 0;
    for (const session of [...this.live.values()]) {
      if (session.tokenId === tokenId && this.close(session.subdomain, 'token-revoked')) closed++;
    }
    return closed;
  }

  replay(capture: CaptureRecord, overrides: ReplayOverrides): Promise<CaptureRecord> {
    const session = this.session(capture.subdomain);
    if (session === undefined || session.accountId !== capture.accountId) {
      return Promise.reject(new BurrowError('TUNNEL_OFFLINE', `The tunnel ${capture.subdomain} is not connected.`));
    }
    return session.replay(capture, overrides);
  }
}

/** The GOAWAY REPLACED message: its own reconnect, or another client that asked to take over (--replace). */
export function replacedReason(previous: { instance: string | null }, next: { instance: string | null; clientAddress: string }): string {
  return previous.instance !== null && previous.instance === next.instance
    ? 'this client reconnected; the new connection took over the subdomain'
    : `another client of this account (from ${next.clientAddress}) took the subdomain over (--replace)`;
}
