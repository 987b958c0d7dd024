/**
 * One tunnel attached to several edges of a cluster (docs/cluster.md, "Clients on several edges").
 *
 * It starts as one session (a TunnelClient). When the edge's READY says it is part of a cluster of two
 * or more edges (`clusterEdges`), it opens more sessions for the same subdomain, up to `edges` (2 by
 * default): each a TunnelClient of its own with the same client instance id, so the cluster attaches
 * them side by side (each edge serves the tunnel without the internal hop) instead of taking the name
 * from one another. A session that lands on an edge this client is attached to already is refused with
 * ALREADY_ATTACHED and tries another edge (a front proxy's next pick, or the next `--edge`), quietly.
 * The sessions share one local hop: local connections are pooled once, whichever edge a request came in.
 *
 * What the user sees is one tunnel: 'ready' once, then a session's READY only when it had lost its edge
 * (a reconnect, a failover), 'reconnecting' only when no session is connected, 'closed' once (a final
 * GOAWAY or refusal on any session ends them all: the tunnel was replaced, closed or its token revoked),
 * 'store' on a change of the whole (unavailable as soon as one edge says so, available once every edge
 * says so), and 'edges' when the number of edges serving it changes.
 *
 * `burrow start` uses the same sessions as connections of bound tunnels (`bindOnly`): each one binds the
 * whole set (`onSession`), and each tunnel of the set is a MultiEdgeBoundTunnel over its BoundTunnels on
 * the connections.
 */
import { EventEmitter } from 'node:events';
import { DeliveredEvents } from './delivered-events.js';
import { LocalHop } from './local-hop/pool.js';
import type { Exchange } from './exchange.js';
import type { RouteTable } from './routes.js';
import type { Tunnel, TunnelEvents } from './tunnel.js';
import type { BoundReadyInfo, BoundTunnel, BoundTunnelEvents, BoundTunnelOptions, TunnelView } from './bound-tunnel.js';
import type { RawConnectionEnd } from './raw-stream.js';
import { TunnelClient, TunnelRefusedError, type ClosedInfo, type ReadyInfo, type StoreNotice, type TunnelClientOptions } from './tunnel-client.js';

export const DEFAULT_EDGES_PER_TUNNEL = 2;
/** The most sessions one tunnel keeps (a tunnel on every edge of a large cluster would cost every edge a session). */
export const MAX_EDGES_PER_TUNNEL = 8;

export interface MultiEdgeOptions extends TunnelClientOptions {
  /** How many edges to attach the tunnel to when the edge reports a cluster: `--edges K` (2 by default; 1 keeps one session). */
  edgesPerTunnel?: number;
  /**
   * Called with each session as it is made, before it connects: a connection of bound tunnels
   * (`bindOnly`, `burrow start`) binds its set on it, so every edge's connection carries them all.
   */
  onSession?: (session: TunnelClient, index: number) => void;
}

export class MultiEdgeTunnel extends EventEmitter<TunnelEvents> implements Tunnel {
  readonly routes: RouteTable;
  private readonly sessions: TunnelClient[] = [];
  private readonly localHop: LocalHop;
  /** Held webhooks delivered through any of the sessions: a repeat sent by another edge is answered from here. */
  private readonly delivered = new DeliveredEvents();
  private readonly wanted: number;
  private readonly instance: string;
  /** Sessions whose edge says its store is unavailable. */
  private readonly storeDown = new Set<TunnelClient>();
  private servedBy = 0;
  private closedInfo: ClosedInfo | null = null;
  private subdomain: string | undefined;

  private readonly relayExchange = (exchange: Exchange): void => void this.emit('exchange', exchange);
  private readonly relayWebSocket = (exchange: Exchange): void => void this.emit('websocket', exchange);

