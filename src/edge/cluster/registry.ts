/**
 * The edge's registry in cluster mode (docs/cluster.md): which edge holds each subdomain is a lease in
 * Redis (src/store/redis-leases.ts); the sessions connected to this edge live in a local TunnelRegistry,
 * whose hot-path lookup this class adds one check to: the lease's local validity.
 *
 * A tunnel is served here only while its lease is valid locally: until the start of its last successful
 * renewal (or its grant) + TTL − margin, on this process's monotonic clock, which ends before Redis can
 * expire the lease and grant the name elsewhere (the argument is in redis-leases.ts). So while Redis is
 * unreachable, held tunnels keep answering for up to TTL − margin (13 s by default), renewals keep being
 * tried, and new connects get 503 STORE_UNAVAILABLE; when Redis is back, renewals extend the validity
 * again, and a lease that expired meanwhile is claimed again for its session (or the session gets GOAWAY
 * REPLACED when someone else has the name by then).
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { BurrowError } from '../../errors.js';
import { generateSubdomain, subdomainProblem } from '../../subdomain.js';
import { GoAwayCode } from '../../protocol/constants.js';
import type { AccountStore } from '../../store/account-store.js';
import type { CaptureDetail } from '../../store/captures.js';
import {
  LEASE_TTL_MS,
  HEARTBEAT_TTL_MS,
  RENEW_EVERY_MS,
  VALIDITY_MARGIN_MS,
  RedisLeases,
  type ClaimResult,
  type ClusterCommand,
  type LeaseRecord,
} from '../../store/redis-leases.js';
import type { Store } from '../../store/store.js';
import type { ReplayOverrides, TunnelCloseReason, TunnelInfo } from '../../api/types.js';
import { takeoverRefusal, TunnelRegistry, type AdmitDetails, type EdgeRegistry } from '../registry.js';
import type { TunnelSession } from '../session.js';
import type { ClusterDirectory, ClusterPeer, LocalTunnels, PeerLink, TunnelLease } from './types.js';

export interface ClusterTimings {
  /** How long a lease lives in Redis without renewal. */
  leaseTtlMs: number;
  renewEveryMs: number;
  /** Served locally until (last renewal's start + TTL − margin). */
  marginMs: number;
  heartbeatTtlMs: number;
  /** How long `ownerOf` answers from memory (pub/sub drops entries as owners change). */
  ownerCacheMs: number;
}

export const DEFAULT_CLUSTER_TIMINGS: Readonly<ClusterTimings> = Object.freeze({
  leaseTtlMs: LEASE_TTL_MS,
  renewEveryMs: RENEW_EVERY_MS,
  marginMs: VALIDITY_MARGIN_MS,
  heartbeatTtlMs: HEARTBEAT_TTL_MS,
  ownerCacheMs: 1_000,
});

export interface ClusterRegistryOptions {
  leases: RedisLeases;
  /** A connection of its own for the commands channel (a subscribed connection can do nothing else). */
  subscriber: Redis;
  /** Reservations (the shared store in cluster mode). */
  accounts: AccountStore;
  /** The edge's local store, for the local session table. */
  local: Store;
  self: ClusterPeer;
  graceMs: number;
  publicUrlOf(subdomain: string): string;
  log(line: string): void;
  timings?: Partial<ClusterTimings>;
}

/** A lease this edge holds (granted to one of its sessions, or granted and waiting for the upgrade). */
interface LocalLease {
  subdomain: string;
  accountId: string;
  tokenId: string;
  port: number;
  instance: string | null;
  clientAddress: string;
  startedAt: number;
  publicUrl: string;
  cap: number;
  fence: number;
  /** Served until then (monotonic ms). */
  validUntil: number;
  /** Granted at (monotonic ms): a grant whose upgrade never happened is given back after a while. */
  grantedAt: number;
}

/** A granted name whose WebSocket has not opened yet is given back after this long. */
const PENDING_LIMIT_MS = 30_000;
const TAKEOVER_ATTEMPTS = 3;

