/**
 * The edge's registry in cluster mode (docs/cluster.md): which edge holds each subdomain is a lease in
 * Redis (src/store/redis-leases.ts); the sessions connected to this edge live in a local TunnelRegistry,
 * whose hot-path lookup this class adds one check to: the lease's local validity.
 *
 * A tunnel is served here only while its lease is valid locally: until the start of its last successful
 * renewal (or its grant) + TTL − margin, on this process's monotonic clock, which ends before Redis can
 * expire the lease and grant the name elsewhere (the argument is in redis-leases.ts and docs/cluster.md).
 * So while Redis is unreachable, held tunnels keep answering for up to TTL − margin (13 s by default),
 * through every edge, since each keeps the last-known owner of every name (owner-map.ts, pushed by
 * Redis); renewals keep being tried and new connects get 503 STORE_UNAVAILABLE. Past its validity a
 * session that is still connected is answered 503 (`lapsed`), never 404. When Redis is back (the lease
 * connection is ready again) the edge renews at once, and a lease that expired meanwhile is claimed
 * again for its session (or the session gets GOAWAY REPLACED when someone else has the name by then).
 *
 * Store status: the edge emits 'store-status' ({available, since, reason}) when a renewal round fails
 * after one succeeded, and when one succeeds again; the session layer tells its clients.
 *
 * Partitions: when leases lapse while the store is unreachable, the edge asks the other edges whether
 * they reach it. If one does (or none answers: this edge is cut off from them too), this edge is the
 * one cut off and its lapsed sessions get GOAWAY STORE_UNREACHABLE, so their clients reconnect through
 * another edge at once; if the others cannot reach the store either, moving would not help, and the
 * sessions stay to be served again the moment Redis is back.
 */
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { BurrowError } from '../../errors.js';
import { generateSubdomain, subdomainProblem } from '../../subdomain.js';
import { GoAwayCode, NoticeCode, type NoticeCodeValue, type Settings } from '../../protocol/constants.js';
import type { AccountStore } from '../../store/account-store.js';
import type { CaptureDetail } from '../../store/captures.js';
import {
  LEASE_TTL_MS,
  HEARTBEAT_TTL_MS,
  RENEW_EVERY_MS,
  VALIDITY_MARGIN_MS,
  RedisLeases,
  storeUnavailable,
  type ClaimResult,
  type ClusterCommand,
  type LeaseRecord,
} from '../../store/redis-leases.js';
import type { Store } from '../../store/store.js';
import type { ReplayOverrides, TunnelCloseReason, TunnelInfo } from '../../api/types.js';
import { takeoverRefusal, TunnelRegistry, type AdmitDetails, type EdgeRegistry } from '../registry.js';
import { MAX_POOL_MEMBERS } from '../pool.js';
import type { TunnelSession } from '../session.js';
import { OwnerMap, storedPolicyOf } from './owner-map.js';
import type { ClusterDirectory, ClusterPeer, LocalTunnels, PeerLink, TunnelLease } from './types.js';


/** A name the owner map has no owner for is asked of Redis at most this often. */
const MISS_RECHECK_MS = 1_000;
const MAX_MISSES_REMEMBERED = 50_000;
export interface ClusterTimings {
  /** How long a lease lives in Redis without renewal. */
  leaseTtlMs: number;
  renewEveryMs: number;
  /** Served locally until (last renewal's start + TTL − margin). */
  marginMs: number;
  heartbeatTtlMs: number;
}

export const DEFAULT_CLUSTER_TIMINGS: Readonly<ClusterTimings> = Object.freeze({
  leaseTtlMs: LEASE_TTL_MS,
  renewEveryMs: RENEW_EVERY_MS,
  marginMs: VALIDITY_MARGIN_MS,
  heartbeatTtlMs: HEARTBEAT_TTL_MS,
});

/** Whether this edge reaches the cluster's store (the 'store-status' event), since when (epoch ms), and why not. */
export interface StoreStatus {
  available: boolean;
  since: number;
  /** Why the store is unavailable ('' when it is available). */
  reason: string;
}

/** The NOTICE a client gets for a store status (docs/protocol.md section 10). */
export function storeNotice(status: StoreStatus): [NoticeCodeValue, string] {
  return status.available
    ? [NoticeCode.STORE_AVAILABLE, 'the edge reaches the cluster store']
    : [NoticeCode.STORE_UNAVAILABLE, `the cluster store is unreachable (${storeCause(status.reason)}); tunnels stay served while their leases hold, new ones wait`];
}

