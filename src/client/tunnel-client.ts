/**
 * The tunnel client library: one WebSocket to the edge carrying many streams to local ports.
 *
 * The client is given the edge's base URL (its public listener) and learns where tunnel clients connect
 * from `GET /api/v1/instance` (`agent_url`: the agent listener, or a front proxy's route to it), again
 * before every connection, so an edge may move its agent port between restarts.
 *
 * `start()` resolves once the edge says READY, or rejects with the edge's refusal (401, 403, 409, 400).
 * After that a dropped connection reconnects with exponential backoff and full jitter, asking for the
 * same subdomain; the edge holds it for the owner meanwhile. A GOAWAY that is final (closed through the
 * API, token revoked, replaced) ends the client with the edge's reason.
 *
 * Several edges (failover order; a name with several addresses counts once per address): when the edge
 * in use dies, sends a GOAWAY that is not final, or refuses for a while (429, 5xx such as
 * STORE_UNAVAILABLE), the next one is tried at once with the same subdomain; the backoff starts only
 * once every edge has failed in a row. `start()` likewise tries each edge once before it gives up.
 */
import { encodePolicyHeader, POLICY_HEADER, type PolicySpec } from '../protocol/policy.js';
import { closeReason } from '../protocol/close-reason.js';
import { KeyTable } from '../key-table.js';
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { LookupFunction } from 'node:net';
import { Agent, request } from 'undici';
import WebSocket from 'ws';
import { decode, encode, ProtocolError, type BindFrame, type Frame } from '../protocol/codec.js';
import {
  CLOSE_CODE_BASE,
  CONNECT_PATH,
  DEFAULT_SETTINGS,
  FINAL_GOAWAY_CODES,
  FrameType,
  GoAwayCode,
  NoticeCode,
  PROTOCOL_HEADER,
  PROTOCOL_VERSION,
  ResetCode,
  type Settings,
} from '../protocol/constants.js';
import { ReceiveWindow, SendCredit } from '../protocol/flow.js';
import { endpointLabel, pinnedLookup, resolveEndpoints, type EdgeEndpoint } from './edge-endpoints.js';
import { edgeLookup } from './edge-lookup.js';
import { masksUnneeded, zeroMask } from './frame-mask.js';
import { describeLookupFailure, resolveRuleFor, type ResolveRule } from './resolve-rules.js';
import { cleartextRefusal, describeTlsError, trustedCas } from './edge-trust.js';
import type { Exchange } from './exchange.js';
import { ClientHttpStream } from './http-stream.js';
import type { HostHeader } from './host-header.js';
import type { DeliveredEvents } from './delivered-events.js';
import { LocalHop } from './local-hop/pool.js';
import type { TargetPool } from './local-hop/pool.js';
import type { LocalTarget, RouteTable } from './routes.js';
import type { ClientStream, FlushableStream, StreamHost, TurnEndStream } from './stream-host.js';
import { proxyHeader } from './proxy-header.js';
import { ClientRawStream } from './raw-stream.js';
import { BoundTunnel, type BoundTunnelOptions, type ExchangeOwner, type TunnelLink } from './bound-tunnel.js';

export interface TunnelClientOptions {
  /** The edge, or several in failover order. */
  edge: string | readonly string[];
  token: string;
  routes: RouteTable;
  /** The Host local servers see: the public one (default), the target's (`rewrite`) or a value. */
  hostHeader?: HostHeader;
  /** Accept any certificate from https:// targets (self-signed dev servers). */
  localInsecure?: boolean;
  /** The subdomain to ask for; the edge makes one up when absent. */
  subdomain?: string;
  /**
   * Take the subdomain over from another live tunnel of the account (`--replace`); without it the edge
   * refuses a name that another client has online (409 SUBDOMAIN_TAKEN). Sent on the first connect only:
   * the client's own reconnects replace its old session anyway (same instance id).
   */
  replace?: boolean;
  /**
   * Serve the subdomain beside the account's other `--pool` clients on it (`--pool`, every connect): the
   * edge spreads requests across them. `leave()` hands the name to them without failing a request.
   */
  pool?: boolean;
  /** Bytes of each body kept for `exchange` events; 0 turns recording off. */
  recordLimit?: number;
  /** Connections per local target (the local hop's bound, 128). */
  connectionsPerPort?: number;
  /** Reconnect backoff bounds. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** The edge is presumed dead after this long without a message or ping (it pings an idle tunnel
   * within its 32 s idle timeout). */
  silenceTimeoutMs?: number;
  /** A private CA (PEM) that may sign the edge's certificate, beside the public roots. */
  ca?: string | Buffer;
  /** Send the token over plain ws:// to an edge that is not on this machine (refused otherwise). */
  insecure?: boolean;
  /** A one-run policy (docs/policies.md), sent as the `burrow-policy` connect header on every connect. */
  policy?: PolicySpec;
  /** `--resolve` rules: an edge they name is dialled at their address, its name kept for TLS and Host. */
  resolve?: readonly ResolveRule[];
  /**
   * The connect names no tunnel (no `port`): every tunnel of the connection is added with `bind()`
   * (`burrow start`, docs/protocol.md section 18), and `routes` serves none. An edge that needs a port
   * on the connect is told to update.
   */
  bindOnly?: boolean;
  /**
   * The client process's id (the connect's `instance`); a fresh one by default. Sessions of one
   * tunnel on several edges (src/client/multi-edge.ts) share it: the edges then serve the tunnel
   * side by side instead of taking it from each other.
   */
  instance?: string;
  /** A local hop shared with other sessions of the same tunnel; this client then leaves it open when it ends. */
  localHop?: LocalHop;
  /** Which of the edges to try first (an index into the failover order; 0 by default). */
  firstEdge?: number;
  /**
   * Held webhooks this tunnel's sessions delivered lately (src/client/delivered-events.ts), shared by the
   * sessions of a tunnel on several edges; looked at only while the edge reports a cluster.
   */
  deliveredEvents?: DeliveredEvents;
  /**
   * Keep trying until READY instead of failing `start()` once every edge failed (a second session of a
   * tunnel that is already up): only a final refusal ends it.
   */
  keepTrying?: boolean;
}

/** The edge refused the tunnel: its HTTP status and the spec's error code and message. */
export class TunnelRefusedError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'TunnelRefusedError';
  }
}

export interface ReadyInfo {
  subdomain: string;
  publicUrl: string;
  settings: Settings;
  reconnected: boolean;
  /** The edge this connection is to, as the user is told: its URL (and the address, when a name has several). */
  edge: string;
  /** On a reconnect to another edge than the last ready one: that edge and why it was left. */
  movedFrom: { edge: string; cause: string } | null;
}