  constructor(private readonly options: MultiEdgeOptions) {
    super();
    // The sessions relay exchanges only while this tunnel has listeners for them.
    const relays = { exchange: this.relayExchange, websocket: this.relayWebSocket } as const;
    const emitter = this as unknown as EventEmitter;
    emitter.on('newListener', (event: string) => {
      if ((event === 'exchange' || event === 'websocket') && this.listenerCount(event) === 0) for (const session of this.sessions) session.on(event, relays[event]);
    });
    emitter.on('removeListener', (event: string) => {
      if ((event === 'exchange' || event === 'websocket') && this.listenerCount(event) === 0) for (const session of this.sessions) session.off(event, relays[event]);
    });
    this.routes = options.routes;
    this.wanted = Math.max(1, Math.min(MAX_EDGES_PER_TUNNEL, options.edgesPerTunnel ?? DEFAULT_EDGES_PER_TUNNEL));
    this.localHop = new LocalHop(options.routes.targets(), {
      insecure: options.localInsecure ?? false,
      ...(options.connectionsPerPort === undefined ? {} : { connectionsPerTarget: options.connectionsPerPort }),
    });
    const primary = this.session(0, options);
    this.instance = primary.instance;
    this.subdomain = options.subdomain;
  }

  /** Connects the first session; resolves on its READY (the others follow in the background). */
  async start(): Promise<ReadyInfo> {
    try {
      const ready = await this.sessions[0]!.start();
      this.onReady(ready, true);
      return ready;
    } catch (error) {
      this.localHop.close();
      throw error;
    }
  }

  close(reason = 'client closing'): Promise<void> {
    return this.endByUser(reason, (session) => session.close(reason));
  }

  /**
   * Leaves without failing a request (a pool member's Ctrl-C, TunnelClient.leave): each session tells its
   * edge, which sends nothing new and closes once its streams are answered. Pools are one edge's (they are
   * refused in cluster mode), so this is one session in practice.
   */
  leave(reason = 'client closing'): Promise<void> {
    return this.endByUser(reason, (session) => session.leave(reason));
  }

  private async endByUser(reason: string, end: (session: TunnelClient) => Promise<void>): Promise<void> {
    if (this.closedInfo !== null) return;
    this.closedInfo = { reason, code: 'CLIENT_CLOSING', byUser: true };
    await Promise.all(this.sessions.map(end));
    this.localHop.close();
    this.emit('closed', this.closedInfo);
  }

  get publicUrl(): string | null {
    for (const session of this.sessions) if (session.publicUrl !== null) return session.publicUrl;
    return null;
  }

  get connected(): boolean {
    return this.sessions.some((session) => session.connected);
  }

  /** The edge in use: the first connected session's, else the first session's. */
  get edge(): string {
    return (this.sessions.find((session) => session.connected) ?? this.sessions[0]!).edge;
  }

  /** How many edges serve the tunnel now. */
  get edgeCount(): number {
    return this.sessions.filter((session) => session.connected).length;
  }

  get activeStreams(): number {
    return activeStreamsOf(this.sessions);
  }

  get stats(): TunnelClient['stats'] {
    return statsOf(this.sessions);
  }

  get recordLimit(): number {
    return this.sessions[0]!.recordLimit;
  }

  set recordLimit(limit: number) {
    for (const session of this.sessions) session.recordLimit = limit;
  }

  // ---- sessions -------------------------------------------------------------------------------------

  private session(index: number, options: TunnelClientOptions): TunnelClient {
    const session = new TunnelClient({ ...options, localHop: this.localHop, deliveredEvents: this.delivered, ...(index === 0 ? {} : { instance: this.instance }) });
    this.sessions.push(session);
    this.options.onSession?.(session, index);
    // Only while someone listens: a session builds no exchange records nobody reads (its `observed`).
    if (this.listenerCount('exchange') > 0) session.on('exchange', this.relayExchange);
    if (this.listenerCount('websocket') > 0) session.on('websocket', this.relayWebSocket);
    session.on('ready', (info) => this.onReady(info, false));
    session.on('reconnecting', (info) => {
      this.countEdges();
      // Another edge of the cluster has this tunnel already: not news. Nor is a session's loss while another serves.
      if (info.refusal === 'ALREADY_ATTACHED' || this.connected) return;
      this.emit('reconnecting', info);
    });
    session.on('store', (notice) => this.onStore(session, notice));
    session.on('notice', (notice) => this.emit('notice', notice));
    session.on('closed', (info) => this.onClosed(session, info));
    return session;
  }

  /** The first session never came up (start() rejected): every tunnel bound on the sessions ends with why. */
  endTunnels(info: ClosedInfo): void {
    for (const session of this.sessions) session.endTunnels(info);
  }