/** The cause inside a STORE_UNAVAILABLE message (storeUnavailable's), for a line a person reads. */
function storeCause(reason: string): string {
  return /^The shared store of the cluster is unreachable \((.*)\)\. Retry after \d+ s\.$/.exec(reason)?.[1] ?? reason;
}

interface ClusterRegistryEvents {
  'store-status': [StoreStatus];
  /** A reservation's policy changed through the API on some edge (this one included). */
  'policy-changed': [subdomain: string];
  /** A name was granted or released (its one-run policy may differ); null: every name (the owner map was loaded again). */
  'owner-changed': [subdomain: string | null];
  /** An event was held for this subdomain in the cluster's offline queue. */
  queued: [string];
  /** The cluster's offline queue of this subdomain is empty again. */
  drained: [string];
}

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
  /** This edge's attachment to the lease (its fence): what it renews and releases. */
  fence: number;
  /** The grant's fence: what the API's close names. */
  ownerFence: number;
  /** Served until then (monotonic ms). */
  validUntil: number;
  /** Granted at (monotonic ms): a grant whose upgrade never happened is given back after a while. */
  grantedAt: number;
  /** The one-run policy's JSON ('' for none): written into the lease again when it is claimed again. */
  policy: string;
  /** `--pool`: this edge's attachment is shared by the pool's members connected here, and given back after the last. */
  pool: boolean;
}

/** A granted name whose WebSocket has not opened yet is given back after this long. */
const PENDING_LIMIT_MS = 30_000;
const TAKEOVER_ATTEMPTS = 3;
/** A (re)subscription not confirmed within this long is given up and its connection made anew. */
const SUBSCRIBE_TIMEOUT_MS = 5_000;

/**
 * Events: 'store-status' (StoreStatus) when the store becomes unavailable to this edge and when it is
 * reachable again, once each. The session layer tells its clients (the tunnel protocol's notice).
 */
export class ClusterRegistry extends EventEmitter<ClusterRegistryEvents> implements EdgeRegistry, ClusterDirectory, LocalTunnels {
  readonly self: ClusterPeer;
  /** The internal hop's control calls; set by the edge once the hop exists. Without one a takeover waits for expiry. */
  peerLink: PeerLink | null = null;
  private readonly local: TunnelRegistry;
  private readonly leases: RedisLeases;
  /** Leases of live local sessions, by subdomain. */
  private readonly held = new Map<string, LocalLease>();
  /** Leases granted to connects whose WebSocket is not open yet. */
  private readonly pending = new Map<string, LocalLease>();
  /** Every name's last-known owner, pushed by Redis. */
  private readonly owners: OwnerMap;
  /** Since when (monotonic ms) the owner map is in step with Redis: subscribed and loaded; -1 while not. */
  private inStepSince = -1;
  private syncing: Promise<void> | null = null;
  private readonly timings: ClusterTimings;
  private readonly clock = (): number => performance.now();
  private timer: NodeJS.Timeout | null = null;
  private lapseTimer: NodeJS.Timeout | null = null;
  private renewing: Promise<void> | null = null;
  /** Another round was asked for while one ran (the store came back meanwhile): run it right after. */
  private renewAgain = false;
  /** Redis writes started by session ends (holds): awaited on stop. */
  private readonly writes = new Set<Promise<unknown>>();
  private status: StoreStatus = { available: true, since: Date.now(), reason: '' };
  private stopped = false;
  /** The edge stopped accepting connections: it serves nothing new (see `quiesce`). */
  private leaving = false;

  constructor(private readonly options: ClusterRegistryOptions) {
    super();
    this.self = options.self;
    this.leases = options.leases;
    // Grace holds live in Redis; locally a session that ends is simply gone.
    this.local = new TunnelRegistry(options.local, 0);
    this.timings = { ...DEFAULT_CLUSTER_TIMINGS, ...options.timings };
    this.owners = new OwnerMap(this.timings.leaseTtlMs, this.clock);
  }

  /** A fresh boot id: tells a restarted edge apart from its former self. */
  static newBoot(): string {
    return randomBytes(8).toString('hex');
  }