export interface ClosedInfo {
  /** Why the tunnel ended for good. */
  reason: string;
  /** The GOAWAY code or the refusal's error code, when there was one. */
  code: string;
  /** true when the user closed it (close()); false when the edge ended it. */
  byUser: boolean;
}

/** What the edge in use says about its cluster store (NOTICE STORE_UNAVAILABLE / STORE_AVAILABLE), on a change only. */
export interface StoreNotice {
  available: boolean;
  /** The edge that said so. */
  edge: string;
  /** The edge's words. */
  message: string;
}

export interface TunnelClientEvents {
  ready: [ReadyInfo];
  /**
   * `edge`: the edge tried next; delayMs 0 when it is another edge tried at once. `refusal`: the error
   * code when the edge refused the connect (ALREADY_ATTACHED, STORE_UNAVAILABLE...), else null.
   */
  reconnecting: [{ attempt: number; delayMs: number; reason: string; edge: string; refusal: string | null }];
  /** The edge's store became unavailable, or available again (cluster mode; once per change). */
  store: [StoreNotice];
  /** A NOTICE of a code this client does not know: shown as the edge's words. */
  notice: [{ code: number; message: string; edge: string }];
  closed: [ClosedInfo];
  exchange: [Exchange];
  /** An upgraded connection (a WebSocket) opened or closed: emitted twice with the same object (inspector only). */
  websocket: [Exchange];
}

const GOAWAY_NAMES = Object.fromEntries(Object.entries(GoAwayCode).map(([name, code]) => [code, name])) as Record<number, string>;

/** BOUND refusals that may pass: a tunnel that was live is bound again after a pause. */
const TRANSIENT_BIND_REFUSALS: ReadonlySet<string> = new Set(['RATE_LIMITED', 'INTERNAL_ERROR', 'STORE_UNAVAILABLE', 'STORAGE_FULL']);

/** What the client says when the edge takes no BIND (an edge from before it wants a port on the connect). */
/**
 * The edges' answers to `GET /api/v1/instance` (their `agent_url`), by edge URL and pinned address,
 * shared by this process's connections: asking anew for every connect was a second TCP connection and
 * HTTP exchange each time, half the connect rate of a process with many tunnels (issue 25). A connection
 * that ends forgets its edge's answer, so the next connect asks again. Only the URL is shared: each
 * connection checks it against its own options and verifies the agent endpoint's certificate itself.
 */
const instanceAnswers = new Map<string, Promise<string | undefined>>();

function agentKey(endpoint: EdgeEndpoint): string {
  return `${endpoint.edge} ${endpoint.address ?? ''}`;
}

const NO_BIND = 'The edge does not carry several tunnels on one connection (BIND, docs/protocol.md section 18); update the edge, or run each tunnel with "burrow http".';

export class TunnelClient extends EventEmitter<TunnelClientEvents> implements StreamHost, TunnelLink {
  settings: Settings = DEFAULT_SETTINGS;
  readonly routes: RouteTable;
  readonly hostHeader: HostHeader;
  readonly localInsecure: boolean;
  recordLimit: number;
  connectionSend = new SendCredit(DEFAULT_SETTINGS.connectionWindow);
  private connectionReceive = new ReceiveWindow(DEFAULT_SETTINGS.connectionWindow);
  readonly blocked = new Set<FlushableStream>();
  private readonly streams = new KeyTable<number, ClientStream>();
  /** The local hop: one pool of connections per target origin. */
  private readonly localHop: LocalHop;
  private socket: WebSocket | null = null;
  private outbox: Buffer[] = [];
  /** Streams holding this turn's response bytes, framed in the check phase before the outbox goes. */
  private turnEndStreams: TurnEndStream[] = [];
  /** Exchanges completed this turn, with the tunnel each belongs to: handed to observers after the turn's write. */
  private recordedOwners: ExchangeOwner[] = [];
  private recordedExchanges: Exchange[] = [];
  private flushScheduled = false;
  private readonly flushNow = (): void => this.flush();
  private subdomain: string | undefined;
  /** This client's id on every connect: its reconnects replace its own old session (docs/protocol.md section 1). */
  readonly instance: string;
  /** Whether the local hop is this client's own (closed with it) or shared with other sessions. */
  private readonly ownsLocalHop: boolean;
  /** The cluster attachment of the last READY (settings.attachment): named in the next connect's `drop`. */
  private attachment: number | null = null;
  /** What the edge in use last said of its store (NOTICE): events fire on a change only. */
  private storeAvailable = true;
  /** The options' deliveredEvents while the edge reports a cluster (READY's clusterEdges), else null. */
  deliveredEvents: DeliveredEvents | null = null;
  /** The edge's last READY reported a cluster (its clusterEdges): the bound tunnels dedupe held webhooks too. */
  inCluster = false;
  private publicUrlValue: string | null = null;
  private everReady = false;
  private stopped = false;
  /** Backoff rounds since the last READY: every edge failed this many times in a row. */
  private attempt = 0;
  private readonly edges: readonly string[];
  private endpoints: EdgeEndpoint[];
  /** This connect's agent endpoint is another connection's answer (instanceAnswers), not yet reached. */
  private agentAnswerUnproven = false;
  private endpointIndex = 0;
  /** Connections that failed since the last READY or backoff: a full round of them means back off. */
  private failuresInRound = 0;
  /** The causes of this round's failures, for the first connect's error when all of them fail. */
  private roundCauses: string[] = [];
  /** The edge of the last READY and, once it is lost, why: named when another edge takes over. */
  private readyEdge: string | null = null;
  private lossCause: string | null = null;
  /** The current connection's refusal (an HTTP answer instead of the upgrade), for its close handler. */
  private refusal: TunnelRefusedError | null = null;
  private resolving = false;
  /** The endpoint whose agent URL is being asked for (a connection in its first step). */
  private connecting: EdgeEndpoint | null = null;
  private lastSeen = 0;
  /** leave(): GOAWAY sent, the edge is answering what it had sent before closing. */
  private leaving = false;
  /** The last READY's move to another edge, told to bound tunnels with their BOUND. */
  private lastMove: { edge: string; cause: string } | null = null;
  private watchdog: NodeJS.Timeout | null = null;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private goAway: { code: number; message: string } | null = null;
  /** Why the current WebSocket failed, from its 'error' event (ECONNREFUSED, ENOTFOUND...): named to the user. */
  private socketError: string | null = null;
  /** The current WebSocket's upgrade was accepted: a close before READY is the edge's, not the network's. */
  private socketOpened = false;
  /**
   * How the upgraded connection's TCP socket ended, when it ended from the far side: `ws` swallows a
   * reset after the upgrade, and says 1006 for a reset, an end and a local destroy alike.
   */
  private transportEnd: string | null = null;
  private readonly trustedCas: string[] | undefined;
  private firstConnect: { resolve: (info: ReadyInfo) => void; reject: (error: Error) => void } | null = null;
  /** Live counters for the terminal: open streams and totals. */
  readonly stats = { requests: 0, errors: 0, bytesIn: 0, bytesOut: 0 };
  /** The tunnels added with BIND, by id (1 up); each is bound again after every READY. */
  private readonly bound = new Map<number, BoundTunnel>();

