/**
 * A tunnel: one name (a subdomain, or `tcp:PORT`) served through a client connection (connection.ts).
 * A connection carries one tunnel or several (`burrow start`); this is the part each has of its own: its
 * name, kind, local port, capture ring, one-run policy, and the registry's view of it. Everything on the
 * wire (frames, credit, stream ids) is the connection's, which the tunnel's streams reach through it.
 *
 * The registry maps names to these (the public hot path does one lookup); an HTTP stream's host is its
 * tunnel, whose `send` is one call through to the connection.
 */
import type { StoredPolicy } from '../protocol/policy.js';
import type { ReadonlyKeyTable } from '../key-table.js';
import type { TunnelPolicy } from './policy/decide.js';
import { BurrowError } from '../errors.js';
import { TunnelKind, type GoAwayCodeValue, type Settings, type TunnelKindValue } from '../protocol/constants.js';
import type { SendCredit } from '../protocol/flow.js';
import type { CaptureRecord, CaptureStore, RingHandle } from '../store/captures.js';
import type { UsageCounter } from '../store/account-store.js';
import type { ReplayOverrides, TunnelInfo } from '../api/types.js';
import type { ServerExchange } from '../http1/server.js';
import type { AddressRule } from './policy/address-rule.js';
import type { ConnectionDeps, TunnelConnection } from './connection.js';
import type { RequestHead } from './http-stream.js';
import { PublicHttpStream, type RequestIntake } from './public-stream.js';
import { ReplayHttpStream } from './replay-stream.js';
import type { EdgeRawStream, RawStreamEnd } from './raw-stream.js';
import type { EdgeStream, HostedStream, StreamHost } from './stream-host.js';
import type { Captured, Writable } from './turn.js';
import type { TunnelPool } from './pool.js';

export type { SocketData } from './stream-host.js';

/** Where live tunnels are listed (the TunnelRegistry). */
export interface SessionDirectory {
  add(session: TunnelSession): void;
  /** The tunnel ended: the name is held for its owner for the grace period. */
  remove(session: TunnelSession): void;
}

export interface SessionDeps extends ConnectionDeps {
  captures: CaptureStore;
  usage: UsageCounter;
  capture: { enabled: boolean; bodyLimit: number };
  requestTimeoutMs: number;
  registry: SessionDirectory;
}

/** What makes a tunnel, besides its connection. */
export interface TunnelSpec {
  id: number;
  kind: TunnelKindValue;
  /** The subdomain, or `tcp:PORT` for a TCP tunnel. */
  subdomain: string;
  /** The local port it forwards to, as its client said (shown in the API's list). */
  port: number;
  publicUrl: string;
  ring: RingHandle;
  /** `--pool`: another client of the account may serve the name beside this one. */
  pooled: boolean;
}

export class TunnelSession implements StreamHost, RawStreamEnd {
  /** The one-run policy its client sent (docs/policies.md); it travels in the lease in a cluster. */
  runPolicy: StoredPolicy | undefined = undefined;
  /**
   * The policy the public listener applies to this tunnel (the reservation's stored one, else the
   * one-run one), compiled at connect and again when the stored one changes; null: none, the
   * listener's one check on the way of every request.
   */
  policy: TunnelPolicy | null = null;
  /** For tcp and tls tunnels: who may connect (`--allow-cidr`, `--deny-cidr`), or null for anyone. */
  addressRule: AddressRule | null = null;
  /** The pool it serves in, once a second client joined the name (pool.ts); null alone. */
  pool: TunnelPool | null = null;
  /**
   * An http tunnel outside any pool: the registry's hot path returns it as it is (one field read); any
   * other is looked at further (a pool's choice, or not an HTTP tunnel at all). Kept by `pool.ts`.
   */
  fastHttp: boolean;
  readonly startedAt = Date.now();
  readonly tunnelId: number;
  readonly kind: TunnelKindValue;
  readonly subdomain: string;
  readonly port: number;
  readonly publicUrl: string;
  readonly ring: RingHandle;
  readonly pooled: boolean;
  readonly settings: Settings;
  readonly requestTimeoutMs: number;
  readonly captureLimit: number;
  readonly timesHops: boolean;
  readonly connectionSend: SendCredit;
  readonly blocked: Set<HostedStream>;
  readonly accountId: string;
  readonly tokenId: string;
  /** Who connected it: the client's instance id (null from older clients) and address (registry.ts). */
  readonly instance: string | null;
  readonly clientAddress: string;
  /** Called once when the tunnel ends (a tcp tunnel's port stops being listened on). */
  onEnded: (() => void) | null = null;
  /** Streams of this tunnel now open (for a pool's choice, and the drain of a leaving member). */
  openStreams = 0;
  private live = false;

  constructor(
    readonly connection: TunnelConnection,
    readonly deps: SessionDeps,
    spec: TunnelSpec,
  ) {
    this.tunnelId = spec.id;
    this.kind = spec.kind;
    this.subdomain = spec.subdomain;
    this.port = spec.port;
    this.publicUrl = spec.publicUrl;
    this.ring = spec.ring;
    this.pooled = spec.pooled;
    this.fastHttp = spec.kind === TunnelKind.HTTP;
    this.settings = deps.settings;
    this.requestTimeoutMs = deps.requestTimeoutMs;
    this.captureLimit = deps.capture.enabled ? deps.capture.bodyLimit : 0;
    this.timesHops = deps.observer.metrics !== null;
    this.connectionSend = connection.connectionSend;
    this.blocked = connection.blocked;
    const owner = connection.owner;
    this.accountId = owner.accountId;
    this.tokenId = owner.tokenId;
    this.instance = owner.instance;
    this.clientAddress = owner.clientAddress;
  }