  /**
   * Joins the cluster: listens for commands and lease changes, loads every owner, beats the first
   * heartbeat, starts renewing. From then on the owner map is loaded again after every resubscription,
   * and a renewal round runs the moment the lease connection is back (or lost: the outage is noticed at once).
   */
  async start(): Promise<void> {
    const subscriber = this.options.subscriber;
    await RedisLeases.subscribe(subscriber, this.leases.channel, (command) => this.onCommand(command));
    await this.leases.renew(this.self, [], this.timings.leaseTtlMs, this.timings.heartbeatTtlMs);
    await this.syncOwners();
    if (this.inStepSince < 0) throw storeUnavailable(new Error('the tunnel owners could not be loaded'));
    subscriber.on('ready', this.onSubscriberReady);
    subscriber.on('close', this.onSubscriberClose);
    this.leases.redis.on('ready', this.onStoreConnection);
    this.leases.redis.on('close', this.onStoreConnection);
    this.timer = setInterval(() => void this.renew(), this.timings.renewEveryMs);
    this.timer.unref();
  }

  private readonly onSubscriberReady = (): void => void this.syncOwners();
  private readonly onSubscriberClose = (): void => {
    this.inStepSince = -1;
  };
  private readonly onStoreConnection = (): void => {
    if (!this.stopped) void this.renew();
  };

  private detach(): void {
    this.stopped = true;
    if (this.timer !== null) clearInterval(this.timer);
    if (this.lapseTimer !== null) clearTimeout(this.lapseTimer);
    this.timer = null;
    this.lapseTimer = null;
    this.options.subscriber.off('ready', this.onSubscriberReady);
    this.options.subscriber.off('close', this.onSubscriberClose);
    this.leases.redis.off('ready', this.onStoreConnection);
    this.leases.redis.off('close', this.onStoreConnection);
  }

  /**
   * Leaves the cluster (after the edge's sessions got GOAWAY): waits for their holds to be written,
   * removes the heartbeat. Redis being down does not stop the edge from stopping.
   */
  async stop(): Promise<void> {
    this.detach();
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
    this.detach();
  }

  // ---- the edge's registry ----------------------------------------------------------------------------

  session(subdomain: string): TunnelSession | undefined {
    return this.valid(subdomain) ? this.local.session(subdomain) : undefined;
  }

  /** Cluster mode serves http tunnels only (no `--tcp-ports`, no passthrough): the same as `session`. */
  tunnel(name: string): TunnelSession | undefined {
    return this.session(name);
  }

  holder(subdomain: string): TunnelSession | undefined {
    return this.valid(subdomain) ? this.local.holder(subdomain) : undefined;
  }

  serving(session: TunnelSession): boolean {
    return this.valid(session.subdomain) && this.local.serving(session);
  }

  /** Whether this edge may serve `subdomain` now: its lease here is valid and the edge is not leaving. */
  private valid(subdomain: string): boolean {
    const lease = this.held.get(subdomain);
    return lease !== undefined && !this.leaving && lease.validUntil > this.clock();
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
    if (details.pool === true) this.checkPoolJoin(requested, details);
    let fromFence: number | undefined;
    for (let attempt = 0; attempt < TAKEOVER_ATTEMPTS; attempt++) {
      const started = this.clock();
      const result = await this.leases.claim(this.claimOf(requested, accountId, tunnelCap, details, fromFence), this.timings.leaseTtlMs);
      if (result.granted) return this.granted(requested, accountId, tunnelCap, details, result, started);
      this.refuse(requested, tunnelCap, result, details);
      if (result.reason !== 'takeover') break;
      // The same account holds the name live on other edges (another client replaced, or a client naming
      // no instance): each of them ends its session first (or is shown to be gone), then the name moves
      // from exactly the attachments they held (none made since: they would have larger fences).
      const outcomes = await Promise.all(result.holders.map(async (holder) => {
        const gone = holder.nodeId === this.self.nodeId || (await this.isGone(holder.nodeId, holder.boot));
        const outcome = gone ? 'not-held' : this.peerLink === null ? 'unreachable' : await this.peerLink.release({ ...holder }, requested, holder.fence);
        return { holder, outcome };
      }));
      const unreachable = outcomes.find(({ outcome }) => outcome === 'unreachable');
      if (unreachable !== undefined) {
        const seconds = Math.ceil(this.timings.leaseTtlMs / 1000);
        throw new BurrowError(
          'STORE_UNAVAILABLE',
          `The subdomain "${requested}" is held by this account's tunnel on edge ${unreachable.holder.nodeId}, which cannot be reached to hand it over; ` +
            `it is free at the latest ${seconds} s after that edge last renewed it. Retry after ${seconds} s.`,
          { 'Retry-After': String(seconds) },
        );
      }
      fromFence = result.fence;
    }
    throw new BurrowError('STORE_UNAVAILABLE', `The subdomain "${requested}" changed hands while it was being taken over; retry.`, { 'Retry-After': '1' });
  }