  constructor(private readonly options: TunnelClientOptions) {
    super();
    this.routes = options.routes;
    this.recordLimit = options.recordLimit ?? 0;
    this.subdomain = options.subdomain;
    this.hostHeader = options.hostHeader ?? 'keep';
    this.localInsecure = options.localInsecure ?? false;
    this.trustedCas = options.ca === undefined ? undefined : trustedCas(options.ca);
    this.edges = typeof options.edge === 'string' ? [options.edge] : [...options.edge];
    if (this.edges.length === 0) throw new Error('TunnelClient needs at least one edge');
    this.endpoints = this.edges.map((edge) => ({ edge, address: null }));
    this.endpointIndex = (options.firstEdge ?? 0) % this.endpoints.length;
    this.instance = options.instance ?? randomBytes(12).toString('base64url');
    this.ownsLocalHop = options.localHop === undefined;
    this.localHop =
      options.localHop ??
      new LocalHop(this.routes.targets(), {
        insecure: this.localInsecure,
        ...(options.connectionsPerPort === undefined ? {} : { connectionsPerTarget: options.connectionsPerPort }),
      });
  }

  /** The edge in use, or the one being tried. */
  get edge(): string {
    return this.endpoints[this.endpointIndex % this.endpoints.length]!.edge;
  }

  /** Where in the `--edge` list this session's edge is (an edge's name may resolve to several endpoints). */
  get edgePosition(): number {
    return Math.max(0, this.edges.indexOf(this.endpoints[this.endpointIndex % this.endpoints.length]!.edge));
  }

  get publicUrl(): string | null {
    return this.publicUrlValue;
  }

  get activeStreams(): number {
    return this.streams.size;
  }

  get connected(): boolean {
    return this.socket !== null && this.socket.readyState === WebSocket.OPEN && this.publicUrlValue !== null;
  }

  /** Whether the connection is up (READY received), whatever its tunnels. */
  get linkOpen(): boolean {
    return this.socket !== null && this.socket.readyState === WebSocket.OPEN && this.publicUrlValue !== null;
  }

  /**
   * One more tunnel on this connection (docs/protocol.md section 18), asked for with BIND after each
   * READY. `started` resolves on its first BOUND, or rejects with the edge's refusal. Call before `start()`.
   */
  bind(options: BoundTunnelOptions): { tunnel: BoundTunnel; started: Promise<ReadyInfo> } {
    const id = this.bound.size + 1;
    const tunnel = new BoundTunnel(id, this, options, this.recordLimit, this.options.connectionsPerPort);
    this.bound.set(id, tunnel);
    const started = new Promise<ReadyInfo>((resolve, reject) => {
      const onReady = (info: ReadyInfo): void => {
        tunnel.off('closed', onClosed);
        resolve(info);
      };
      const onClosed = (info: ClosedInfo): void => {
        tunnel.off('ready', onReady);
        reject(new TunnelRefusedError(0, info.code, info.reason));
      };
      tunnel.once('ready', onReady);
      tunnel.once('closed', onClosed);
    });
    // A caller that only listens for events must not see an unhandled rejection.
    started.catch(() => undefined);
    return { tunnel, started };
  }

  /** The connection never came up (start() rejected): every bound tunnel ends with why. */
  endTunnels(info: ClosedInfo): void {
    for (const tunnel of this.bound.values()) tunnel.finish(info);
  }

  streamsOf(tunnel: BoundTunnel): number {
    let count = 0;
    for (const stream of this.streams.values()) if (stream.host === tunnel) count++;
    return count;
  }

  /** Asks for every bound tunnel that is not live (after READY, or after an UNBOUND that was not final). */
  private bindAll(): void {
    for (const tunnel of this.bound.values()) {
      if (tunnel.stopped || tunnel.publicUrlValue !== null || tunnel.binding) continue;
      if (this.settings.maxTunnels === undefined) {
        tunnel.finish({ reason: NO_BIND, code: 'INVALID_REQUEST', byUser: false });
        continue;
      }
      const options = tunnel.options;
      if (options.waitForName === true && tunnel.subdomain === undefined) continue;
      const bind: BindFrame = [
        FrameType.BIND,
        0,
        tunnel.id,
        tunnel.kind,
        tunnel.kind === 'tcp' ? '' : (tunnel.subdomain ?? ''),
        tunnel.remotePort,
        tunnel.routes.defaultPort,
        options.policy === undefined ? '' : encodePolicyHeader(options.policy),
        options.replace === true && !tunnel.everBound,
        false,
      ];
      // An edge of a cluster takes `drop` (section 18): the attachment this BIND replaces, 0 for none.
      if (this.inCluster) bind.push(tunnel.attachment);
      tunnel.binding = true;
      this.send(encode(bind));
    }
    this.closeWhenNoTunnel();
  }

  /** The connection serves: the next loss starts a new round of edges and a new backoff. */
  private connectionServes(): void {
    this.attempt = 0;
    this.failuresInRound = 0;
    this.roundCauses = [];
  }

  /** Binds the tunnels that are not live now, when the connection is up (a tunnel that waited for its name has it). */
  bindWaiting(): void {
    if (!this.stopped && this.linkOpen) this.bindAll();
  }

  /** BOUND: a bound tunnel is live, or refused for good. */
  private onBound(id: number, error: string, message: string, name: string, publicUrl: string, attachment: number): void {
    const tunnel = this.bound.get(id);
    if (tunnel === undefined || tunnel.stopped) return;
    tunnel.binding = false;
    if (error === 'ALREADY_ATTACHED') {
      // This client's other connection has the tunnel on this edge: this connection belongs on another
      // edge (the next of the list, or a front proxy's next pick), quietly, as a connect refused so would.
      if (this.socket !== null && this.refusal === null) {
        this.refusal = new TunnelRefusedError(409, error, message);
        this.socket.terminate();
      }
      return;
    }
    if (error !== '') {
      // A tunnel that was live and is refused for a while (the cluster's store away, a rate limit, the
      // edge's own trouble) is asked for again; a first BIND's refusal, or a final one, ends it.
      if (tunnel.everBound && TRANSIENT_BIND_REFUSALS.has(error)) {
        this.rebindLater(tunnel, 2_000, `${error}: ${message}`);
        return;
      }
      tunnel.finish({ reason: message, code: error, byUser: false });
      this.closeWhenNoTunnel();
      return;
    }
    const reconnected = tunnel.everBound;
    tunnel.everBound = true;
    this.connectionServes();
    tunnel.attachment = attachment;
    tunnel.subdomain = name;
    tunnel.publicUrlValue = publicUrl;
    // A tcp tunnel keeps its port across reconnects as an http one keeps its name.
    if (tunnel.kind === 'tcp') tunnel.remotePort = Number(name.slice('tcp:'.length));
    const edge = endpointLabel(this.endpoints[this.endpointIndex % this.endpoints.length]!);
    tunnel.emit('ready', { subdomain: name, publicUrl, settings: this.settings, reconnected, edge, movedFrom: this.lastMove });
  }

