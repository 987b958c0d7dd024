/**
 * The live tunnels: subdomain → session in a Map (the public hot path does one lookup), plus the
 * names held for a grace period after their tunnel ended (dropped, or closed cleanly by its client), so a
 * reconnecting or restarted client keeps its URL and no other account can take it meanwhile (DESIGN.md
 * section 6, "Subdomains"; issue 16).
 */
import { BurrowError } from '../errors.js';
import { generateSubdomain, subdomainProblem } from '../subdomain.js';
import type { Store } from '../store/store.js';
import type { ReplayOverrides, TunnelCloseReason, TunnelDirectory, TunnelInfo } from '../api/types.js';
import type { CaptureRecord } from '../store/captures.js';
import { GoAwayCode, type GoAwayCodeValue } from '../protocol/constants.js';
import type { Awaitable } from '../store/account-store.js';
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
}

/**
 * Whether a connect of the same account may take `subdomain` from the tunnel online on it: only its own
 * reconnect (same instance: the old session may be half-dead, DESIGN.md "Subdomains"), an explicit
 * `replace`, or a client that names no instance. Otherwise the 409 names the running tunnel.
 */
export function takeoverRefusal(subdomain: string, online: OnlineTunnel, details: AdmitDetails): BurrowError | null {
  if (details.replace || details.instance === null || details.instance === online.instance) return null;
  const where = `${online.clientAddress === '' ? 'an unknown address' : online.clientAddress}${online.nodeId === undefined ? '' : ` on edge ${online.nodeId}`}`;
  return new BurrowError(
    'SUBDOMAIN_TAKEN',
    `The subdomain "${subdomain}" is already online for this account: a tunnel to local port ${online.port}, ` +
      `connected from ${where} at ${new Date(online.startedAt).toISOString()} with token ${online.tokenId}. ` +
      'Stop that tunnel first, or take the name over with --replace (a client that died is noticed within about 30 s, then the name is free).',
  );
}

/**
 * The edge's registry in either mode: `TunnelRegistry` on one edge, `ClusterRegistry`
 * (src/edge/cluster/registry.ts) on a lease per subdomain in Redis. The edge and the offline queue see
 * only this.
 */
export interface EdgeRegistry extends TunnelDirectory, SessionDirectory {
  /** The live session on `subdomain` this edge may serve now, if any: the public hot path. */
  session(subdomain: string): TunnelSession | undefined;
  sessions(): IterableIterator<TunnelSession>;
  readonly size: number;
  /**
   * Decides the subdomain of a connecting client (see TunnelRegistry.admit); in cluster mode it also
   * takes the name's lease. Throws (or rejects with) the BurrowError the upgrade answers with.
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
  private readonly live = new Map<string, TunnelSession>();
  private readonly held = new Map<string, Hold>();
  private readonly byAccount = new Map<string, Set<TunnelSession>>();

  constructor(
    private readonly store: Store,
    private readonly graceMs: number,
    private readonly clock: () => number = Date.now,
  ) {}

  /** The live session on `subdomain`, if any: the public hot path. */
  session(subdomain: string): TunnelSession | undefined {
    return this.live.get(subdomain);
  }

  sessions(): IterableIterator<TunnelSession> {
    return this.live.values();
  }

  get size(): number {
    return this.live.size;
  }

  /**
   * Decides the subdomain a connecting client of `accountId` gets: the one it asked for (validated,
   * not reserved or held by another account, within the tunnel cap) or a fresh generated one.
   * Throws the BurrowError the upgrade answers with.
   */
  admit(accountId: string, tunnelCap: number, requested: string | null, details: AdmitDetails): string {
    let subdomain: string;
    if (requested !== null) {
      const problem = subdomainProblem(requested);
      if (problem !== null) throw new BurrowError('INVALID_REQUEST', `Invalid subdomain "${requested}": ${problem}.`);
      const reservation = this.store.getReservation(requested);
      if (reservation !== undefined && reservation.accountId !== accountId) {
        throw new BurrowError('SUBDOMAIN_TAKEN', `The subdomain "${requested}" is reserved by another account.`);
      }
      const holder = this.holderOf(requested);
      if (holder !== undefined && holder !== accountId) {
        throw new BurrowError('SUBDOMAIN_TAKEN', `The subdomain "${requested}" is in use by another account.`);
      }
      const online = this.live.get(requested);
      const refusal = online === undefined ? null : takeoverRefusal(requested, online, details);
      if (refusal !== null) throw refusal;
      subdomain = requested;
    } else {
      subdomain = this.freshName();
    }
    // A replacement of this account's live session on the same name does not count twice.
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

  /** Makes `session` the live tunnel of its subdomain, replacing (and closing) an older one. */
  add(session: TunnelSession): void {
    const previous = this.live.get(session.subdomain);
    this.held.delete(session.subdomain);
    this.live.set(session.subdomain, session);
    let set = this.byAccount.get(session.accountId);
    if (set === undefined) {
      set = new Set();
      this.byAccount.set(session.accountId, set);
    }
    set.add(session);
    if (previous !== undefined && previous !== session) {
      this.detach(previous);
      previous.goAway(GoAwayCode.REPLACED, replacedReason(previous, session));
    }
  }

  /**
   * Forgets a session whose WebSocket ended and holds its name for the owner during the grace period.
   * Ends that release the name (closed through the API, token revoked, replaced) detach it first.
   */
  remove(session: TunnelSession): void {
    if (this.live.get(session.subdomain) !== session) return;
    this.detach(session);
    if (this.graceMs > 0) this.held.set(session.subdomain, { accountId: session.accountId, until: this.clock() + this.graceMs });
  }

  private detach(session: TunnelSession): void {
    if (this.live.get(session.subdomain) === session) this.live.delete(session.subdomain);
    const set = this.byAccount.get(session.accountId);
    if (set !== undefined) {
      set.delete(session);
      if (set.size === 0) this.byAccount.delete(session.accountId);
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
    const set = this.byAccount.get(accountId);
    if (set === undefined) return [];
    return [...set].map((session) => session.info()).sort((a, b) => a.startedAt - b.startedAt);
  }

  get(subdomain: string): TunnelInfo | undefined {
    return this.live.get(subdomain)?.info();
  }

  close(subdomain: string, reason: TunnelCloseReason): boolean {
    return reason === 'token-revoked'
      ? this.evict(subdomain, GoAwayCode.TOKEN_REVOKED, 'the token of this tunnel was revoked')
      : this.evict(subdomain, GoAwayCode.CLOSED_BY_API, 'the tunnel was closed through the API');
  }

  /** Ends the live session on `subdomain` with GOAWAY `code`, without a grace hold; false when there is none. */
  evict(subdomain: string, code: GoAwayCodeValue, message: string): boolean {
    const session = this.live.get(subdomain);
    if (session === undefined) return false;
    this.detach(session);
    session.goAway(code, message);
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
    const session = this.live.get(capture.subdomain);
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