  private onReady(info: ReadyInfo, first: boolean): void {
    // A connection of bound tunnels names none itself ('').
    if (info.subdomain !== '') this.subdomain = info.subdomain;
    this.countEdges();
    // The primary's first READY is start()'s to report; a second session's first one is only more edges.
    if (first || info.reconnected) this.emit('ready', info);
    this.attachMore(info);
  }

  /** Opens sessions on more edges while the cluster has them and the tunnel has fewer than wanted. */
  private attachMore(info: ReadyInfo): void {
    if (this.closedInfo !== null) return;
    const cluster = info.settings.clusterEdges ?? 0;
    const target = Math.min(this.wanted, cluster);
    while (this.sessions.length < target) {
      const session = this.session(this.sessions.length, {
        ...this.options,
        ...(this.subdomain === undefined ? {} : { subdomain: this.subdomain }),
        // Only the first session takes a name over; the others join it.
        replace: false,
        // The edges after the first session's, in the `--edge` list: tunnels started at different edges
        // (a list given directly, no front proxy) spread their other sessions too.
        firstEdge: (this.sessions[0]?.edgePosition ?? 0) + this.sessions.length,
        keepTrying: true,
      });
      session.start().catch(() => undefined);
    }
  }

  private countEdges(): void {
    const count = this.edgeCount;
    if (count === this.servedBy) return;
    this.servedBy = count;
    if (this.closedInfo === null) this.emit('edges', { count });
  }

  private onStore(session: TunnelClient, notice: StoreNotice): void {
    const before = this.storeDown.size;
    if (notice.available) this.storeDown.delete(session);
    else this.storeDown.add(session);
    if ((before === 0) !== (this.storeDown.size === 0)) this.emit('store', notice);
  }

  private onClosed(session: TunnelClient, info: ClosedInfo): void {
    if (info.byUser || this.closedInfo !== null) return;
    // A final answer to any session is the tunnel's: replaced by another client, closed, token revoked.
    this.closedInfo = info;
    for (const other of this.sessions) if (other !== session) void other.close(info.reason);
    this.localHop.close();
    this.emit('closed', info);
  }
}

/**
 * One tunnel of a `burrow start` set bound on every connection of a MultiEdgeTunnel (one connection per
 * edge): what the user sees of it, as MultiEdgeTunnel is for `burrow http`. `ready` once (the first
 * connection's BOUND), then only when it comes back after no connection had it; `reconnecting` only when
 * no connection has it; `closed` once (a final answer on any connection ends it on all). The first
 * connection's BIND may make the name up: the others wait for it and ask for the same one. Held webhooks
 * delivered through any edge are answered again from one memory.
 */
export class MultiEdgeBoundTunnel extends EventEmitter<BoundTunnelEvents> implements TunnelView {
  readonly routes: RouteTable;
  private readonly members: BoundTunnel[] = [];
  private readonly delivered = new DeliveredEvents();
  private name: string | undefined;
  private closedInfo: BoundTunnelEvents['closed'][0] | null = null;
  /** The connections it is bound on: told to bind it once its name is known. */
  private readonly sessions = new Set<TunnelClient>();
  private readonly relays = {
    exchange: (exchange: Exchange): void => void this.emit('exchange', exchange),
    websocket: (exchange: Exchange): void => void this.emit('websocket', exchange),
    connection: (end: RawConnectionEnd): void => void this.emit('connection', end),
  } as const;
  /** Resolves on the first BOUND of any connection, or rejects with the first connection's refusal. */
  readonly started: Promise<ReadyInfo>;
  private settle: { resolve: (info: ReadyInfo) => void; reject: (error: Error) => void } | null = null;

  constructor(
    private readonly options: BoundTunnelOptions,
    private readonly bindOn: (session: TunnelClient, options: BoundTunnelOptions) => BoundTunnel,
  ) {
    super();
    this.routes = options.routes;
    this.name = options.subdomain;
    this.started = new Promise<ReadyInfo>((resolve, reject) => (this.settle = { resolve, reject }));
    this.started.catch(() => undefined);
    // The members relay requests only while someone listens (a member records none nobody reads).
    const emitter = this as unknown as EventEmitter;
    emitter.on('newListener', (event: string) => {
      if (event in this.relays && this.listenerCount(event as keyof typeof this.relays) === 0) {
        for (const member of this.members) member.on(event as 'exchange', this.relays[event as 'exchange']);
      }
    });
    emitter.on('removeListener', (event: string) => {
      if (event in this.relays && this.listenerCount(event as keyof typeof this.relays) === 0) {
        for (const member of this.members) member.off(event as 'exchange', this.relays[event as 'exchange']);
      }
    });
  }