  /** UNBOUND: one tunnel ended; a final code ends it for good, another binds it again. */
  private onUnbound(id: number, code: number, message: string): void {
    const tunnel = this.bound.get(id);
    if (tunnel === undefined || tunnel.stopped) return;
    for (const stream of this.streams.values()) {
      if (stream.host !== tunnel) continue;
      stream.tunnelClosed();
      this.streams.delete(stream.id);
    }
    tunnel.publicUrlValue = null;
    if (FINAL_GOAWAY_CODES.has(code)) {
      tunnel.finish({ reason: message === '' ? GOAWAY_NAMES[code]! : message, code: GOAWAY_NAMES[code] ?? 'CLOSED', byUser: false });
      this.closeWhenNoTunnel();
      return;
    }
    this.rebindLater(tunnel, 1_000, message);
  }

  /** Binds the connection's tunnels that are not live again after `delayMs`; `tunnel` says why meanwhile. */
  private rebindLater(tunnel: BoundTunnel, delayMs: number, reason: string): void {
    const edge = endpointLabel(this.endpoints[this.endpointIndex % this.endpoints.length]!);
    tunnel.emit('reconnecting', { attempt: 1, delayMs, reason, edge });
    const timer = setTimeout(() => {
      if (!this.stopped && this.linkOpen) this.bindAll();
    }, delayMs);
    timer.unref();
  }

  /** A connection of bound tunnels only, with none left: nothing to carry. */
  private closeWhenNoTunnel(): void {
    if (this.options.bindOnly !== true || this.stopped) return;
    for (const tunnel of this.bound.values()) if (!tunnel.stopped) return;
    void this.close('no tunnel left on the connection');
  }

  /** The connection is lost and tried again: every tunnel on it says so. */
  private reconnecting(event: TunnelClientEvents['reconnecting'][0]): void {
    this.emit('reconnecting', event);
    for (const tunnel of this.bound.values()) {
      tunnel.publicUrlValue = null;
      if (!tunnel.stopped) tunnel.emit('reconnecting', event);
    }
  }

  /** Connects; resolves on READY, rejects with TunnelRefusedError or a connection error. */
  start(): Promise<ReadyInfo> {
    return new Promise<ReadyInfo>((resolve, reject) => {
      // Decided before any connection: a token must not leave in clear text, not even in a first packet.
      // Every edge is checked: a failover must not send the token in clear text either.
      for (const edge of this.edges) {
        const refusal = cleartextRefusal(edge, this.options.insecure === true);
        if (refusal === null) continue;
        this.stopped = true;
        this.closeLocalHop();
        reject(new Error(refusal));
        return;
      }
      this.firstConnect = { resolve, reject };
      this.connectAfterResolving();
    });
  }

  private closeLocalHop(): void {
    if (this.ownsLocalHop) this.localHop.close();
  }

  /** The subdomain this client asks for (the one READY gave, once it did). */
  get subdomainName(): string | undefined {
    return this.subdomain;
  }

