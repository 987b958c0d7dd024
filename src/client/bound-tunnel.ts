/**
 * One tunnel that a TunnelClient's connection carries beside others (`burrow start`, docs/protocol.md
 * section 18): asked for with BIND after READY, live from its BOUND, ended alone by UNBOUND. It has its
 * own name, routes, Host header, local pools, counters and events, the ones `burrow http`'s client has;
 * the connection (frames, credit, stream ids, reconnects) is the client's.
 */
import { EventEmitter } from 'node:events';
import type { PolicySpec } from '../protocol/policy.js';
import type { Settings } from '../protocol/constants.js';
import type { SendCredit } from '../protocol/flow.js';
import { DeliveredEvents } from './delivered-events.js';
import type { Exchange } from './exchange.js';
import type { HostHeader } from './host-header.js';
import { LocalHop, type TargetPool } from './local-hop/pool.js';
import type { LocalTarget, RouteTable } from './routes.js';
import type { FlushableStream, TurnEndStream } from './stream-host.js';
import type { RawConnectionEnd, RawStreamHost } from './raw-stream.js';

/** What one tunnel of a shared connection serves. */
export interface BoundTunnelOptions {
  /**
   * `http` (the default): requests as OPEN; `tcp` and `tls` (passthrough): connections as ACCEPT to the
   * routes' default target.
   */
  kind?: 'http' | 'tcp' | 'tls';
  /** A tcp tunnel's public port (reserved, or the last one it had); 0 or absent: the edge picks one. */
  remotePort?: number;
  /** A tcp tunnel writes a PROXY v2 header naming the public client before each connection's bytes. */
  proxyProtocol?: boolean;
  routes: RouteTable;
  hostHeader?: HostHeader;
  localInsecure?: boolean;
  /** The subdomain to ask for; the edge makes one up when absent (and the tunnel keeps it on reconnects). */
  subdomain?: string;
  /** Take the name over from the account's other live tunnel on it (first BIND only). */
  replace?: boolean;
  /** A one-run policy (docs/policies.md), sent in the BIND. */
  policy?: PolicySpec;
  /**
   * Bound only once it has a name (`subdomain`, set later by whoever learns it): the same tunnel on
   * another edge's connection must ask for the name its first connection was given.
   */
  waitForName?: boolean;
  /** Held webhooks delivered lately, shared by the same tunnel on several connections (src/client/multi-edge.ts). */
  deliveredEvents?: DeliveredEvents;
}

/** The counters and events a tunnel shows (`burrow http`'s TunnelClient and a BoundTunnel alike). */
export interface TunnelView {
  readonly connected: boolean;
  readonly publicUrl: string | null;
  readonly routes: RouteTable;
  readonly activeStreams: number;
  readonly stats: { requests: number; errors: number; bytesIn: number; bytesOut: number };
  /** The edge in use. */
  readonly edge: string;
}

/** A tunnel whose completed exchanges go to its 'exchange' listeners. */
export interface ExchangeOwner {
  deliverExchange(exchange: Exchange): void;
}

/** The connection's side, as a bound tunnel's streams reach it (TunnelClient). */
export interface TunnelLink {
  readonly settings: Settings;
  readonly connectionSend: SendCredit;
  readonly blocked: Set<FlushableStream>;
  readonly edge: string;
  readonly linkOpen: boolean;
  /** The edge reports a cluster (READY's clusterEdges): held webhooks may come again from another edge. */
  readonly inCluster: boolean;
  send(frame: Buffer): void;
  atTurnEnd(stream: TurnEndStream): void;
  /** Hands `exchange` to `owner`'s observers once this turn's frames are written. */
  recordAfterTurn(owner: ExchangeOwner, exchange: Exchange): void;
  consumedConnection(bytes: number): void;
  endStream(stream: FlushableStream): void;
  protocolError(message: string): void;
  /** Streams of this tunnel now open. */
  streamsOf(tunnel: BoundTunnel): number;
}

export interface BoundReadyInfo {
  subdomain: string;
  publicUrl: string;
  settings: Settings;
  reconnected: boolean;
  edge: string;
  movedFrom: { edge: string; cause: string } | null;
}

export interface BoundTunnelEvents {
  ready: [BoundReadyInfo];
  /** `refusal`: the connect's or BIND's error code when the edge refused (ALREADY_ATTACHED...), else absent or null. */
  reconnecting: [{ attempt: number; delayMs: number; reason: string; edge: string; refusal?: string | null }];
  closed: [{ reason: string; code: string; byUser: boolean }];
  exchange: [Exchange];
  websocket: [Exchange];
  /** A tcp tunnel's connection ended. */
  connection: [RawConnectionEnd];
}