  /**
   * A pool member connecting here beside the pool's members on this edge (they share its attachment, so the
   * lease cannot tell them apart): the pool's size is checked here, and a second session of the same client
   * process is refused ALREADY_ATTACHED unless it replaces its earlier one (`drop` names this edge's attachment).
   */
  private checkPoolJoin(subdomain: string, details: AdmitDetails): void {
    const holder = this.local.holder(subdomain);
    if (holder === undefined || !holder.pooled) return;
    const members = holder.pool?.members ?? [holder];
    const own = details.instance !== null && members.some((member) => member.instance === details.instance);
    if (own) {
      const fence = this.held.get(subdomain)?.fence;
      if (fence !== undefined && !(details.drop ?? []).includes(fence)) this.refuse(subdomain, 0, { granted: false, reason: 'attached', fence }, details);
      return;
    }
    if (members.length >= MAX_POOL_MEMBERS) {
      throw new BurrowError('TUNNEL_LIMIT_REACHED', `The pool on "${subdomain}" has ${members.length} members on edge ${this.self.nodeId}, the most one pool takes on one edge.`);
    }
  }

  private async admitFresh(accountId: string, tunnelCap: number, details: AdmitDetails): Promise<string> {
    for (;;) {
      const name = generateSubdomain();
      if ((await this.options.accounts.getReservation(name)) !== undefined) continue;
      const started = this.clock();
      const result = await this.leases.claim(this.claimOf(name, accountId, tunnelCap, details, undefined), this.timings.leaseTtlMs);
      if (result.granted) return this.granted(name, accountId, tunnelCap, details, result, started);
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
      policy: details.policy === undefined ? '' : JSON.stringify(details.policy),
      ...(details.drop === undefined || details.drop.length === 0 ? {} : { drop: details.drop }),
      ...(details.pool === true ? { pool: true } : {}),
    };
  }

  /** Throws the refusal a claim result means ('takeover' is the caller's to handle). */
  private refuse(subdomain: string, tunnelCap: number, result: Exclude<ClaimResult, { granted: true }>, details: AdmitDetails): void {
    if (result.reason === 'attached') {
      throw new BurrowError(
        'ALREADY_ATTACHED',
        `This client already has a session for "${subdomain}" on edge ${this.self.nodeId}; its next session must go to another edge of the cluster.`,
      );
    }
    if (result.reason === 'taken') {
      throw new BurrowError('SUBDOMAIN_TAKEN', `The subdomain "${subdomain}" is in use by another account.`);
    }
    if (result.reason === 'online') {
      const { holder } = result;
      const online = { ...holder, instance: holder.instance === '' ? null : holder.instance, nodeId: holder.nodeId === this.self.nodeId ? undefined : holder.nodeId, pooled: holder.pool };
      throw takeoverRefusal(subdomain, online, details) ?? new BurrowError('SUBDOMAIN_TAKEN', `The subdomain "${subdomain}" is online in another tunnel of this account.`);
    }
    if (result.reason === 'cap') {
      throw new BurrowError(
        'TUNNEL_LIMIT_REACHED',
        `The plan allows ${tunnelCap} active tunnels and ${result.active} are open. Close a tunnel or upgrade.`,
      );
    }
  }

  private granted(subdomain: string, accountId: string, cap: number, details: AdmitDetails, result: Extract<ClaimResult, { granted: true }>, started: number): string {
    const now = this.clock();
    const { fence, ownerFence } = result;
    const validUntil = started + this.timings.leaseTtlMs - this.timings.marginMs;
    // A reconnect to this same edge: the live session it replaces goes on under the new grant until then.
    const live = this.held.get(subdomain);
    if (live !== undefined && live.accountId === accountId) {
      live.fence = fence;
      live.ownerFence = ownerFence;
      live.validUntil = validUntil;
    }
    // The client's sessions it replaced on other edges (it said so: `drop`): they end them now, not at
    // their next renewal. Nothing waits for it: they no longer hold the name in Redis.
    for (const dropped of result.dropped) {
      this.owners.released(subdomain, dropped.nodeId, dropped.fence);
      if (dropped.nodeId !== this.self.nodeId) void this.peerLink?.release({ ...dropped }, subdomain, dropped.fence);
    }
    // A pool member's reconnect: its old member on another edge goes, that edge's other members stay.
    if (details.instance !== null) for (const stale of result.leave ?? []) void this.peerLink?.release({ ...stale }, subdomain, stale.fence, details.instance);
    const lease: LocalLease = {
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
      ownerFence,
      validUntil,
      grantedAt: now,
      policy: details.policy === undefined ? '' : JSON.stringify(details.policy),
      pool: details.pool === true,
    };
    this.pending.set(subdomain, lease);
    this.learnOwn(lease);
    return subdomain;
  }