  /** Binds the tunnel on one more connection (MultiEdgeOptions.onSession). */
  bindOnSession(session: TunnelClient): void {
    if (this.closedInfo !== null) return;
    const first = this.members.length === 0;
    const member = this.bindOn(session, {
      ...this.options,
      ...(this.name === undefined ? {} : { subdomain: this.name }),
      // Only the first connection takes a name over or makes one up; the others join it.
      ...(first ? {} : { replace: false, waitForName: true }),
      deliveredEvents: this.delivered,
    });
    this.members.push(member);
    for (const event of ['exchange', 'websocket', 'connection'] as const) if (this.listenerCount(event) > 0) member.on(event, this.relays[event] as never);
    this.sessions.add(session);
    member.on('ready', (info) => this.onReady(member, info));
    member.on('reconnecting', (info) => {
      if (info.refusal === 'ALREADY_ATTACHED' || this.connected || this.closedInfo !== null) return;
      this.emit('reconnecting', info);
    });
    member.on('closed', (info) => this.onClosed(member, info, first));
  }

  private onReady(member: BoundTunnel, info: BoundReadyInfo): void {
    if (this.name === undefined) {
      this.name = info.subdomain;
      for (const other of this.members) {
        if (other === member || other.subdomain !== undefined) continue;
        other.subdomain = info.subdomain;
      }
      for (const waiting of this.sessions) waiting.bindWaiting();
    }
    if (this.settle !== null) {
      const { resolve } = this.settle;
      this.settle = null;
      resolve(info);
      return;
    }
    // Another connection's BOUND is news only when the tunnel had no connection a moment ago.
    if (!this.othersConnected(member)) this.emit('ready', { ...info, reconnected: true });
  }

  private othersConnected(member: BoundTunnel): boolean {
    return this.members.some((other) => other !== member && other.connected);
  }

  private onClosed(member: BoundTunnel, info: BoundTunnelEvents['closed'][0], first: boolean): void {
    if (this.closedInfo !== null) return;
    if (first && this.settle !== null) {
      const { reject } = this.settle;
      this.settle = null;
      this.closedInfo = info;
      for (const other of this.members) if (other !== member) other.finish(info);
      reject(new TunnelRefusedError(0, info.code, info.reason));
      this.emit('closed', info);
      return;
    }
    // Another connection refused before it ever had the tunnel: the tunnel goes on where it is.
    if (!member.everBound && !info.byUser) return;
    this.closedInfo = info;
    for (const other of this.members) if (other !== member) other.finish(info);
    this.emit('closed', info);
  }

  get connected(): boolean {
    return this.members.some((member) => member.connected);
  }

  get publicUrl(): string | null {
    for (const member of this.members) if (member.publicUrl !== null) return member.publicUrl;
    return null;
  }

  get edge(): string {
    return (this.members.find((member) => member.connected) ?? this.members[0])?.edge ?? '';
  }

  /** How many edges serve the tunnel now. */
  get edgeCount(): number {
    return this.members.filter((member) => member.connected).length;
  }

  get activeStreams(): number {
    return activeStreamsOf(this.members);
  }

  get stats(): BoundTunnel['stats'] {
    return statsOf(this.members);
  }
}

/** The streams open on all of one tunnel's sessions (or connections). */
function activeStreamsOf(parts: readonly Pick<TunnelView, 'activeStreams'>[]): number {
  let streams = 0;
  for (const part of parts) streams += part.activeStreams;
  return streams;
}

/** The counters of one tunnel's sessions (or connections), added up. */
function statsOf(parts: readonly Pick<TunnelView, 'stats'>[]): TunnelView['stats'] {
  const total = { requests: 0, errors: 0, bytesIn: 0, bytesOut: 0 };
  for (const { stats } of parts) {
    total.requests += stats.requests;
    total.errors += stats.errors;
    total.bytesIn += stats.bytesIn;
    total.bytesOut += stats.bytesOut;
  }
  return total;
}