export class ClusterRegistry implements EdgeRegistry, ClusterDirectory, LocalTunnels {
  readonly self: ClusterPeer;
  /** The internal hop's control calls; set by the edge once the hop exists. Without one a takeover waits for expiry. */
  peerLink: PeerLink | null = null;
  private readonly local: TunnelRegistry;
  private readonly leases: RedisLeases;
  /** Leases of live local sessions, by subdomain. */
  private readonly held = new Map<string, LocalLease>();
  /** Leases granted to connects whose WebSocket is not open yet. */
  private readonly pending = new Map<string, LocalLease>();
  private readonly owners = new Map<string, { lease: TunnelLease | null; until: number }>();
  private readonly timings: ClusterTimings;
  private readonly clock = (): number => performance.now();
  private timer: NodeJS.Timeout | null = null;
  private renewing: Promise<void> | null = null;
  /** Redis writes started by session ends (holds): awaited on stop. */
  private readonly writes = new Set<Promise<unknown>>();
  private storeDown = false;
  private stopped = false;
  /** The edge stopped accepting connections: it serves nothing new (see `quiesce`). */
  private leaving = false;

  constructor(private readonly options: ClusterRegistryOptions) {
    this.self = options.self;
    this.leases = options.leases;
    // Grace holds live in Redis; locally a session that ends is simply gone.
    this.local = new TunnelRegistry(options.local, 0);
    this.timings = { ...DEFAULT_CLUSTER_TIMINGS, ...options.timings };
  }

  /** A fresh boot id: tells a restarted edge apart from its former self. */
  static newBoot(): string {
    return randomBytes(8).toString('hex');
  }

  /** Joins the cluster: listens for commands, beats the first heartbeat, starts renewing. */
  async start(): Promise<void> {
    await RedisLeases.subscribe(this.options.subscriber, this.leases.channel, (command) => this.onCommand(command));
    await this.leases.renew(this.self, [], this.timings.leaseTtlMs, this.timings.heartbeatTtlMs);
    this.timer = setInterval(() => void this.renew(), this.timings.renewEveryMs);
    this.timer.unref();
  }

  /**
   * Leaves the cluster (after the edge's sessions got GOAWAY): waits for their holds to be written,
   * removes the heartbeat. Redis being down does not stop the edge from stopping.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    await this.renewing;
    for (const lease of this.pending.values()) this.track(this.leases.drop(lease.subdomain, lease.accountId, lease.fence, this.self.nodeId));
    this.pending.clear();
    // Sessions told GOAWAY whose close uWS has not reported yet: their names are held now, as a close would.
    for (const lease of this.held.values()) this.track(this.leases.hold(lease.subdomain, lease.accountId, lease.fence, this.self.nodeId, this.options.graceMs));
    this.held.clear();
    await Promise.allSettled([...this.writes]);
    await this.leases.leave(this.self.nodeId).catch(() => undefined);
  }

  /**
   * The edge is about to close its listener: from then on other edges cannot ask it to release a tunnel
   * (their call is refused, which they take as "gone"), so it must not serve any of its tunnels to a new
   * request either, not even on public connections kept alive past the listener. Requests in flight finish.
   */
  quiesce(): void {
    this.leaving = true;
  }