  abandon(subdomain: string, accountId: string): void {
    const lease = this.pending.get(subdomain);
    if (lease === undefined || lease.accountId !== accountId) return;
    this.pending.delete(subdomain);
    // A live local session of the same account keeps the name under the new grant (a replacement that never happened).
    if (this.held.get(subdomain)?.fence === lease.fence) return;
    this.track(this.leases.drop(subdomain, accountId, lease.fence, this.self.nodeId));
    this.owners.released(subdomain, this.self.nodeId, lease.fence);
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
      session.end(GoAwayCode.REPLACED, 'another connection of this account took over the subdomain');
      return;
    }
    this.pending.delete(subdomain);
    this.held.set(subdomain, grant);
    this.local.add(session);
  }

  remove(session: TunnelSession): void {
    if (!this.local.serving(session)) return;
    this.local.remove(session);
    // A pool's other members here still serve the name on this edge's attachment.
    if (this.local.holder(session.subdomain) !== undefined) return;
    const lease = this.held.get(session.subdomain);
    if (lease === undefined) return;
    this.held.delete(session.subdomain);
    // A new connect of the same name on this edge is waiting for its upgrade: it keeps the lease.
    if (this.pending.has(session.subdomain)) return;
    this.track(this.leases.hold(lease.subdomain, lease.accountId, lease.fence, this.self.nodeId, this.options.graceMs));
    this.owners.released(lease.subdomain, this.self.nodeId, lease.fence);
  }

  sweep(): void {
    const cutoff = this.clock() - PENDING_LIMIT_MS;
    for (const lease of [...this.pending.values()]) if (lease.grantedAt < cutoff) this.abandon(lease.subdomain, lease.accountId);
    this.owners.sweep(this.inStepFor());
  }

  // ---- renewals ---------------------------------------------------------------------------------------

  /** One renewal round (also the heartbeat); rounds never overlap, one asked for meanwhile runs right after. */
  renew(): Promise<void> {
    if (this.renewing !== null) {
      this.renewAgain = true;
      return this.renewing;
    }
    this.renewing = this.renewRound().finally(() => {
      this.renewing = null;
      if (this.renewAgain && !this.stopped) {
        this.renewAgain = false;
        void this.renew();
      }
    });
    return this.renewing;
  }

  private async renewRound(): Promise<void> {
    const batch = [...this.held.values(), ...this.pending.values()].map((lease) => ({ lease, subdomain: lease.subdomain, fence: lease.fence, accountId: lease.accountId, instance: lease.instance ?? '' }));
    const started = this.clock();
    let outcomes;
    try {
      outcomes = await this.leases.renew(this.self, batch, this.timings.leaseTtlMs, this.timings.heartbeatTtlMs);
    } catch (error) {
      this.storeLost((error as Error).message);
      void this.checkLapses();
      return;
    }
    this.storeBack();
    if (this.inStepSince < 0) void this.syncOwners();
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

  /** Whether this edge reaches the cluster's store now (the last renewal round), since when, and why not. */
  get storeStatus(): Readonly<StoreStatus> {
    return this.status;
  }

  private storeLost(reason: string): void {
    if (!this.status.available || this.stopped) return;
    this.status = { available: false, since: Date.now(), reason };
    // The subscribed connection may hang without closing (a lost network): pushed changes cannot be trusted
    // to arrive; the map is loaded again once a renewal round reaches Redis.
    this.inStepSince = -1;
    this.options.log(`cluster: the shared store is unavailable, tunnels stay served while their leases are valid: ${reason}`);
    this.emit('store-status', this.status);
    this.scheduleLapseCheck();
  }

  private storeBack(): void {
    if (this.status.available) return;
    this.status = { available: true, since: Date.now(), reason: '' };
    if (this.lapseTimer !== null) clearTimeout(this.lapseTimer);
    this.lapseTimer = null;
    this.options.log('cluster: the shared store is reachable again');
    this.emit('store-status', this.status);
  }

  // ---- leases that lapse while the store is away ------------------------------------------------------

  /**
   * True when this edge has a live session on `subdomain` whose lease it cannot vouch for any more (its
   * validity ended without a renewal: the store is unreachable): the public request is answered 503
   * STORE_UNAVAILABLE, not 404, since the tunnel is still there and comes back with the store.
   */
  lapsed(subdomain: string): boolean {
    const lease = this.held.get(subdomain);
    return lease !== undefined && !this.leaving && lease.validUntil <= this.clock() && this.local.holder(subdomain) !== undefined;
  }

  /** Checks again when the next lease's validity ends (while the store is away). */
  private scheduleLapseCheck(): void {
    if (this.lapseTimer !== null || this.stopped) return;
    let next = Number.POSITIVE_INFINITY;
    for (const lease of this.held.values()) next = Math.min(next, lease.validUntil);
    if (next === Number.POSITIVE_INFINITY) return;
    this.lapseTimer = setTimeout(() => {
      this.lapseTimer = null;
      void this.checkLapses();
    }, Math.max(0, next - this.clock()) + 1);
    this.lapseTimer.unref();
  }

  /**
   * While the store is away: sessions whose lease lapsed get GOAWAY STORE_UNREACHABLE when this edge is
   * the one cut off (see `cutOff`), so their clients reconnect through an edge that can serve them.
   */
  private async checkLapses(): Promise<void> {
    if (this.status.available || this.stopped || this.leaving) return;
    const now = this.clock();
    const lapsed = [...this.held.values()].filter((lease) => lease.validUntil <= now && this.local.holder(lease.subdomain) !== undefined);
    if (lapsed.length === 0) {
      this.scheduleLapseCheck();
      return;
    }
    if (!(await this.cutOff())) return;
    for (const lease of lapsed) {
      // Renewed meanwhile, or gone another way.
      if (this.held.get(lease.subdomain) !== lease || lease.validUntil > this.clock() || this.status.available) continue;
      this.held.delete(lease.subdomain);
      this.owners.released(lease.subdomain, this.self.nodeId, lease.fence);
      // Its lease stays in Redis until it expires: a reconnect through another edge takes the name over
      // (this edge answers the release call 'not-held'), and no other account can have it before.
      this.local.evict(lease.subdomain, GoAwayCode.STORE_UNREACHABLE, 'this edge lost the cluster store; reconnect through another edge of the cluster');
      this.options.log(`cluster: ${lease.subdomain} told to reconnect through another edge (its lease lapsed; the other edges reach the store)`);
    }
    this.scheduleLapseCheck();
  }

  /**
   * Whether this edge alone lost the store: asks the edges that renewed lately, over the hop. True when
   * one of them reaches the store, or when none answers (cut off from them too); false when they say
   * the store is down for them as well, or when this edge knows no other.
   */
  private async cutOff(): Promise<boolean> {
    const link = this.peerLink;
    const peers = this.owners.peers(this.self.nodeId);
    if (link === null || peers.length === 0) return false;
    const answers = await Promise.all(peers.map((peer) => link.storeAvailable(peer)));
    return answers.includes(true) || answers.every((answer) => answer === null);
  }

  /** LocalTunnels: whether this edge reaches the store (another edge asks when it lost it). */
  storeAvailable(): boolean {
    return this.status.available;
  }

  // ---- the owner map ----------------------------------------------------------------------------------

  /** How long the owner map has been in step with Redis (subscribed and loaded), -1 while it is not. */
  private inStepFor(): number {
    return this.inStepSince < 0 ? -1 : this.clock() - this.inStepSince;
  }

  /**
   * Loads every live lease into the owner map once the commands channel is subscribed (again): the
   * pushed changes keep it current from then on. Runs after each resubscription; a failure leaves the
   * map out of step until the next renewal round that reaches Redis tries again.
   */
  private syncOwners(): Promise<void> {
    this.syncing ??= (async () => {
      this.inStepSince = -1;
      try {
        // Answered once the subscription is active: nothing pushed from here on is missed. A subscribed
        // connection that does not answer (hung on a lost network without closing) is made anew.
        const subscriber = this.options.subscriber;
        const subscribed = await Promise.race([
          subscriber.subscribe(this.leases.channel).then(() => true, () => false),
          new Promise<false>((resolve) => setTimeout(resolve, SUBSCRIBE_TIMEOUT_MS, false).unref()),
        ]);
        if (!subscribed) {
          if (!this.stopped && subscriber.status === 'ready') subscriber.disconnect(true);
          return;
        }
        const snapshot = await this.leases.snapshot();
        for (const record of snapshot.leases) for (const attachment of record.attachments) this.owners.granted(record, attachment, attachment.expiresAt - snapshot.redisNow);
        if (this.options.subscriber.status === 'ready') this.inStepSince = this.clock();
        // Changes pushed while out of step were missed: policies are read again.
        this.emit('owner-changed', null);
      } catch {
        // Out of step until a renewal round reaches Redis again.
      }
    })().finally(() => {
      this.syncing = null;
    });
    return this.syncing;
  }

  /** This edge's own grant, known at once (its pushed copy comes back a moment later). */
  private learnOwn(lease: LocalLease): void {
    this.owners.granted(
      {
        subdomain: lease.subdomain,
        accountId: lease.accountId,
        tokenId: lease.tokenId,
        port: lease.port,
        startedAt: lease.startedAt,
        publicUrl: lease.publicUrl,
        instance: lease.instance ?? '',
        clientAddress: lease.clientAddress,
        policy: lease.policy,
        pool: lease.pool,
        fence: lease.ownerFence,
        state: 'live',
        expiresAt: 0,
      },
      { ...this.self, fence: lease.fence },
      this.timings.leaseTtlMs,
    );
  }

  private isCurrent(lease: LocalLease): boolean {
    return this.held.get(lease.subdomain) === lease || this.pending.get(lease.subdomain) === lease;
  }

  /** A lease expired while Redis was away: the session gets its name again if nobody else took it. */
  private async reclaim(lease: LocalLease): Promise<void> {
    const started = this.clock();
    let result: ClaimResult;
    try {
      // Its own attachment is kept, or made again, for the same client; another client's is the same refusal as at connect.
      result = await this.leases.claim(
        {
          ...this.claimOf(
            lease.subdomain,
            lease.accountId,
            lease.cap,
            { tokenId: lease.tokenId, port: lease.port, instance: lease.instance, clientAddress: lease.clientAddress, replace: false, pool: lease.pool, ...storedPolicyOf(lease.policy) },
            undefined,
          ),
          rejoin: true,
        },
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
      lease.ownerFence = result.ownerFence;
      lease.validUntil = started + this.timings.leaseTtlMs - this.timings.marginMs;
      this.learnOwn(lease);
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
  release(subdomain: string, fence: number, instance?: string): 'released' | 'not-held' {
    if (instance !== undefined) return this.releaseMember(subdomain, fence, instance);
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

  /**
   * A pool member reconnected through another edge naming its session here in `drop`: that client's
   * member(s) leave this edge's pool (GOAWAY REPLACED); the attachment stays while other members serve.
   */
  private releaseMember(subdomain: string, fence: number, instance: string): 'released' | 'not-held' {
    const holder = this.held.get(subdomain)?.fence === fence ? this.local.holder(subdomain) : undefined;
    const own = (holder?.pool?.members ?? (holder === undefined ? [] : [holder])).filter((member) => member.instance === instance);
    for (const member of own) {
      this.remove(member);
      member.end(GoAwayCode.REPLACED, 'this client reconnected through another edge; its new connection took its place in the pool');
    }
    return own.length > 0 ? 'released' : 'not-held';
  }

  private onCommand(command: ClusterCommand): void {
    switch (command.type) {
      case 'granted':
        this.owners.granted(command.lease, command.attachment, command.ttlMs);
        this.emit('owner-changed', command.lease.subdomain);
        return;
      case 'released':
        this.owners.released(command.subdomain, command.nodeId, command.fence);
        this.emit('owner-changed', command.subdomain);
        return;
      case 'policy':
        this.emit('policy-changed', command.subdomain);
        return;
      case 'renewed':
        this.owners.renewed(command, command.ttlMs);
        return;
      case 'close': {
        const lease = this.held.get(command.subdomain);
        if (lease !== undefined && lease.ownerFence === command.fence) this.closeLocal(lease, command.reason);
        return;
      }
      case 'queued':
      case 'drained':
        this.emit(command.type, command.subdomain);
        return;
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
    this.owners.released(lease.subdomain, this.self.nodeId, lease.fence);
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

  /**
   * The edge holding `subdomain` now, from the owner map (no Redis read on the way of a public request):
   * the last-known owner while Redis is away, whatever its validity (that edge decides); null when no
   * edge holds it. Rejects with 503 STORE_UNAVAILABLE when this edge cannot know (Redis away and the
   * name unknown or released), or when it is the owner itself with a lapsed lease (`lapsed`).
   */
  async ownerOf(subdomain: string): Promise<TunnelLease | null> {
    if (this.lapsed(subdomain)) throw storeUnavailable(new Error(`the lease of ${subdomain} on this edge lapsed while the store was away`));
    if (this.inStepSince >= 0 && this.owners.needsCheck(subdomain)) await this.recheck(subdomain);
    let owner = this.owners.lookup(subdomain, this.inStepFor(), this.self.nodeId);
    if (owner === null && this.inStepSince >= 0 && this.mayAskAboutMiss(subdomain)) {
      // No owner known: a grant made a moment ago on another edge may still be on its way here (pub/sub
      // is not part of the claim's reply). Redis is asked, at most once a second per name.
      await this.recheck(subdomain);
      owner = this.owners.lookup(subdomain, this.inStepFor(), this.self.nodeId);
    }
    if (owner === undefined) throw storeUnavailable();
    return owner;
  }

  /** Names asked of Redis because the map had no owner for them: when (monotonic ms); bounded. */
  private readonly missesAsked = new Map<string, number>();

  private mayAskAboutMiss(subdomain: string): boolean {
    const now = performance.now();
    const asked = this.missesAsked.get(subdomain);
    if (asked !== undefined && now - asked < MISS_RECHECK_MS) return false;
    // Scans of random names must not grow this without bound: forgetting only costs an extra read.
    if (this.missesAsked.size >= MAX_MISSES_REMEMBERED) this.missesAsked.clear();
    this.missesAsked.set(subdomain, now);
    return true;
  }

  /** A doubted owner, asked of Redis (at most once a second per name); Redis away: the map stays as it is. */
  private async recheck(subdomain: string): Promise<void> {
    let record: LeaseRecord | null;
    let redisNow: number;
    // What the map learns while the read is on its way (a grant here, a pushed message) is newer than the answer.
    const readFrom = this.owners.factCount;
    try {
      [record, redisNow] = await Promise.all([this.leases.owner(subdomain), this.leases.now()]);
    } catch {
      return;
    }
    this.owners.checked(
      subdomain,
      record === null || record.state !== 'live' || record.attachments.length === 0
        ? null
        : { owner: record, attachments: record.attachments.map((attachment) => ({ attachment, remainingMs: attachment.expiresAt - redisNow })) },
      readFrom,
    );
  }

  /** The hop could not connect to `nodeId`: the next lookups prefer the tunnel's other edges. */
  unreachable(nodeId: string): void {
    this.owners.suspect(nodeId);
  }

  /** The owner the map names was wrong (it said "not mine", or could not be reached): Redis is asked on next use. */
  forget(subdomain: string): void {
    this.owners.doubt(subdomain);
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
    if (local !== undefined) this.closeLocal(local, reason);
    // Every other edge its client is attached to ends its session too.
    const record = await this.leases.owner(subdomain);
    if (record === null || record.state !== 'live' || record.attachments.length === 0) return local !== undefined;
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
    // A replay of a held webhook's delivery is a new request: without the event's id, which the client
    // takes for a repeated delivery (src/client/delivered-events.ts).
    const headers = capture.requestHeaders;
    for (let i = 0; i < headers.length; i += 2) {
      if (headers[i]!.toLowerCase() !== 'burrow-event-id') continue;
      const kept = headers.filter((_, j) => Math.floor(j / 2) !== i / 2);
      return this.local.replay({ ...capture, requestHeaders: kept }, overrides);
    }
    return this.local.replay(capture, overrides);
  }

  /** Tells every edge (this one too) that `subdomain`'s stored policy changed: each compiles it again. */
  announcePolicyChange(subdomain: string): Promise<void> {
    return this.leases.publish({ type: 'policy', subdomain });
  }

  /** READY's cluster settings for a session just added (docs/protocol.md section 4), or null when it holds no lease here. */
  readySettings(subdomain: string | null): Pick<Settings, 'clusterEdges' | 'attachment'> | null {
    const clusterEdges = this.owners.peers(this.self.nodeId).length + 1;
    // A connect that names no tunnel (`burrow start`) learns it is in a cluster, with nothing to drop later.
    if (subdomain === null) return { clusterEdges };
    const lease = this.held.get(subdomain);
    if (lease === undefined) return null;
    return { clusterEdges, attachment: lease.fence };
  }

  /**
   * A BIND names no attachment to drop (a client binds each tunnel of its connection on one edge only):
   * when this edge holds the name for the same client process (its `instance`), the BIND is that client's
   * new connection replacing its old one here, which the claim drops as a connect's `drop` would.
   */
  ownAttachment(subdomain: string, accountId: string, instance: string | null): number[] {
    const lease = this.held.get(subdomain);
    return instance !== null && lease !== undefined && lease.accountId === accountId && lease.instance === instance ? [lease.fence] : [];
  }

  /** The fence of this edge's lease on `subdomain` (tests, diagnostics), or undefined. */
  fenceOf(subdomain: string): number | undefined {
    return this.held.get(subdomain)?.fence;
  }
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