  info(): TunnelInfo {
    return {
      subdomain: this.subdomain,
      accountId: this.accountId,
      tokenId: this.tokenId,
      port: this.port,
      startedAt: this.startedAt,
      publicUrl: this.publicUrl,
      kind: this.kind,
      poolMembers: this.pool?.size ?? 1,
    };
  }

  /** The connection made it live (READY or BOUND): it joins the registry and the log. */
  goLive(): void {
    if (this.live) return;
    this.live = true;
    this.deps.registry.add(this);
    this.deps.observer.tunnelConnected(this);
  }

  // ---- StreamHost: through the connection ---------------------------------------------------------

  send(frame: Buffer): void {
    this.connection.send(frame);
  }

  /** A public response has something to write: it is written at the end of this turn, corked. */
  deferWrite(stream: Writable): void {
    this.deps.turn.write(stream);
  }

  capture(exchange: Captured, requestBytes: number, responseBytes: number, store: boolean): void {
    const deps = this.deps;
    deps.usage.count(this.accountId, requestBytes, responseBytes);
    // An upgraded connection is logged when it ends (upgradeEnded), with the bytes that passed.
    if (deps.observer.watching && exchange instanceof PublicHttpStream && !exchange.upgraded) deps.observer.exchangeEnded(exchange);
    if (deps.capture.enabled && store) deps.turn.capture(exchange);
    else exchange.afterCapture();
  }

  consumedConnection(bytes: number): void {
    this.connection.consumedConnection(bytes);
  }

  endStream(stream: HostedStream): void {
    if (this.connection.endStream(stream)) this.openStreams--;
  }

  /** A raw stream (a TCP or TLS passthrough connection) ended: counted, logged and recorded. */
  rawEnded(stream: EdgeRawStream): void {
    const deps = this.deps;
    deps.usage.count(this.accountId, stream.bytesIn, stream.bytesOut);
    if (deps.observer.watching) deps.observer.connectionEnded(stream);
    if (deps.capture.enabled) deps.turn.capture(stream);
  }

  upgradeEnded(stream: HostedStream): void {
    if (this.deps.observer.watching && stream instanceof PublicHttpStream) this.deps.observer.exchangeEnded(stream, { bytesIn: stream.bytesIn, bytesOut: stream.bytesOut });
  }

  // ---- streams ----------------------------------------------------------------------------------------

  /** Whether another stream may open now (the connection's stream cap; none once its client is leaving). */
  hasRoom(): boolean {
    return this.connection.hasRoom();
  }

  /** The connection's streams (every tunnel's), for counts and memory. */
  get streams(): ReadonlyKeyTable<number, EdgeStream> {
    return this.connection.streams;
  }

  openPublicHttp(exchange: ServerExchange, head: RequestHead, intake: RequestIntake): PublicHttpStream {
    const connection = this.connection;
    const stream = new PublicHttpStream(connection.allocateStreamId(), this, head, exchange, intake);
    connection.streams.set(stream.id, stream);
    this.openStreams++;
    return stream;
  }

  /** Adds a stream made elsewhere (a raw TCP connection, raw-stream.ts) to the connection's table. */
  adopt(stream: EdgeStream): void {
    this.connection.streams.set(stream.id, stream);
    this.openStreams++;
  }

  /** Replays a captured request through this tunnel; resolves with the new capture. */
  replay(capture: CaptureRecord, overrides: ReplayOverrides): Promise<CaptureRecord> {
    if (!this.hasRoom()) return Promise.reject(new BurrowError('TUNNEL_BUSY'));
    const stream = new ReplayHttpStream(this.connection.allocateStreamId(), this, capture, overrides);
    this.connection.streams.set(stream.id, stream);
    this.openStreams++;
    return stream.start();
  }

  /** What the connection holds in memory now (every tunnel on it). */
  memory(): ReturnType<TunnelConnection['memory']> {
    return this.connection.memory();
  }

  checkDeadlines(now: number): void {
    this.connection.checkDeadlines(now);
  }

  // ---- ending -----------------------------------------------------------------------------------------

  /** Ends the whole connection with GOAWAY (every tunnel on it): the edge shuts down, a protocol error. */
  goAway(code: GoAwayCodeValue, message: string): void {
    this.connection.goAway(code, message);
  }

  /**
   * Ends this tunnel only (closed through the API, replaced, its lease lost): UNBOUND, or GOAWAY when it is
   * its connection's last tunnel.
   */
  end(code: GoAwayCodeValue, message: string): void {
    this.connection.endTunnel(this, code, message);
  }

  /** The tunnel is gone (its connection closed, or it was unbound): the registry holds its name. */
  ended(code: number, message: string): void {
    if (!this.live) return;
    this.live = false;
    this.deps.observer.tunnelDisconnected(this, code, message);
    this.deps.registry.remove(this);
    this.onEnded?.();
  }
}