export class BoundTunnel extends EventEmitter<BoundTunnelEvents> implements RawStreamHost, TunnelView {
  readonly routes: RouteTable;
  readonly hostHeader: HostHeader;
  recordLimit: number;
  readonly stats = { requests: 0, errors: 0, bytesIn: 0, bytesOut: 0 };
  /** The name asked for: the file's, else the one the edge gave on the first BOUND (kept across reconnects). */
  subdomain: string | undefined;
  publicUrlValue: string | null = null;
  everBound = false;
  stopped = false;
  /** Its lease attachment on the connection's edge (the last BOUND's; cluster mode): the next BIND's `drop`. */
  attachment = 0;
  /** A BIND of it is on this connection, unanswered: it is not sent again (the edge refuses a live id). */
  binding = false;
  private readonly localHop: LocalHop;
  /** Held webhooks this tunnel delivered lately, looked at while the edge reports a cluster (src/client/delivered-events.ts). */
  private delivered: DeliveredEvents | null = null;

  readonly kind: 'http' | 'tcp' | 'tls';
  /** A tcp tunnel's public port: asked for again on every BIND once the edge gave one. */
  remotePort: number;

  constructor(
    readonly id: number,
    private readonly link: TunnelLink,
    readonly options: BoundTunnelOptions,
    recordLimit: number,
    connectionsPerTarget: number | undefined,
  ) {
    super();
    this.routes = options.routes;
    this.hostHeader = options.hostHeader ?? 'keep';
    this.subdomain = options.subdomain;
    this.kind = options.kind ?? 'http';
    this.remotePort = options.remotePort ?? 0;
    this.recordLimit = recordLimit;
    this.localHop = new LocalHop(this.routes.targets(), {
      insecure: options.localInsecure ?? false,
      ...(connectionsPerTarget === undefined ? {} : { connectionsPerTarget }),
    });
  }

  get connected(): boolean {
    return this.link.linkOpen && this.publicUrlValue !== null;
  }

  get publicUrl(): string | null {
    return this.publicUrlValue;
  }

  get deliveredEvents(): DeliveredEvents | null {
    if (!this.link.inCluster) return null;
    this.delivered ??= this.options.deliveredEvents ?? new DeliveredEvents();
    return this.delivered;
  }

  get activeStreams(): number {
    return this.link.streamsOf(this);
  }

  get edge(): string {
    return this.link.edge;
  }

  /** The tunnel ended for good (the edge refused or ended it, or the connection closed): its pools close. */
  finish(info: { reason: string; code: string; byUser: boolean }): void {
    if (this.stopped) return;
    this.stopped = true;
    this.publicUrlValue = null;
    this.localHop.close();
    this.emit('closed', info);
  }

  // ---- StreamHost: through the connection -------------------------------------------------------------

  get settings(): Settings {
    return this.link.settings;
  }

  get connectionSend(): SendCredit {
    return this.link.connectionSend;
  }

  get blocked(): Set<FlushableStream> {
    return this.link.blocked;
  }

  pool(target: LocalTarget): TargetPool {
    return this.localHop.pool(target);
  }

  send(frame: Buffer): void {
    this.link.send(frame);
  }

  atTurnEnd(stream: TurnEndStream): void {
    this.link.atTurnEnd(stream);
  }

  consumedConnection(bytes: number): void {
    this.link.consumedConnection(bytes);
  }

  endStream(stream: FlushableStream): void {
    this.link.endStream(stream);
  }

  count(requestBytes: number, responseBytes: number, failed: boolean): void {
    if (failed) this.stats.errors++;
    this.stats.bytesIn += requestBytes;
    this.stats.bytesOut += responseBytes;
  }

  get observed(): boolean {
    return this.listenerCount('exchange') > 0;
  }

  record(exchange: Exchange): void {
    this.link.recordAfterTurn(this, exchange);
  }

  deliverExchange(exchange: Exchange): void {
    this.emit('exchange', exchange);
  }

  get observesWebSockets(): boolean {
    return this.listenerCount('websocket') > 0;
  }

  recordWebSocket(exchange: Exchange): void {
    this.emit('websocket', exchange);
  }

  protocolError(message: string): void {
    this.link.protocolError(message);
  }

  rawEnded(end: RawConnectionEnd): void {
    this.emit('connection', end);
  }
}