  /** Stops renewing without telling Redis anything: what a crashed edge looks like to the others (tests). */
  halt(): void {
    this.stopped = true;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  // ---- the edge's registry ----------------------------------------------------------------------------

  session(subdomain: string): TunnelSession | undefined {
    const session = this.local.session(subdomain);
    if (session === undefined || this.leaving) return undefined;
    const lease = this.held.get(subdomain);
    return lease !== undefined && lease.validUntil > this.clock() ? session : undefined;
  }

  sessions(): IterableIterator<TunnelSession> {
    return this.local.sessions();
  }

  get size(): number {
    return this.local.size;
  }

  async admit(accountId: string, tunnelCap: number, requested: string | null, details: AdmitDetails): Promise<string> {
    if (this.stopped || this.leaving) throw new BurrowError('STORE_UNAVAILABLE', 'This edge is shutting down; connect to another edge of the cluster.', { 'Retry-After': '1' });
    if (requested === null) return this.admitFresh(accountId, tunnelCap, details);
    const problem = subdomainProblem(requested);
    if (problem !== null) throw new BurrowError('INVALID_REQUEST', `Invalid subdomain "${requested}": ${problem}.`);
    const reservation = await this.options.accounts.getReservation(requested);
    if (reservation !== undefined && reservation.accountId !== accountId) {
      throw new BurrowError('SUBDOMAIN_TAKEN', `The subdomain "${requested}" is reserved by another account.`);
    }
    let fromFence: number | undefined;
    for (let attempt = 0; attempt < TAKEOVER_ATTEMPTS; attempt++) {
      const started = this.clock();
      const result = await this.leases.claim(this.claimOf(requested, accountId, tunnelCap, details, fromFence), this.timings.leaseTtlMs);
      if (result.granted) return this.granted(requested, accountId, tunnelCap, details, result.fence, started);
      this.refuse(requested, tunnelCap, result, details);
      if (result.reason !== 'takeover') break;
      // The same account holds the name live on another edge: a reconnect. The old edge ends its session
      // first (or is shown to be gone), then the name moves from exactly the fence it held.
      const holder = result.holder;
      const gone = holder.nodeId === this.self.nodeId || (await this.isGone(holder.nodeId, holder.boot));
      const outcome = gone ? 'not-held' : this.peerLink === null ? 'unreachable' : await this.peerLink.release({ ...holder }, requested, result.fence);
      if (outcome === 'unreachable') {
        const seconds = Math.ceil(this.timings.leaseTtlMs / 1000);
        throw new BurrowError(
          'STORE_UNAVAILABLE',
          `The subdomain "${requested}" is held by this account's tunnel on edge ${holder.nodeId}, which cannot be reached to hand it over; ` +
            `it is free at the latest ${seconds} s after that edge last renewed it. Retry after ${seconds} s.`,
          { 'Retry-After': String(seconds) },
        );
      }
      fromFence = result.fence;
    }
    throw new BurrowError('STORE_UNAVAILABLE', `The subdomain "${requested}" changed hands while it was being taken over; retry.`, { 'Retry-After': '1' });
  }

  private async admitFresh(accountId: string, tunnelCap: number, details: AdmitDetails): Promise<string> {
    for (;;) {
      const name = generateSubdomain();
      if ((await this.options.accounts.getReservation(name)) !== undefined) continue;
      const started = this.clock();
      const result = await this.leases.claim(this.claimOf(name, accountId, tunnelCap, details, undefined), this.timings.leaseTtlMs);
      if (result.granted) return this.granted(name, accountId, tunnelCap, details, result.fence, started);
      if (result.reason === 'cap') this.refuse(name, tunnelCap, result, details);
    }
  }

  private claimOf(subdomain: string, accountId: string, cap: number, details: AdmitDetails, fromFence: number | undefined) {
    return {
      subdomain,
      accountId,
      tokenId: details.tokenId,
      port: details.port,
      instance: details.instance ?? '',
      clientAddress: details.clientAddress,
      replace: details.replace,
      startedAt: Date.now(),
      publicUrl: this.options.publicUrlOf(subdomain),
      nodeId: this.self.nodeId,
      advertise: this.self.advertise,
      boot: this.self.boot,
      cap,
      ...(fromFence === undefined ? {} : { fromFence }),
    };
  }

  /** Throws the refusal a claim result means ('takeover' is the caller's to handle). */
  private refuse(subdomain: string, tunnelCap: number, result: Exclude<ClaimResult, { granted: true }>, details: AdmitDetails): void {
    if (result.reason === 'taken') {
      throw new BurrowError('SUBDOMAIN_TAKEN', `The subdomain "${subdomain}" is in use by another account.`);
    }
    if (result.reason === 'online') {
      const { holder } = result;
      const online = { ...holder, instance: holder.instance === '' ? null : holder.instance, nodeId: holder.nodeId === this.self.nodeId ? undefined : holder.nodeId };
      throw takeoverRefusal(subdomain, online, details) ?? new BurrowError('SUBDOMAIN_TAKEN', `The subdomain "${subdomain}" is online in another tunnel of this account.`);
    }
    if (result.reason === 'cap') {
      throw new BurrowError(
        'TUNNEL_LIMIT_REACHED',
        `The plan allows ${tunnelCap} active tunnels and ${result.active} are open. Close a tunnel or upgrade.`,
      );
    }
  }

  private granted(subdomain: string, accountId: string, cap: number, details: AdmitDetails, fence: number, started: number): string {
    const now = this.clock();
    const validUntil = started + this.timings.leaseTtlMs - this.timings.marginMs;
    // A reconnect to this same edge: the live session it replaces goes on under the new grant until then.
    const live = this.held.get(subdomain);
    if (live !== undefined && live.accountId === accountId) {
      live.fence = fence;
      live.validUntil = validUntil;
    }
    this.pending.set(subdomain, {
      subdomain,
      accountId,
      tokenId: details.tokenId,
      port: details.port,
      instance: details.instance,
      clientAddress: details.clientAddress,
      startedAt: Date.now(),
      publicUrl: this.options.publicUrlOf(subdomain),
      cap,
      fence,
      validUntil,
      grantedAt: now,
    });
    this.announce(subdomain);
    return subdomain;
  }

  abandon(subdomain: string, accountId: string): void {
    const lease = this.pending.get(subdomain);
    if (lease === undefined || lease.accountId !== accountId) return;
    this.pending.delete(subdomain);
    // A live local session of the same account keeps the name under the new grant (a replacement that never happened).
    if (this.held.get(subdomain)?.fence === lease.fence) return;
    this.track(this.leases.drop(subdomain, accountId, lease.fence, this.self.nodeId));
    this.announce(subdomain);
  }

  add(session: TunnelSession): void {
    const subdomain = session.subdomain;
    if (this.leaving) {
      this.abandon(subdomain, session.accountId);
      session.goAway(GoAwayCode.SHUTDOWN, 'the edge is shutting down');
      return;
    }
    const grant = this.pending.get(subdomain) ?? this.held.get(subdomain);
    if (grant === undefined || grant.accountId !== session.accountId) {
      // Its grant was released to another edge while the upgrade was under way.
      session.goAway(GoAwayCode.REPLACED, 'another connection of this account took over the subdomain');
      return;
    }
    this.pending.delete(subdomain);
    this.held.set(subdomain, grant);
    this.local.add(session);
  }

  remove(session: TunnelSession): void {
    if (this.local.session(session.subdomain) !== session) return;
    this.local.remove(session);
    const lease = this.held.get(session.subdomain);
    if (lease === undefined) return;
    this.held.delete(session.subdomain);
    // A new connect of the same name on this edge is waiting for its upgrade: it keeps the lease.
    if (this.pending.has(session.subdomain)) return;
    this.track(this.leases.hold(lease.subdomain, lease.accountId, lease.fence, this.self.nodeId, this.options.graceMs));
    this.announce(lease.subdomain);
  }

  sweep(): void {
    const cutoff = this.clock() - PENDING_LIMIT_MS;
    for (const lease of [...this.pending.values()]) if (lease.grantedAt < cutoff) this.abandon(lease.subdomain, lease.accountId);
    for (const [subdomain, entry] of this.owners) if (entry.until <= this.clock()) this.owners.delete(subdomain);
  }

  // ---- renewals ---------------------------------------------------------------------------------------

  /** One renewal round (also the heartbeat); rounds never overlap. */
  renew(): Promise<void> {
    this.renewing ??= this.renewRound().finally(() => {
      this.renewing = null;
    });
    return this.renewing;
  }

  private async renewRound(): Promise<void> {
    const batch = [...this.held.values(), ...this.pending.values()].map((lease) => ({ lease, subdomain: lease.subdomain, fence: lease.fence, accountId: lease.accountId }));
    const started = this.clock();
    let outcomes;
    try {
      outcomes = await this.leases.renew(this.self, batch, this.timings.leaseTtlMs, this.timings.heartbeatTtlMs);
    } catch (error) {
      if (!this.storeDown) this.options.log(`cluster: lease renewal failed, tunnels stay served while their leases are valid: ${(error as Error).message}`);
      this.storeDown = true;
      return;
    }
    if (this.storeDown) this.options.log('cluster: the shared store is reachable again');
    this.storeDown = false;
    const reclaims: Promise<void>[] = [];
    for (let i = 0; i < batch.length; i++) {
      const { lease, fence } = batch[i]!;
      if (lease.fence !== fence || !this.isCurrent(lease)) continue;
      const outcome = outcomes[i];
      if (outcome === 'ok') lease.validUntil = started + this.timings.leaseTtlMs - this.timings.marginMs;
      else if (outcome === 'missing') reclaims.push(this.reclaim(lease));
      else this.lose(lease, 'another edge took the subdomain over');
    }
    await Promise.all(reclaims);
  }

  private isCurrent(lease: LocalLease): boolean {
    return this.held.get(lease.subdomain) === lease || this.pending.get(lease.subdomain) === lease;
  }

  /** A lease expired while Redis was away: the session gets its name again if nobody else took it. */
  private async reclaim(lease: LocalLease): Promise<void> {
    const started = this.clock();
    let result: ClaimResult;
    try {
      result = await this.leases.claim(
        this.claimOf(lease.subdomain, lease.accountId, lease.cap, { tokenId: lease.tokenId, port: lease.port, instance: lease.instance, clientAddress: lease.clientAddress, replace: false }, undefined),
        this.timings.leaseTtlMs,
      );
    } catch {
      return; // Redis went away again: the next round tries again.
    }
    if (!this.isCurrent(lease)) {
      if (result.granted) this.track(this.leases.drop(lease.subdomain, lease.accountId, result.fence, this.self.nodeId));
      return;
    }
    if (result.granted) {
      lease.fence = result.fence;
      lease.validUntil = started + this.timings.leaseTtlMs - this.timings.marginMs;
      this.announce(lease.subdomain);
    } else {
      this.lose(lease, 'the subdomain was given to another tunnel while the cluster store was unreachable');
    }
  }

  /** The lease is someone else's now: the local session ends at once. */
  private lose(lease: LocalLease, why: string): void {
    if (this.pending.get(lease.subdomain) === lease) this.pending.delete(lease.subdomain);
    if (this.held.get(lease.subdomain) !== lease) return;
    this.held.delete(lease.subdomain);
    this.local.evict(lease.subdomain, GoAwayCode.REPLACED, why);
    this.forget(lease.subdomain);
  }

  // ---- commands from other edges ---------------------------------------------------------------------

  /** LocalTunnels: another edge takes the name over for the same account (asked through the hop). */
  release(subdomain: string, fence: number): 'released' | 'not-held' {
    let released = false;
    if (this.pending.get(subdomain)?.fence === fence) {
      this.pending.delete(subdomain);
      released = true;
    }
    if (this.held.get(subdomain)?.fence === fence) {
      this.held.delete(subdomain);
      this.local.evict(subdomain, GoAwayCode.REPLACED, 'the tunnel reconnected through another edge');
      released = true;
    }
    if (released) this.forget(subdomain);
    return released ? 'released' : 'not-held';
  }

  private onCommand(command: ClusterCommand): void {
    switch (command.type) {
      case 'owner':
        this.owners.delete(command.subdomain);
        return;
      case 'close': {
        const lease = this.held.get(command.subdomain);
        if (lease !== undefined && lease.fence === command.fence) this.closeLocal(lease, command.reason);
        return;
      }
      case 'revoke':
        for (const lease of [...this.held.values()]) if (lease.tokenId === command.tokenId) this.closeLocal(lease, 'token-revoked');
        for (const lease of [...this.pending.values()]) if (lease.tokenId === command.tokenId) this.abandon(lease.subdomain, lease.accountId);
        return;
    }
  }

  /** Ends a local tunnel for good (closed through the API, token revoked): the name is freed. */
  private closeLocal(lease: LocalLease, reason: TunnelCloseReason): void {
    this.held.delete(lease.subdomain);
    this.local.close(lease.subdomain, reason);
    this.track(this.leases.drop(lease.subdomain, lease.accountId, lease.fence, this.self.nodeId));
    this.announce(lease.subdomain);
  }

  /** Tells every edge (this one too) that the owner of `subdomain` changed: their caches drop it. */
  private announce(subdomain: string): void {
    this.owners.delete(subdomain);
    this.track(this.leases.publish({ type: 'owner', subdomain }));
  }

  private track(write: Promise<unknown>): void {
    const tracked = write.then(
      () => undefined,
      (error: Error) => this.options.log(`cluster: ${error.message}`),
    );
    this.writes.add(tracked);
    void tracked.finally(() => this.writes.delete(tracked));
  }

  /**
   * True when `nodeId`'s heartbeat names another boot: the process that held the lease is no more. A
   * missing heartbeat proves nothing: an edge cut off from Redis stops renewing it yet serves its leases
   * until their validity ends, which may be later; such a holder is asked to release (and a dead one
   * refuses the connection, which counts as gone).
   */
  private async isGone(nodeId: string, boot: string): Promise<boolean> {
    const beat = await this.leases.peer(nodeId);
    return beat !== null && beat.boot !== boot;
  }

  // ---- ClusterDirectory (the hop's view) ------------------------------------------------------------

  async ownerOf(subdomain: string): Promise<TunnelLease | null> {
    const now = this.clock();
    const cached = this.owners.get(subdomain);
    if (cached !== undefined && cached.until > now) return cached.lease;
    const record = await this.leases.owner(subdomain);
    const lease = record === null || record.state !== 'live' ? null : tunnelLease(record);
    this.owners.set(subdomain, { lease, until: now + this.timings.ownerCacheMs });
    return lease;
  }

  forget(subdomain: string): void {
    this.owners.delete(subdomain);
  }

  async peers(): Promise<ClusterPeer[]> {
    return (await this.leases.peers()).map(({ nodeId, advertise, boot }) => ({ nodeId, advertise, boot }));
  }

  // ---- TunnelDirectory (the API's view) ---------------------------------------------------------------

  async listByAccount(accountId: string): Promise<TunnelInfo[]> {
    return (await this.leases.listLive(accountId)).map(tunnelInfo);
  }

  async get(subdomain: string): Promise<TunnelInfo | undefined> {
    const record = await this.leases.owner(subdomain);
    return record === null || record.state !== 'live' ? undefined : tunnelInfo(record);
  }

  async holderOf(subdomain: string): Promise<string | undefined> {
    return (await this.leases.owner(subdomain))?.accountId;
  }

  /**
   * Closes the tunnel wherever it is connected: here at once; on another edge through the commands
   * channel, whose edge ends the session and frees the name (so the name is never free while a
   * session still serves it).
   */
  async close(subdomain: string, reason: TunnelCloseReason): Promise<boolean> {
    const local = this.held.get(subdomain);
    if (local !== undefined) {
      this.closeLocal(local, reason);
      return true;
    }
    const record = await this.leases.owner(subdomain);
    if (record === null || record.state !== 'live') return false;
    await this.leases.publish({ type: 'close', subdomain, fence: record.fence, reason });
    return true;
  }

  async closeByToken(tokenId: string): Promise<number> {
    let closed = 0;
    for (const lease of [...this.held.values()]) {
      if (lease.tokenId !== tokenId) continue;
      this.closeLocal(lease, 'token-revoked');
      closed++;
    }
    await this.leases.publish({ type: 'revoke', tokenId });
    return closed;
  }

  replay(capture: CaptureDetail, overrides: ReplayOverrides): Promise<CaptureDetail> {
    if (this.session(capture.subdomain) === undefined) {
      return Promise.reject(new BurrowError('TUNNEL_OFFLINE', `The tunnel ${capture.subdomain} is not connected to this edge.`));
    }
    return this.local.replay(capture, overrides);
  }

  /** The fence of this edge's lease on `subdomain` (tests, diagnostics), or undefined. */
  fenceOf(subdomain: string): number | undefined {
    return this.held.get(subdomain)?.fence;
  }
}

function tunnelLease(record: LeaseRecord): TunnelLease {
  return {
    ...tunnelInfo(record),
    nodeId: record.nodeId,
    advertise: record.advertise,
    boot: record.boot,
    fence: record.fence,
  };
}

function tunnelInfo(record: LeaseRecord): TunnelInfo {
  return {
    subdomain: record.subdomain,
    accountId: record.accountId,
    tokenId: record.tokenId,
    port: record.port,
    startedAt: record.startedAt,
    publicUrl: record.publicUrl,
  };
}