  /** Closes the tunnel at once: GOAWAY to the edge, local pools closed. */
  async close(reason = 'client closing'): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.clearTimers();
    const socket = this.socket;
    if (socket !== null && socket.readyState === WebSocket.OPEN) {
      socket.send(encode([FrameType.GOAWAY, 0, GoAwayCode.CLIENT_CLOSING, reason]));
      socket.close(CLOSE_CODE_BASE + GoAwayCode.CLIENT_CLOSING, closeReason(reason));
    } else {
      socket?.terminate();
    }
    this.failStreams();
    this.closeLocalHop();
    for (const tunnel of this.bound.values()) tunnel.finish({ reason, code: 'CLIENT_CLOSING', byUser: true });
    this.emit('closed', { reason, code: 'CLIENT_CLOSING', byUser: true });
  }

  /**
   * Leaves without failing a request (a pool member's Ctrl-C): GOAWAY tells the edge, which sends this
   * client nothing new (the pool's other members take the name's requests) and closes the connection
   * once the streams it has are answered; after `drainMs` the client closes anyway.
   */
  async leave(reason = 'client closing', drainMs = 30_000): Promise<void> {
    const socket = this.socket;
    if (this.stopped || socket === null || socket.readyState !== WebSocket.OPEN) return this.close(reason);
    this.leaving = true;
    this.send(encode([FrameType.GOAWAY, 0, GoAwayCode.CLIENT_CLOSING, reason]));
    this.flush();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, drainMs);
      timer.unref();
      socket.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
    });
    await this.close(reason);
  }

  // ---- connection -----------------------------------------------------------------------------------

  /** A new round: the names are looked up again (a cluster's DNS may have changed), then the round's first edge. */
  private connectAfterResolving(): void {
    if (this.resolving) return;
    this.resolving = true;
    const current = this.endpoints[this.endpointIndex % this.endpoints.length]!;
    void resolveEndpoints(this.edges, this.options.resolve).then((endpoints) => {
      this.resolving = false;
      if (this.stopped) return;
      this.endpoints = endpoints;
      // Carry on from the same edge: the round goes on in failover order.
      const label = endpointLabel(current);
      const same = endpoints.findIndex((endpoint) => endpointLabel(endpoint) === label);
      const sameEdge = endpoints.findIndex((endpoint) => endpoint.edge === current.edge);
      this.endpointIndex = same !== -1 ? same : sameEdge !== -1 ? sameEdge : 0;
      this.connect();
    });
  }

  private connect(askAgain = false): void {
    const endpoint = this.endpoints[this.endpointIndex % this.endpoints.length]!;
    this.goAway = null;
    this.socketError = null;
    this.socketOpened = false;
    this.transportEnd = null;
    this.refusal = null;
    this.connecting = endpoint;
    this.discoverAgent(endpoint, askAgain).then(
      (agentUrl) => {
        if (this.stopped || this.connecting !== endpoint) return;
        this.connecting = null;
        this.openSocket(endpoint, agentUrl);
      },
      (error: Error) => {
        if (this.stopped || this.connecting !== endpoint) return;
        this.connecting = null;
        this.socketError = error.message;
        this.ended(1006, '');
      },
    );
  }

  /**
   * The edge's agent endpoint, from `GET /api/v1/instance` on its base URL (through the endpoint's
   * pinned address). An edge that names none (protocol 1, or not a Burrow edge) is asked on the base URL
   * itself, where a protocol 1 edge refuses this client's version with a message naming both. The endpoint must keep the base URL's
   * security: no ws:// for an https:// edge, no token in clear text across a network.
   */
  private async discoverAgent(endpoint: EdgeEndpoint, askAgain: boolean): Promise<URL> {
    const base = new URL(endpoint.edge);
    const key = agentKey(endpoint);
    let asked = askAgain ? undefined : instanceAnswers.get(key);
    this.agentAnswerUnproven = asked !== undefined;
    if (asked === undefined) {
      const asking = this.askInstance(endpoint, base);
      instanceAnswers.set(key, asking);
      asking.catch(() => {
        if (instanceAnswers.get(key) === asking) instanceAnswers.delete(key);
      });
      asked = asking;
    }
    const agentUrl = await asked;
    const secure = base.protocol === 'https:';
    if (agentUrl === undefined) {
      const url = new URL(CONNECT_PATH, base);
      url.protocol = secure ? 'wss:' : 'ws:';
      return url;
    }
    let url: URL;
    try {
      url = new URL(agentUrl);
    } catch {
      throw new Error(`the edge names an agent endpoint that is not a URL: ${JSON.stringify(agentUrl)}`);
    }
    if (url.protocol !== 'ws:' && url.protocol !== 'wss:') throw new Error(`the edge's agent endpoint ${agentUrl} is not ws:// or wss://`);
    if (secure && url.protocol !== 'wss:') throw new Error(`the edge at ${endpoint.edge} names a clear-text agent endpoint (${agentUrl}); refusing to send the token there`);
    const refusal = cleartextRefusal(url.href, this.options.insecure === true);
    if (refusal !== null) throw new Error(refusal);
    return url;
  }

  /** `agent_url` of the edge's `GET /api/v1/instance`, undefined when it names none. */
  private async askInstance(endpoint: EdgeEndpoint, base: URL): Promise<string | undefined> {
    const dispatcher = new Agent({
      connect: {
        ...(this.trustedCas === undefined ? {} : { ca: this.trustedCas }),
        lookup: endpoint.address === null ? edgeLookup : pinnedLookup(endpoint.address),
        timeout: 10_000,
      },
    });
    let agentUrl: string | undefined;
    try {
      const response = await request(new URL('/api/v1/instance', base), { dispatcher, headersTimeout: 15_000, bodyTimeout: 15_000 });
      const text = await response.body.text();
      // Anything but the instance's JSON (an older edge, something else at the URL): the base URL is asked.
      try {
        const instance = response.statusCode === 200 ? (JSON.parse(text) as { agent_url?: unknown }) : {};
        agentUrl = typeof instance.agent_url === 'string' ? instance.agent_url : undefined;
      } catch {
        agentUrl = undefined;
      }
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      throw new Error(describeTlsError(error as Error) ?? describeLookupFailure(code, endpoint.edge) ?? code ?? (error as Error).message);
    } finally {
      void dispatcher.close();
    }
    return agentUrl;
  }

  /**
   * How the agent endpoint's name is dialled (docs/protocol.md section 1): a `--resolve` rule for its own
   * host and port first; else, when it is the edge's own name and that edge is dialled at a pinned
   * address (a `--resolve` rule for the edge URL, or one of the name's addresses in failover), that same
   * address: the agent port is the edge's, on the same machine, whatever port it names; else localhost
   * names are loopback and other names go to DNS.
   */
  private agentLookup(endpoint: EdgeEndpoint, agentUrl: URL): LookupFunction {
    const rule = resolveRuleFor(this.options.resolve ?? [], agentUrl);
    if (rule !== undefined) return pinnedLookup(rule.address);
    if (endpoint.address !== null && agentUrl.hostname === new URL(endpoint.edge).hostname) return pinnedLookup(endpoint.address);
    return edgeLookup;
  }

  private openSocket(endpoint: EdgeEndpoint, agentUrl: URL): void {
    const url = new URL(agentUrl.href);
    if (this.options.bindOnly !== true) url.searchParams.set('port', String(this.routes.defaultPort));
    if (this.subdomain !== undefined) url.searchParams.set('subdomain', this.subdomain);
    url.searchParams.set('instance', this.instance);
    // Only until the first READY: a reconnect must not take the name back from a client that replaced this one.
    if (this.options.replace === true && !this.everReady) url.searchParams.set('replace', '1');
    if (this.options.pool === true) url.searchParams.set('pool', '1');
    // The cluster attachment of the session this one replaces: its edge lets it go at once (docs/protocol.md section 1).
    if (this.attachment !== null) url.searchParams.set('drop', String(this.attachment));
    const socket = new WebSocket(url, {
      headers: {
        authorization: `Bearer ${this.options.token}`,
        [PROTOCOL_HEADER]: String(PROTOCOL_VERSION),
        ...(this.options.policy === undefined ? {} : { [POLICY_HEADER]: encodePolicyHeader(this.options.policy) }),
      },
      perMessageDeflate: false,
      maxPayload: 8 * 1024 * 1024,
      // Over TLS or to this machine a zero key: ws then sends each frame without a masked copy.
      ...(masksUnneeded(url) ? { generateMask: zeroMask } : {}),
      handshakeTimeout: 15_000,
      ...(this.trustedCas === undefined ? {} : { ca: this.trustedCas }),
      // Only the address is pinned: Host, SNI and the certificate check keep the URL's name. Unpinned,
      // localhost names are loopback without a resolver (RFC 6761, src/client/edge-lookup.ts).
      lookup: this.agentLookup(endpoint, url),
    });
    socket.on('upgrade', (response) => {
      const transport = response.socket;
      transport.once('end', () => {
        if (this.socket === socket) this.transportEnd ??= 'the edge ended the TCP connection';
      });
      transport.once('error', (error: NodeJS.ErrnoException) => {
        if (this.socket === socket) this.transportEnd ??= `the TCP connection failed: ${error.code ?? error.message}`;
      });
      const version = String(response.headers[PROTOCOL_HEADER] ?? '');
      if (version === String(PROTOCOL_VERSION)) return;
      // An edge of another version accepted: nothing it sends can be read. Final, as a refusal is.
      this.refusal = new TunnelRefusedError(400, 'INVALID_REQUEST', `The edge speaks tunnel protocol ${version === '' ? '(unknown)' : version} and this client ${PROTOCOL_VERSION}; update the ${Number(version) > PROTOCOL_VERSION ? 'client' : 'edge'}.`);
      socket.terminate();
      this.refused(this.refusal);
    });
    this.socket = socket;
    this.lastSeen = Date.now();

    socket.on('unexpected-response', (_request, response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        let code = `HTTP_${response.statusCode}`;
        let message = `the edge answered ${response.statusCode}`;
        try {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: { code?: string; message?: string } };
          code = body.error?.code ?? code;
          message = body.error?.message ?? message;
        } catch {
          // Not the edge's JSON (a proxy in between?): keep the status.
        }
        // An edge from before BIND wants the connect's own tunnel.
        if (this.options.bindOnly === true && code === 'INVALID_REQUEST' && message.includes('"port"')) message = NO_BIND;
        this.refusal = new TunnelRefusedError(response.statusCode ?? 0, code, message);
        socket.terminate();
        this.refused(this.refusal);
      });
    });
    socket.on('open', () => {
      this.socketOpened = true;
      this.agentAnswerUnproven = false;
      this.lastSeen = Date.now();
    });
    socket.on('ping', () => {
      this.lastSeen = Date.now();
    });
    socket.on('message', (data: Buffer, isBinary: boolean) => this.onMessage(data, isBinary));
    socket.on('error', (error: NodeJS.ErrnoException) => {
      // 'close' follows and decides what happens next; it names this cause (a certificate problem in full).
      this.socketError = describeTlsError(error) ?? describeLookupFailure(error.code, agentUrl.href) ?? error.code ?? error.message;
    });
    socket.on('close', (code: number, reason: Buffer) => this.onClose(socket, code, reason.toString('utf8')));
    this.startWatchdog();
  }

  /**
   * Refusals that another edge, or the same one a little later, may not repeat: rate limits and 5xx
   * (STORE_UNAVAILABLE: a cluster's shared store is down); and, once the tunnel has been up with several
   * edges, the tunnel cap, which the session on the edge just lost may hold until its grace runs out.
   */
  private transient(error: TunnelRefusedError): boolean {
    if (error.status === 429 || error.status >= 500) return true;
    // This client's other session is on that edge already: another edge may take this one.
    if (error.code === 'ALREADY_ATTACHED') return true;
    return this.everReady && this.endpoints.length > 1 && error.code === 'TUNNEL_LIMIT_REACHED';
  }

  private refused(error: TunnelRefusedError): void {
    // The close handler moves on to the next edge, or backs off, and names this refusal.
    if (this.transient(error)) return;
    // A final refusal: retrying cannot fix a bad token, a name another account owns or a full plan.
    if (this.firstConnect !== null) {
      const { reject } = this.firstConnect;
      this.firstConnect = null;
      this.stopped = true;
      this.clearTimers();
      this.closeLocalHop();
      reject(error);
      return;
    }
    this.finish({ reason: `${error.code}: ${error.message}`, code: error.code, byUser: false });
  }

  private onClose(socket: WebSocket, code: number, reason: string): void {
    if (this.socket !== socket) return;
    // The edge closed the connection of a client that is leaving: close() follows, nothing reconnects.
    if (this.leaving) return;
    this.socket = null;
    this.ended(code, reason);
  }

  /** The connection to the current endpoint ended (or never opened): stop, move on, or back off. */
  private ended(code: number, reason: string): void {
    this.publicUrlValue = null;
    this.failStreams();
    if (this.stopped) return;
    const goAway = this.goAway;
    const goAwayCode = goAway?.code ?? (code >= CLOSE_CODE_BASE && code < CLOSE_CODE_BASE + 100 ? code - CLOSE_CODE_BASE : 0);
    if (FINAL_GOAWAY_CODES.has(goAwayCode)) {
      const message = goAway?.message ?? reason;
      this.finish({ reason: message === '' ? GOAWAY_NAMES[goAwayCode]! : message, code: GOAWAY_NAMES[goAwayCode] ?? 'CLOSED', byUser: false });
      return;
    }
    const endpoint = this.endpoints[this.endpointIndex % this.endpoints.length]!;
    // The next connect asks the edge again: it may have restarted with another agent endpoint.
    instanceAnswers.delete(agentKey(endpoint));
    if (this.agentAnswerUnproven && this.refusal === null && goAway === null) {
      // Another connection's answer that this one never reached: asked again before it counts as a failure.
      this.agentAnswerUnproven = false;
      this.connect(true);
      return;
    }
    const cause = this.failureCause(goAway, code, reason);
    if (this.readyEdge !== null && this.lossCause === null) this.lossCause = cause;
    this.failuresInRound++;
    this.roundCauses.push(`${endpointLabel(endpoint)}: ${cause}`);
    const said = goAway?.message ?? (this.refusal === null ? this.lostReason(endpoint, code, reason) : `the edge at ${endpointLabel(endpoint)} refused: ${cause}`);
    if (this.failuresInRound < this.endpoints.length) {
      // Another edge is untried since the last failure round: no reason to wait before trying it.
      this.endpointIndex = (this.endpointIndex + 1) % this.endpoints.length;
      const next = this.endpoints[this.endpointIndex]!;
      this.reconnecting({ attempt: this.attempt + 1, delayMs: 0, reason: said, edge: endpointLabel(next), refusal: this.refusal?.code ?? null });
      this.connect();
      return;
    }
    if (!this.everReady && this.firstConnect !== null && this.options.keepTrying !== true) {
      // Every edge failed before a first READY: nothing to keep alive yet.
      const { reject } = this.firstConnect;
      this.firstConnect = null;
      this.stopped = true;
      this.clearTimers();
      this.closeLocalHop();
      if (this.endpoints.length > 1) reject(new Error(`cannot connect to any edge: ${this.roundCauses.join('; ')}`));
      else if (this.refusal !== null) reject(this.refusal);
      else reject(new Error(`cannot connect to the edge at ${endpointLabel(endpoint)}: ${this.socketError ?? this.closedBeforeReady(code, reason)}`));
      return;
    }
    this.failuresInRound = 0;
    this.roundCauses = [];
    this.endpointIndex = (this.endpointIndex + 1) % this.endpoints.length;
    this.scheduleReconnect(said, this.refusal?.code ?? null);
  }

  /** A connection that closed before READY without a refusal or a socket error, in words. */
  private closedBeforeReady(code: number, reason: string): string {
    if (reason !== '') return reason;
    // Accepted, then dropped without a close frame: the edge (or a proxy in front of it) cut it, not DNS or TCP.
    if (this.socketOpened) return `the edge accepted the connection, then it closed before the tunnel was ready (${this.closeDetail(code)})`;
    return `the connection closed (${code})`;
  }

  /** The WebSocket's close code, and how its TCP connection ended when that came from the far side. */
  private closeDetail(code: number): string {
    return `WebSocket close ${code}${this.transportEnd === null ? '' : `; ${this.transportEnd}`}`;
  }

  /** Why a connection ended, short: "GOAWAY SHUTDOWN: ...", "ECONNREFUSED", "STORE_UNAVAILABLE: ...". */
  private failureCause(goAway: { code: number; message: string } | null, code: number, reason: string): string {
    if (this.refusal !== null) return `${this.refusal.code}: ${this.refusal.message}`;
    if (goAway !== null) return `GOAWAY ${GOAWAY_NAMES[goAway.code] ?? goAway.code}${goAway.message === '' ? '' : `: ${goAway.message}`}`;
    if (this.socketError !== null) return this.socketError;
    return reason === '' ? `connection lost, WebSocket close ${code}` : reason;
  }

  /** What happened to a connection, said once: "the edge at URL is unreachable (ECONNREFUSED)". */
  private lostReason(endpoint: EdgeEndpoint, code: number, reason: string): string {
    if (reason !== '') return reason;
    if (this.socketError !== null) return `the edge at ${endpointLabel(endpoint)} is unreachable (${this.socketError})`;
    return `the connection to the edge at ${endpointLabel(endpoint)} dropped (${this.closeDetail(code)})`;
  }

  private scheduleReconnect(reason: string, refusal: string | null): void {
    this.attempt++;
    const min = this.options.minBackoffMs ?? 250;
    const max = this.options.maxBackoffMs ?? 15_000;
    const ceiling = Math.min(max, min * 2 ** Math.min(this.attempt - 1, 16));
    // Full jitter between half and all of the ceiling: clients dropped together do not return together.
    const delayMs = Math.round(ceiling / 2 + Math.random() * (ceiling / 2));
    const next = this.endpoints[this.endpointIndex % this.endpoints.length]!;
    this.reconnecting({ attempt: this.attempt, delayMs, reason, edge: endpointLabel(next), refusal });
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      if (!this.stopped) this.connectAfterResolving();
    }, delayMs);
  }

  private finish(info: ClosedInfo): void {
    if (this.stopped) return;
    this.stopped = true;
    this.clearTimers();
    this.socket?.terminate();
    this.failStreams();
    this.closeLocalHop();
    // A final GOAWAY before the first READY (the name taken over at once, the token revoked meanwhile):
    // whoever waits on start() learns it too, not only the 'closed' listeners.
    const first = this.firstConnect;
    this.firstConnect = null;
    first?.reject(new Error(`the edge closed the tunnel before it was ready: ${info.code}: ${info.reason}`));
    for (const tunnel of this.bound.values()) tunnel.finish(info);
    this.emit('closed', info);
  }

  private startWatchdog(): void {
    if (this.watchdog !== null) return;
    const silence = this.options.silenceTimeoutMs ?? 45_000;
    this.watchdog = setInterval(() => {
      const socket = this.socket;
      if (socket !== null && socket.readyState === WebSocket.OPEN && Date.now() - this.lastSeen > silence) socket.terminate();
    }, Math.min(10_000, silence / 2));
    this.watchdog.unref();
  }

  private clearTimers(): void {
    if (this.watchdog !== null) clearInterval(this.watchdog);
    if (this.reconnectTimer !== null) clearTimeout(this.reconnectTimer);
    this.watchdog = null;
    this.reconnectTimer = null;
  }

  private failStreams(): void {
    // Frames not yet sent belong to the old connection's streams: never send them on a new one.
    for (const stream of this.streams.values()) stream.tunnelClosed();
    this.streams.clear();
    this.blocked.clear();
    this.outbox = [];
    this.turnEndStreams = [];
  }

  // ---- frames ---------------------------------------------------------------------------------------

  private onMessage(data: Buffer, isBinary: boolean): void {
    this.lastSeen = Date.now();
    try {
      if (!isBinary) throw new ProtocolError('text messages are not part of the protocol');
      this.dispatch(decode(data));
    } catch (error) {
      this.protocolError(error instanceof ProtocolError ? error.message : `internal error: ${(error as Error).message}`);
    }
  }

  private dispatch(frame: Frame): void {
    switch (frame[0]) {
      case FrameType.READY:
        this.onReady(frame[2], frame[3], frame[4]);
        return;
      case FrameType.OPEN: {
        const [, id, requestId, method, target, headers, clientAddress, body, end, upgrade, tunnelId] = frame;
        if (this.streams.has(id)) throw new ProtocolError(`OPEN for stream ${id}, which is already open`);
        if (body !== null && body.byteLength > 0) this.receiveConnection(body.byteLength);
        let host: StreamHost & { stats: { requests: number } } = this;
        if (tunnelId !== undefined && tunnelId !== 0) {
          const tunnel = this.bound.get(tunnelId);
          if (tunnel === undefined || tunnel.stopped) {
            // Its UNBOUND or this client's close crossed the OPEN: refused, its body's credit returned.
            if (body !== null && body.byteLength > 0) this.consumedConnection(body.byteLength);
            this.send(encode([FrameType.RESET, id, ResetCode.REFUSED, `tunnel ${tunnelId} is not served by this client`]));
            return;
          }
          host = tunnel;
        } else if (this.options.bindOnly === true) {
          throw new ProtocolError('OPEN for tunnel 0, which this connection does not have');
        }
        const request = { requestId, method, path: target, headers, clientAddress, replayOf: null, upgrade };
        host.stats.requests++;
        const stream = new ClientHttpStream(id, host, request);
        this.streams.set(id, stream);
        stream.start(body, end);
        return;
      }
      case FrameType.DATA: {
        const chunk = frame[2];
        const size = chunk === null ? 0 : chunk.byteLength;
        if (size > 0) this.receiveConnection(size);
        const stream = this.streams.get(frame[1]);
        if (stream === undefined) {
          if (size > 0) this.consumedConnection(size);
          return;
        }
        stream.onRequestData(chunk, frame[3]);
        return;
      }
      case FrameType.TRAILERS:
        this.streams.get(frame[1])?.onRequestTrailers(frame[2]);
        return;
      case FrameType.WINDOW:
        if (frame[1] === 0) {
          this.connectionSend.grant(frame[2]);
          // Cleared only when it holds something: every clear of a Set makes V8 a new table linked from the
          // old one (see src/key-table.ts), and this runs for every connection WINDOW.
          if (this.blocked.size > 0) {
            const waiting = [...this.blocked];
            this.blocked.clear();
            for (const stream of waiting) stream.flush();
          }
        } else {
          this.streams.get(frame[1])?.onWindow(frame[2]);
        }
        return;
      case FrameType.RESET:
        this.streams.get(frame[1])?.onReset(frame[2], frame[3]);
        return;
      case FrameType.GOAWAY:
        this.goAway = { code: frame[2], message: frame[3] };
        return;
      case FrameType.ACCEPT: {
        const [, id, tunnelId, requestId, clientAddress, clientPort, serverAddress, serverPort] = frame;
        if (this.streams.has(id)) throw new ProtocolError(`ACCEPT for stream ${id}, which is already open`);
        const tunnel = this.bound.get(tunnelId);
        if (tunnel === undefined || tunnel.stopped || tunnel.kind === 'http') {
          this.send(encode([FrameType.RESET, id, ResetCode.REFUSED, `tunnel ${tunnelId} takes no TCP connections here`]));
          return;
        }
        tunnel.stats.requests++;
        const preamble = tunnel.options.proxyProtocol === true ? proxyHeader(clientAddress, clientPort, serverAddress, serverPort) : null;
        this.streams.set(id, new ClientRawStream(id, requestId, tunnel, tunnel.routes.defaultTarget, clientAddress, clientPort, preamble));
        return;
      }
      case FrameType.BOUND:
        this.onBound(frame[2], frame[3], frame[4], frame[5], frame[6], frame[7] ?? 0);
        return;
      case FrameType.UNBOUND:
        this.onUnbound(frame[2], frame[3], frame[4]);
        return;
      case FrameType.NOTICE:
        this.onNotice(frame[2], frame[3]);
        return;
      default:
        throw new ProtocolError(`an edge may not send frame type ${frame[0]}`);
    }
  }

  private receiveConnection(size: number): void {
    if (size > this.settings.maxFrameBody) throw new ProtocolError(`a body chunk of ${size} bytes exceeds maxFrameBody`);
    if (!this.connectionReceive.receive(size)) throw new ProtocolError('the edge exceeded the connection window');
  }

  /** NOTICE: the store's state is reported on a change only; an unknown code as the edge's words. */
  private onNotice(code: number, message: string): void {
    const edge = endpointLabel(this.endpoints[this.endpointIndex % this.endpoints.length]!);
    if (code === NoticeCode.STORE_UNAVAILABLE || code === NoticeCode.STORE_AVAILABLE) {
      const available = code === NoticeCode.STORE_AVAILABLE;
      if (available === this.storeAvailable) return;
      this.storeAvailable = available;
      this.emit('store', { available, edge, message });
      return;
    }
    this.emit('notice', { code, message, edge });
  }

  private onReady(subdomain: string, publicUrl: string, settings: Settings): void {
    this.settings = settings;
    this.attachment = settings.attachment ?? null;
    this.inCluster = settings.clusterEdges !== undefined;
    this.deliveredEvents = this.inCluster ? (this.options.deliveredEvents ?? null) : null;
    this.connectionSend = new SendCredit(settings.connectionWindow);
    this.connectionReceive = new ReceiveWindow(settings.connectionWindow);
    this.subdomain = subdomain;
    this.publicUrlValue = publicUrl;
    const reconnected = this.everReady;
    this.everReady = true;
    // A connection of bound tunnels has reached an edge that serves them at its first BOUND: one that
    // refuses them all (ALREADY_ATTACHED) must keep moving on, and backing off, as a refused connect does.
    if (this.options.bindOnly !== true) this.connectionServes();
    const edge = endpointLabel(this.endpoints[this.endpointIndex % this.endpoints.length]!);
    const movedFrom = this.readyEdge !== null && this.readyEdge !== edge ? { edge: this.readyEdge, cause: this.lossCause ?? 'connection lost' } : null;
    this.readyEdge = edge;
    this.lossCause = null;
    this.lastMove = movedFrom;
    const info: ReadyInfo = { subdomain, publicUrl, settings, reconnected, edge, movedFrom };
    if (this.firstConnect !== null) {
      const { resolve } = this.firstConnect;
      this.firstConnect = null;
      resolve(info);
    }
    this.emit('ready', info);
    // A new connection: no BIND of the last one will be answered.
    for (const tunnel of this.bound.values()) tunnel.binding = false;
    if (this.bound.size > 0) this.bindAll();
  }

  // ---- StreamHost -----------------------------------------------------------------------------------

  pool(target: LocalTarget): TargetPool {
    // Routes decide targets; anything outside them is never dialled.
    return this.localHop.pool(target);
  }

  /**
   * Frames go out batched: those produced during a loop turn are sent together in its check phase, with
   * the TCP socket corked, so a turn costs one write however many responses it carries. Even the turn's
   * first frame waits for it: sent at once, it cost a busy tunnel a second write every turn.
   */
  send(frame: Buffer): void {
    this.outbox.push(frame);
    this.scheduleFlush();
  }

  atTurnEnd(stream: TurnEndStream): void {
    this.turnEndStreams.push(stream);
    this.scheduleFlush();
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(this.flushNow);
  }

  /**
   * Observers (the inspector, the request log) get a completed exchange once the turn's frames are
   * written, never before: what they do with it is not on the path of the answer it records. At one
   * connection that took 10-20 µs off each answer (bench/RESULTS.md, issue 25's tuning log).
   */
  recordAfterTurn(owner: ExchangeOwner, exchange: Exchange): void {
    this.recordedOwners.push(owner);
    this.recordedExchanges.push(exchange);
    this.scheduleFlush();
  }

  private flush(): void {
    this.writeTurn();
    if (this.recordedExchanges.length === 0) return;
    const owners = this.recordedOwners;
    const exchanges = this.recordedExchanges;
    this.recordedOwners = [];
    this.recordedExchanges = [];
    for (let i = 0; i < exchanges.length; i++) owners[i]!.deliverExchange(exchanges[i]!);
  }

  private writeTurn(): void {
    if (this.turnEndStreams.length > 0) {
      // What these streams send joins the outbox written below, corked with the turn's other frames.
      const streams = this.turnEndStreams;
      this.turnEndStreams = [];
      for (const stream of streams) stream.turnEnded();
    }
    this.flushScheduled = false;
    // A stream resumed above may have taken more bytes at once: they wait for the next turn's end.
    if (this.turnEndStreams.length > 0) this.scheduleFlush();
    if (this.outbox.length === 0) return;
    const frames = this.outbox;
    this.outbox = [];
    const socket = this.socket;
    if (socket === null || socket.readyState !== WebSocket.OPEN) return;
    // `ws` has no cork of its own; its socket is the documented-by-use `_socket` (a net.Socket).
    const raw = (socket as unknown as { _socket?: { cork(): void; uncork(): void } })._socket;
    raw?.cork();
    for (const frame of frames) socket.send(frame);
    raw?.uncork();
  }

  consumedConnection(bytes: number): void {
    const grant = this.connectionReceive.consume(bytes);
    if (grant > 0) this.send(encode([FrameType.WINDOW, 0, grant]));
  }

  endStream(stream: FlushableStream): void {
    this.streams.deleteIf(stream.id, stream);
    this.blocked.delete(stream);
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
    this.recordAfterTurn(this, exchange);
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
    const socket = this.socket;
    if (socket === null) return;
    socket.send(encode([FrameType.GOAWAY, 0, GoAwayCode.PROTOCOL_ERROR, message]));
    socket.close(CLOSE_CODE_BASE + GoAwayCode.PROTOCOL_ERROR, closeReason(message));
  }
}
