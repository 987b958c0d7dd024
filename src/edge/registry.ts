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
import { GoAwayCode } from '../protocol/constants.js';
import type { TunnelSession } from './session.js';

interface Hold {
  accountId: string;
  until: number;
}

export class TunnelRegistry implements TunnelDirectory {
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
  admit(accountId: string, tunnelCap: number, requested: string | null): string {
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
      subdomain = requested;
    } else {
      subdomain = this.freshName();
    }
    // A reconnect that replaces this account's live session on the same name does not count twice.
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
      previous.goAway(GoAwayCode.REPLACED, 'another connection of this account took over the subdomain');
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
    const session = this.live.get(subdomain);
    if (session === undefined) return false;
    this.detach(session);
    session.goAway(
      reason === 'token-revoked' ? GoAwayCode.TOKEN_REVOKED : GoAwayCode.CLOSED_BY_API,
      reason === 'token-revoked' ? 'the token of this tunnel was revoked' : 'the tunnel was closed through the API',
    );
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
