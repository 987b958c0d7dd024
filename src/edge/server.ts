/**
 * The edge (DESIGN.md section 1): two listeners. The public listener (node:net / node:tls with llhttp
 * and our own response writer, src/http1) serves every host on the edge's port: host dispatch sends API
 * hosts to the /api/v1 router and the dashboard, tunnel hosts to their session. The agent listener
 * (uWebSockets.js, a port of its own, src/edge/agent-listener.ts) takes the tunnel clients' WebSockets
 * at /api/v1/connect; its URL is advertised by `GET /api/v1/instance`.
 */
import { join } from 'node:path';
import { BurrowError, ERROR_CODES, type ErrorCode } from '../errors.js';
import { VERSION } from '../version.js';
import { Api, API_SECURITY_HEADERS, errorResponse } from '../api/api.js';
import { LocalCaptureLog } from '../api/capture-log.js';
import type { ApiRequest, ApiResponse } from '../api/types.js';
import { fieldValue } from '../http1/head.js';
import type { Http1ParseError } from '../http1/parser.js';
import { ServerConnections, type Refusal, type ServerExchange, type ServerSettings } from '../http1/server.js';
import { defaultSecretKeyFile, SecretBox } from '../store/secret-box.js';
import { storePolicy } from '../store/stored-policy.js';
import { decodePolicyHeader, POLICY_HEADER } from '../protocol/policy.js';
import type { StoredPolicy } from '../protocol/policy.js';
import { CONNECT_PATH, CONNECT_TUNNEL, DEFAULT_SETTINGS, INSTANCE_ID, PROTOCOL_HEADER, PROTOCOL_VERSION, GoAwayCode, TunnelKind, type Settings, type TunnelKindValue } from '../protocol/constants.js';
import type { BindFrame } from '../protocol/codec.js';
import { CaptureStore, clusterRingIds } from '../store/captures.js';
import { lockDataDirectory } from '../store/data-lock.js';
import { FreeSpace, type MinFreeSpace } from '../store/free-space.js';
import { WriteFailures } from '../store/write-failures.js';
import type { SessionOptions } from '../store/sessions.js';
import { Store, type StoreOptions } from '../store/store.js';
import type { HttpRequest, HttpResponse, us_socket_context_t, WebSocket } from '../uws.js';
import { AccessLog } from './access-log.js';
import { AdminServer, type AdminAddress } from './admin.js';
import { AgentListener, uwsFields, uwsOrigin } from './agent-listener.js';
import { TrustedProxies, requestOrigin } from './client-address.js';
import { loadDashboard, serveDashboard } from './dashboard.js';
import { readPublicRequestHead, type PublicRequestHead } from './headers.js';
import { apiHostProblem, HostDispatch } from './host.js';
import { OfflineQueue, type OfflineQueueOptions } from './offline-queue.js';
import type { EdgeMetrics } from './metrics.js';
import { EdgeObserver } from './observer.js';
import { DEFAULT_HANDSHAKE_LIMITS, PublicListener, type HandshakeLimits, type PassthroughRouter } from './public-listener.js';
import { gatherBody, requestFraming } from './request-framing.js';
import { TunnelRegistry, type EdgeRegistry } from './registry.js';
import type { AccountStore, UsageCounter } from '../store/account-store.js';
import { ClusterConnection } from './cluster/connection.js';
import { ClusterOfflineQueue } from './cluster/offline-stream.js';
import { ClusterRegistry, storeNotice, type ClusterTimings } from './cluster/registry.js';
import type { ClusterOptions } from './cluster/types.js';
import { errorJson, statusLine, writeOwn, writePublicError } from './responses.js';
import { TunnelSession, type SessionDeps, type SocketData } from './session.js';
import { TunnelConnection, type TunnelBinder } from './connection.js';
import { parsePortRange, TcpPorts, tcpName, type PortRange } from './tcp-ports.js';
import { AddressRule } from './policy/address-rule.js';
import { EdgeRawStream } from './raw-stream.js';
import { peerAddress } from './client-address.js';
import type { Socket } from 'node:net';
import { HttpRedirectListener } from './http-redirect.js';
import { PublicTls, type CertificateSummary, type TlsOptions } from './tls.js';
import { Turn } from './turn.js';
import { ClusterHop, NOT_OWNER, type ClusterHopOptions } from './cluster/hop.js';
import type { TunnelPolicy } from './policy/decide.js';
import { TunnelPolicies } from './policy/tunnel-policies.js';
import { PolicyGate, type GatedRequest, type RejectedRequest, type RejectionRing } from './policy-gate.js';

export interface EdgeOptions {
  dataDir: string;
  /** The key that seals policy secrets at rest (docs/policies.md); `<dataDir>/secret.key` by default, created on first start. */
  secretKeyFile?: string;
  /** Address to bind; 127.0.0.1 by default. */
  host?: string;
  /** Port to bind; 0 picks a free one. */
  port?: number;
  /**
   * The agent listener's port (the tunnel clients' WebSockets); 0 picks a free one (the default: it is
   * advertised by GET /api/v1/instance). Bound on `host`.
   */
  agentPort?: number;
  /**
   * The agent endpoint as advertised to clients (`agent_url` of GET /api/v1/instance), when it is not
   * this edge's own host on `agentPort` nor a front proxy's route at `publicScheme`/`publicPort`: e.g.
   * `wss://agent.example.com/api/v1/connect` on a name of its own.
   */
  agentUrl?: string;
  /** The public listener's HTTP limits and timeouts (head size and lines, pipelining, slowloris bounds). */
  http?: Partial<ServerSettings>;
  /** TLS handshakes in progress and waiting per client address (docs/security.md). */
  handshakes?: Partial<HandshakeLimits>;
  /** The API answers on <domain> and api.<domain>, tunnels on <sub>.<domain>. */
  domain?: string;
  /**
   * The API's and the dashboard's own host, on a registrable domain other than the tunnels' (docs/deploy.md):
   * the dashboard is served there only, and the edge's URL names it. A lower-case DNS name (see
   * `apiHostProblem` in src/edge/host.ts).
   */
  apiHost?: string;
  /** API requests per minute per token (spec section 8). */
  rateLimit?: number;
  rateWindowMs?: number;
  /** Failed authentications per window per failing credential (token id, or client address). */
  authFailureLimit?: number;
  /** The edge's own timeout for a local response (504 LOCAL_TIMEOUT). */
  requestTimeoutMs?: number;
  /** Largest public request body (413 beyond). */
  maxRequestBody?: number;
  /** Largest API request body (413 beyond). */
  apiBodyLimit?: number;
  /** How long a dropped tunnel's subdomain stays its owner's. */
  graceMs?: number;
  capture?: boolean;
  captureBodyLimit?: number;
  /** Commit every capture batch with an fsync (power-loss durability, ~0.5-1 ms per commit here). */
  captureFsync?: boolean;
  /**
   * The free-space floor of the data directory's file system (`--min-free-disk`): below it captures are
   * skipped and held webhooks refused. By default the larger of 256 MiB and 5% (src/store/free-space.ts).
   */
  minFreeDisk?: MinFreeSpace;
  /** How often the free space is read (statfs); once a second by default. */
  freeSpaceCheckMs?: number;
  /** Largest WebSocket message on the agent listener (tunnel frames). */
  maxWebSocketMessage?: number;
  /**
   * TCP tunnels (docs/tcp.md): the public ports the edge may give them (`--tcp-ports 20000-20999`, or a
   * parsed range), and the host printed in `tcp://HOST:PORT` (the domain by default). Off when absent.
   */
  tcp?: { ports: string | PortRange; host?: string };
  settings?: Partial<Settings>;
  plans?: StoreOptions['plans'];
  /** How public URLs are printed: scheme and port (the edge's own port by default). */
  publicScheme?: 'http' | 'https';
  publicPort?: number;
  /** Dashboard session lifetimes and cap per token (docs/dashboard.md): 12 h idle, 7 days at most, 20 by default. */
  dashboardSessions?: SessionOptions;
  /** Dashboard sign-ins per minute per token and per client address (10 and 30 by default). */
  signInLimits?: { perToken?: number; perAddress?: number };
  /** Serve HTTPS and wss:// (both listeners) with these certificates (src/edge/tls.ts); public URLs are then https. */
  tls?: TlsOptions;
  /** With `tls`: a plain-HTTP port that redirects to HTTPS and serves ACME challenges from a directory. */
  httpRedirect?: { port: number; acmeWebroot?: string };
  /**
   * Send HSTS (`HSTS_HEADER`) on the API host's and the dashboard's answers, never on a tunnel's; needs
   * `tls` or an https `publicScheme` (a browser ignores the header over plain HTTP).
   */
  hsts?: boolean;
  region?: string;
  /** Peers (CIDR blocks) whose X-Forwarded-For/-Proto/-Host and PROXY v2 header are believed
   * (src/edge/client-address.ts); nobody's by default. */
  trustProxy?: string | readonly string[];
  /** How often expired captures are swept. */
  captureSweepMs?: number;
  /** Held webhooks of reserved subdomains in `queue` mode (docs/offline.md): retry timings and limits. */
  offlineQueue?: OfflineQueueOptions;
  log?: (line: string) => void;
  /** Serve GET /metrics and GET /healthz on this address (src/edge/admin.ts); off when absent. */
  admin?: AdminAddress;
  /** One JSON line per public request to this file, or to standard output for '-'. */
  accessLog?: string;
  /**
   * Cluster mode (docs/cluster.md): accounts and the tunnel registry in this Redis, shared with the other
   * edges; the data directory keeps this edge's captures and offline queue. An empty `advertise` means
   * this edge's own listener (http://HOST:PORT once bound: tests on port 0).
   */
  cluster?: ClusterOptions;
  /** Cluster mode's lease and cache timings (tests shrink them); the defaults are in src/edge/cluster/registry.ts. */
  clusterTimings?: Partial<ClusterTimings>;
  /**
   * Cluster mode's internal hop (src/edge/cluster/hop.ts): public requests for tunnels other edges hold
   * are forwarded to them, and other edges' internal calls are answered. Built from the lease registry
   * in cluster mode; tests hand it a directory of their own.
   */
  clusterHop?: ClusterHopOptions;
}

const TICK_MS = 250;
/**
 * One year, and deliberately without includeSubDomains (or preload): the API host is the apex of the
 * tunnel domain, and every <sub>.<domain> belongs to a tunnel whose local app decides its own headers
 * (docs/deploy.md, "HSTS").
 */
export const HSTS_HEADER: readonly [string, string] = ['strict-transport-security', 'max-age=31536000'];
const NO_HEADERS: readonly (readonly [string, string])[] = [];
const RETRY_SOON: [string, string][] = [['retry-after', '1']];

export class Edge {
  /** The local LMDB: captures' accounts index, the offline queue, and the accounts too on a single edge. */
  readonly store: Store;
  /** Accounts, tokens, reservations, sessions, limiters: `store` on one edge, Redis in cluster mode. */
  readonly accounts: AccountStore;
  /** The lease registry in cluster mode (also `registry`), else null. */
  readonly cluster: ClusterRegistry | null = null;
  private readonly clusterConnection: ClusterConnection | null;
  /** Gives the data directory back (one edge per directory, src/store/data-lock.ts). */
  private readonly releaseDataDir: () => void;
  readonly captures: CaptureStore;
  /** The free-space floor and the failed writes of both LMDB environments (issue 23). */
  readonly space: FreeSpace;
  readonly writeFailures: WriteFailures;
  /** Usage per account: this edge's LMDB on one edge, added up in Redis in cluster mode. */
  readonly usage: UsageCounter;
  readonly registry: EdgeRegistry;
  readonly offline: OfflineQueue;
  /** In cluster mode, webhooks held in Redis for names no edge holds (docs/offline.md, "In cluster mode"). */
  private clusterOffline: ClusterOfflineQueue | null = null;
  readonly api: Api;
  readonly domain: string;
  readonly settings: Settings;
  /** The public listener's HTTP connections, its listener and its certificates (null on plain HTTP). */
  private readonly connections: ServerConnections;
  private readonly publicListener: PublicListener;
  private readonly tls: PublicTls | null;
  private readonly agent: AgentListener;
  private redirect: HttpRedirectListener | null = null;
  private readonly hosts: HostDispatch;
  private readonly deps: SessionDeps;
  private timer: NodeJS.Timeout | null = null;
  private apiInFlight = 0;
  private closing: Promise<void> | null = null;
  private ticks = 0;
  port = 0;
  /** Logs, metrics and the access log; `draining` flips /healthz to 503. */
  readonly observer: EdgeObserver;
  private admin: AdminServer | null = null;
  draining = false;
  /** The stores are closing or closed: requests still arriving on open connections are cut (issue 17). */
  private stopped = false;

  private readonly maxRequestBody: number;
  private readonly apiBodyLimit: number;
  private readonly publicScheme: string;
  /** Added to every answer of the API host: API_SECURITY_HEADERS, and HSTS when asked for. */
  private readonly apiHostHeaders: readonly (readonly [string, string])[];
  /** Added to the dashboard's files, which carry their own CSP and framing rules: HSTS when asked for. */
  private readonly dashboardHeaders: readonly (readonly [string, string])[];
  private readonly proxies: TrustedProxies | null;
  private readonly log: (line: string) => void;
  /** The internal hop, in cluster mode; null on a lone edge. */
  readonly hop: ClusterHop | null;
  /** Live tls (passthrough) tunnels: while there are none, TLS connections are terminated unread. */
  private passthroughTunnels = 0;
  /** TCP tunnels' public ports (`tcp` option), or null: the edge has none. */
  readonly tcp: TcpPorts | null = null;
  /** Seals and opens policy secrets and sign-in cookies (src/store/secret-box.ts). */
  readonly secrets: SecretBox;
  /** The tunnels' compiled policies (docs/policies.md), and where the public listener applies them. */
  readonly policies: TunnelPolicies;
  private readonly gate: PolicyGate;

  private constructor(
    private readonly options: EdgeOptions,
    cluster: ClusterConnection | null,
    /** EdgeMetrics when `--admin` serves them (prom-client is loaded only then). */
    Metrics: typeof EdgeMetrics | null,
  ) {
    this.clusterConnection = cluster;
    this.domain = (options.domain ?? 'localhost').toLowerCase();
    if (options.apiHost !== undefined) {
      const problem = apiHostProblem(options.apiHost, this.domain);
      if (problem !== null) throw new Error(problem);
    }
    this.hosts = new HostDispatch(this.domain, options.apiHost?.toLowerCase());
    this.log = options.log ?? ((line) => process.stderr.write(`${line}\n`));
    this.settings = { ...DEFAULT_SETTINGS, ...options.settings };
    this.maxRequestBody = options.maxRequestBody ?? 100 * 1024 * 1024;
    this.apiBodyLimit = options.apiBodyLimit ?? 64 * 1024;
    this.publicScheme = options.publicScheme ?? (options.tls === undefined ? 'http' : 'https');
    if (options.hsts === true && this.publicScheme !== 'https') {
      throw new Error('HSTS is for an edge served over HTTPS: give it a TLS certificate or an https public URL');
    }
    this.dashboardHeaders = options.hsts === true ? [HSTS_HEADER] : NO_HEADERS;
    this.apiHostHeaders = [...API_SECURITY_HEADERS, ...this.dashboardHeaders];
    // In cluster mode the hop is built on the lease registry (below); `clusterHop` is for tests of the hop alone.
    this.hop = options.clusterHop === undefined || cluster !== null ? null : new ClusterHop(options.clusterHop, this.log);
    this.proxies = options.trustProxy === undefined ? null : TrustedProxies.parse(options.trustProxy);
    // Certificates are checked before the data directory is taken: a wrong path costs nothing to undo.
    this.tls = options.tls === undefined ? null : new PublicTls(options.tls);
    this.agent = new AgentListener(
      {
        connect: (res, req, context) => this.connectTunnel(res, req, context),
        opened: (ws) => this.tunnelOpened(ws),
        other: (res, req) => this.agentNotFound(res, req),
        stopped: () => this.stopped,
      },
      options.maxWebSocketMessage ?? 4 * 1024 * 1024,
      options.tls,
    );
    this.connections = new ServerConnections(
      {
        onRequest: (exchange) => this.onRequest(exchange),
        refusal: (error) => this.refusal(error),
        onInternalError: (error) => this.log(`public request: ${error.stack ?? error.message}`),
      },
      options.http,
    );
    const tcpRange = options.tcp === undefined ? null : typeof options.tcp.ports === 'string' ? parsePortRange(options.tcp.ports) : options.tcp.ports;
    if (typeof tcpRange === 'string') throw new Error(`--tcp-ports: ${tcpRange}`);
    if (tcpRange !== null && cluster !== null) throw new Error('--tcp-ports is not available in cluster mode yet (docs/tcp.md, "Cluster mode")');
    // TLS passthrough (docs/tcp.md): while a tls tunnel is live, a ClientHello naming it is not terminated.
    const router: PassthroughRouter | null =
      this.tls === null || cluster !== null
        ? null
        : { route: (name, socket, hello, client) => this.routePassthrough(name, socket, hello, client), active: () => this.passthroughTunnels > 0 };
    this.publicListener = new PublicListener(this.connections, this.tls, { ...DEFAULT_HANDSHAKE_LIMITS, ...options.handshakes }, router);
    // The dashboard's files are read now, before the data directory is taken, as certificates are.
    loadDashboard();
    // The secret key too: a key file others can read is refused before anything is taken.
    this.secrets = SecretBox.open(options.secretKeyFile ?? defaultSecretKeyFile(options.dataDir));
    this.policies = new TunnelPolicies(this.secrets);
    this.releaseDataDir = lockDataDirectory(options.dataDir);
    this.writeFailures = new WriteFailures(this.log);
    // Read before anything is served: an edge starting on a full disk says so first.
    this.space = new FreeSpace(options.dataDir, options.minFreeDisk, this.log, options.freeSpaceCheckMs);
    this.space.start();
    try {
      this.store = Store.open(options.dataDir, { ...(options.plans === undefined ? {} : { plans: options.plans }), failures: this.writeFailures });
      this.captures = CaptureStore.open(join(options.dataDir, 'captures'), {
        fsync: options.captureFsync === true,
        failures: this.writeFailures,
        space: this.space,
        log: this.log,
        // Capture ids must not repeat across the edges of a cluster (src/edge/cluster/captures.ts).
        ...(cluster !== null
          ? { ringIds: clusterRingIds(cluster.nodeNumber) }
          : options.clusterHop?.ringIds === undefined
            ? {}
            : { ringIds: options.clusterHop.ringIds }),
      });
    } catch (error) {
      this.space.stop();
      this.releaseDataDir();
      throw error;
    }
    this.accounts = cluster?.accounts ?? this.store;
    this.usage = this.accounts.usageCounter();
    if (cluster !== null && options.cluster !== undefined) {
      this.cluster = new ClusterRegistry({
        leases: cluster.leases,
        subscriber: cluster.subscriber,
        accounts: this.accounts,
        local: this.store,
        self: { nodeId: options.cluster.nodeId, advertise: options.cluster.advertise, boot: ClusterRegistry.newBoot() },
        graceMs: options.graceMs ?? 60_000,
        publicUrlOf: (subdomain) => this.publicUrl(subdomain),
        log: this.log,
        ...(options.clusterTimings === undefined ? {} : { timings: options.clusterTimings }),
      });
      this.registry = this.cluster;
      // Every connected client hears when this edge loses its store and when it is back (NOTICE).
      this.cluster.on('store-status', (status) => {
        const [code, message] = storeNotice(status);
        // Once per connection, however many of its tunnels the registry holds.
        const connections = new Set<TunnelConnection>();
        for (const session of this.registry.sessions()) connections.add(session.connection);
        for (const connection of connections) connection.notice(code, message);
      });
      this.hop = new ClusterHop({ directory: this.cluster, local: this.cluster, secret: cluster.secret }, this.log);
      this.cluster.peerLink = this.hop.peerLink;
      const offline = new ClusterOfflineQueue(cluster.queue, this.accounts, this.cluster, this.log, { ...options.offlineQueue, secrets: this.secrets });
      this.clusterOffline = offline;
      this.hop.offline = (exchange, request, body) => offline.takes(exchange, request, body);
    } else this.registry = new TunnelRegistry(this.store, options.graceMs ?? 60_000);
    if (tcpRange !== null) {
      this.tcp = new TcpPorts({
        host: options.host ?? '127.0.0.1',
        range: tcpRange,
        publicHost: options.tcp?.host ?? this.domain,
        proxies: this.proxies,
        registry: this.registry,
        reservation: (name) => this.accounts.getReservation(name),
        log: this.log,
      });
    }
    const metrics =
      Metrics === null
        ? null
        : new Metrics({
            tunnelsActive: () => this.registry.size,
            streamsOpen: () => this.openStreams(),
            draining: () => this.draining,
            storage: {
              freeBytes: () => this.space.freeBytes,
              minFreeBytes: () => this.space.minFreeBytes,
              low: () => this.space.low,
              quotaUse: () => this.captures.quotaUse(),
              blocksUse: () => this.captures.blocksUse(),
              skipped: () => this.captures.skipped,
              writeFailures: (kind) => this.writeFailures.count(kind),
            },
          });
    const accessLog = options.accessLog === undefined ? null : new AccessLog(options.accessLog, this.log, (lines) => metrics !== null && (metrics.accessLogDropped += lines));
    this.observer = new EdgeObserver(metrics, accessLog, this.log);
    this.offline = new OfflineQueue(
      this.store,
      this.registry,
      this.log,
      {
        ...options.offlineQueue,
        storageLow: () => this.space.low,
        secrets: this.secrets,
        signatureRejected: (rejected, accountId, answer) => this.keepQueueRejection(rejected, accountId, answer),
      },
      this.observer,
    );
    // In cluster mode the API reads every edge's captures and replays through the tunnel's edge.
    const clusterApi = this.hop === null ? null : this.hop.apiParts(new LocalCaptureLog(this.captures), this.registry);
    this.api = new Api({
      store: this.accounts,
      heldEvents: this.store.queue,
      ...(tcpRange === null ? {} : { tcpPorts: tcpRange }),
      captures: this.captures,
      ...(clusterApi === null ? {} : { captureLog: clusterApi.captureLog }),
      usage: this.usage,
      tunnels: clusterApi === null ? this.registry : clusterApi.tunnels,
      queue: this.clusterOffline === null ? this.offline : { changed: (subdomain: string) => this.changedQueue(subdomain) },
      ...(this.clusterOffline === null ? {} : { clusterQueue: this.clusterOffline }),
      writeFailures: this.writeFailures,
      instance: { build: VERSION, region: options.region ?? 'local', agentUrl: (host) => this.agentUrl(host) },
      ...(options.rateLimit === undefined ? {} : { rateLimit: options.rateLimit }),
      ...(options.rateWindowMs === undefined ? {} : { rateWindowMs: options.rateWindowMs }),
      ...(options.authFailureLimit === undefined ? {} : { authFailureLimit: options.authFailureLimit }),
      publicScheme: this.publicScheme === 'https' ? 'https' : 'http',
      publicUrlOf: (subdomain) => this.publicUrl(subdomain),
      ...(options.dashboardSessions === undefined ? {} : { sessions: options.dashboardSessions }),
      secrets: this.secrets,
      ...(options.signInLimits === undefined ? {} : { signInLimits: options.signInLimits }),
      policyChanged: (subdomain) => this.policyChanged(subdomain),
    });
    this.deps = {
      settings: this.settings,
      captures: this.captures,
      usage: this.usage,
      capture: { enabled: options.capture ?? true, bodyLimit: options.captureBodyLimit ?? 1024 * 1024 },
      requestTimeoutMs: options.requestTimeoutMs ?? 30_000,
      registry: this.registry,
      turn: new Turn(this.captures, this.log, this.observer.commitObserver),
      observer: this.observer,
      log: this.log,
    };
    this.gate = new PolicyGate({
      offline: this.offline,
      observer: this.observer,
      turn: this.deps.turn,
      captureLimit: this.deps.capture.enabled ? this.deps.capture.bodyLimit : 0,
      rejectionRing: (subdomain, accountId) => this.rejectionRing(subdomain, accountId),
      route: (exchange, request, publicFields) => this.route(exchange, request.subdomain, request.target, request.head, request.clientAddress, request.proto, false, publicFields),
      log: this.log,
    });
    if (this.cluster !== null) {
      // Another edge changed a policy, or a name's owner changed (a one-run policy travels in its lease).
      this.cluster.on('policy-changed', (subdomain) => this.refreshPolicies(subdomain));
      this.cluster.on('owner-changed', (subdomain) => {
        if (subdomain === null) this.refreshPolicies(null);
        else this.policies.forgetRemote(subdomain);
      });
    }
  }

  /** Opens the store (and joins the cluster), binds the port and starts the coarse timer. */
  static async start(options: EdgeOptions): Promise<Edge> {
    const Metrics = options.admin === undefined ? null : (await import('./metrics.js')).EdgeMetrics;
    const cluster =
      options.cluster === undefined
        ? null
        : await ClusterConnection.open(options.cluster, options.plans === undefined ? {} : { plans: options.plans }, options.log ?? ((line) => process.stderr.write(`${line}\n`)));
    let edge: Edge;
    try {
      edge = new Edge(options, cluster, Metrics);
    } catch (error) {
      await cluster?.close();
      throw error;
    }
    await edge.listen(options.host ?? '127.0.0.1', options.port ?? 8080);
    if (edge.cluster !== null) {
      if (edge.cluster.self.advertise === '') edge.cluster.self.advertise = `${edge.options.tls === undefined ? 'http' : 'https'}://${options.host ?? '127.0.0.1'}:${edge.port}`;
      try {
        await edge.cluster.start();
      } catch (error) {
        await edge.close(0);
        throw error;
      }
    }
    return edge;
  }

  /** The internal hop's secret in cluster mode (configured, or the one the first edge stored in Redis), else null. */
  get clusterSecret(): string | null {
    return this.clusterConnection?.secret ?? null;
  }

  /** The admin listener's port (GET /metrics, GET /healthz), or 0 without --admin. */
  get adminPort(): number {
    return this.admin?.port ?? 0;
  }

  /** The agent listener's port (the tunnel clients' WebSockets). */
  get agentPort(): number {
    return this.agent.port;
  }

  /** The API's base URL as users see it: on its own host with `apiHost`, else on the domain. */
  get url(): string {
    return `${this.publicScheme}://${this.options.apiHost?.toLowerCase() ?? this.domain}${this.portSuffix()}`;
  }

  publicUrl(subdomain: string): string {
    return `${this.publicScheme}://${subdomain}.${this.domain}${this.portSuffix()}`;
  }

  /**
   * Where tunnel clients connect, as `GET /api/v1/instance` tells them (`agent_url`): `agentUrl` when
   * given. Behind a front proxy
   * (`--public-url`, `--public-port`) it is the proxy's own address, which routes /api/v1/connect to the
   * agent port (deploy/); otherwise the host the client asked by (`host`, its Host header), on the agent
   * port. The scheme is wss exactly when the public one is https.
   */
  agentUrl(host: string): string {
    if (this.options.agentUrl !== undefined) return this.options.agentUrl;
    const scheme = this.publicScheme === 'https' ? 'wss' : 'ws';
    if (this.options.publicPort !== undefined) return `${scheme}://${this.domain}${this.portSuffix()}${CONNECT_PATH}`;
    let name = host.toLowerCase();
    if (name.startsWith('[')) name = name.slice(0, name.indexOf(']') + 1);
    else if (name.lastIndexOf(':') !== -1) name = name.slice(0, name.lastIndexOf(':'));
    if (name === '' || !/^[a-z0-9.\-[\]:]+$/.test(name)) name = this.domain;
    return `${scheme}://${name}:${this.agent.port}${CONNECT_PATH}`;
  }

  private portSuffix(): string {
    const port = this.options.publicPort ?? this.port;
    if ((this.publicScheme === 'http' && port === 80) || (this.publicScheme === 'https' && port === 443)) return '';
    return `:${port}`;
  }

  private async listen(host: string, port: number): Promise<void> {
    const failed = async (reason: string): Promise<never> => {
      this.publicListener.close();
      this.connections.destroyAll();
      this.agent.close();
      this.redirect?.close();
      await this.observer.close();
      await this.captures.close();
      await this.store.close();
      await this.clusterConnection?.close();
      await this.hop?.close();
      this.space.stop();
      this.releaseDataDir();
      throw new Error(reason);
    };
    await this.observer.accessLog?.ready().catch((error: Error) => failed(error.message));
    const refused = await this.bind(host, port);
    if (refused !== null) return failed(`cannot listen: ${refused}`);
    if (this.options.admin !== undefined && this.observer.metrics !== null) {
      this.admin = await AdminServer.start(this.options.admin, this.observer.metrics, () => this.draining, this.log).catch((error: Error) => failed(error.message));
    }
    this.timer = setInterval(() => this.tick(), TICK_MS);
    this.timer.unref();
  }

  private async bind(host: string, port: number): Promise<string | null> {
    try {
      await this.publicListener.listen(host, port);
      this.port = this.publicListener.port;
      await this.agent.listen(host, this.options.agentPort ?? 0);
      if (this.options.httpRedirect !== undefined) {
        this.redirect = new HttpRedirectListener({
          hosts: this.hosts,
          httpsPort: () => this.options.publicPort ?? this.port,
          ...(this.options.httpRedirect.acmeWebroot === undefined ? {} : { acmeWebroot: this.options.httpRedirect.acmeWebroot }),
        });
        await this.redirect.listen(host, this.options.httpRedirect.port);
      }
      return null;
    } catch (error) {
      return (error as Error).message;
    }
  }

  /** The plain-HTTP redirect listener's port (`httpRedirect`), or 0. */
  get httpPort(): number {
    return this.redirect?.port ?? 0;
  }

  /**
   * SIGHUP: reads the certificate files again; new TLS connections (both listeners) get the new
   * certificate, tunnels and other established connections are kept. A bad file is an error and the old
   * certificate stays.
   */
  async reloadCertificates(): Promise<CertificateSummary> {
    if (this.tls === null) throw new Error('this edge serves plain HTTP: there are no certificates to reload');
    // Both are read and checked before either changes: a bad file leaves both as they were.
    await this.agent.reload();
    return this.tls.reload();
  }

  /** The certificate in use (TLS edges only). */
  certificate(): CertificateSummary | null {
    return this.tls?.summary() ?? null;
  }

  /** One coarse timer for the whole edge: deadlines, holds, rate-limit windows, usage, retention. */
  private tick(): void {
    const now = Date.now();
    for (const session of this.registry.sessions()) session.checkDeadlines(now);
    this.ticks++;
    if (this.ticks % 4 === 0) {
      this.registry.sweep();
      if (this.options.captureFsync !== true) this.captures.sync().catch((error: Error) => this.log(`capture sync failed: ${error.message}`));
      this.usage.flush().catch((error: Error) => this.log(`usage flush failed: ${error.message}`));
    }
    if (this.ticks % 240 === 0) {
      this.api.sweep();
      this.policies.sweep();
      for (const session of this.registry.sessions()) session.policy?.sweep();
      this.gate.sweep();
    }
    const sweepTicks = Math.max(1, Math.round((this.options.captureSweepMs ?? 600_000) / TICK_MS));
    if (this.ticks % sweepTicks === 0) {
      this.sweepCaptures().catch((error: Error) => this.log(`capture sweep failed: ${error.message}`));
    }
  }

  /** Frees captures past their account's retention; the accounts may be in Redis (cluster mode). */
  private async sweepCaptures(): Promise<void> {
    const retention = new Map<string, number | undefined>();
    for (const accountId of this.captures.accountIds()) {
      const account = await this.accounts.getAccount(accountId);
      retention.set(accountId, account === undefined ? undefined : this.accounts.planLimits(account.plan).retentionMs);
    }
    await this.captures.sweep((accountId) => retention.get(accountId));
  }

  // ---- the public listener: dispatch ------------------------------------------------------------------

  /** The answer to bytes llhttp refuses (the connection closes after it). */
  private refusal(error: Http1ParseError): Refusal {
    const code: ErrorCode = error.status === 431 ? 'HEADERS_TOO_LARGE' : error.status === 505 ? 'HTTP_VERSION_NOT_SUPPORTED' : 'INVALID_REQUEST';
    const message =
      error.status === 431
        ? `The request head is over the edge's limits (${this.connections.settings.maxHeadBytes} bytes, ${this.connections.settings.maxFieldLines} field lines).`
        : error.status === 505
          ? 'The edge speaks HTTP/1.0 and HTTP/1.1.'
          : `The request is not valid HTTP/1.1 (${error.reason}).`;
    return { status: ERROR_CODES[code].status, fields: ['content-type', 'application/json', 'burrow-error', code], body: errorJson(code, message) };
  }

  private onRequest(exchange: ServerExchange): void {
    if (this.stopped) {
      // A kept-alive connection outlived the listener: the stores it would reach are closed.
      exchange.destroy();
      return;
    }
    const head = exchange.head;
    if (head.method === 'CONNECT') {
      writePublicError(exchange, 'METHOD_NOT_ALLOWED', 'CONNECT is not forwarded: the edge is not a forward proxy (a tunnel carries requests to one local server).', true, ALLOW);
      return;
    }
    let target = head.target;
    let authority = '';
    if (target.charCodeAt(0) !== 47 /* / */ && target !== '*') {
      // Absolute-form (RFC 9112 section 3.2.2): routed by its authority, forwarded in origin-form.
      const absolute = ABSOLUTE_FORM.exec(target);
      if (absolute === null) {
        writePublicError(exchange, 'INVALID_REQUEST', 'The request target must be a path, an absolute http(s) URL, or *.', true);
        return;
      }
      authority = absolute[2]!;
      target = absolute[3] === undefined || absolute[3] === '' ? '/' : absolute[3].charCodeAt(0) === 63 /* ? */ ? `/${absolute[3]}` : absolute[3];
    }
    // An empty Host is what a client sends for a target without an authority (RFC 9112 section 3.2):
    // it names no tunnel and is answered by the API, as an IP literal is. No Host at all is refused.
    const host = authority !== '' ? authority : fieldValue(head.fields, 'host');
    if (host === undefined) {
      writePublicError(exchange, 'INVALID_REQUEST', 'The request has no Host header: the edge cannot tell which tunnel or site it is for.', true);
      return;
    }
    const where = this.hosts.resolve(host);
    if (where.kind === 'tunnel') {
      this.servePublic(exchange, where.subdomain, target, authority);
      return;
    }
    const headers = where.kind === 'api' ? this.apiHostHeaders : NO_HEADERS;
    const framing = requestFraming(head.fields);
    if (framing.problem !== null) {
      this.writeApiResponse(exchange, errorResponse(new BurrowError('INVALID_REQUEST', framing.problem)), true, headers);
      return;
    }
    const query = target.indexOf('?');
    const path = query === -1 ? target : target.slice(0, query);
    const queryText = query === -1 ? '' : target.slice(query + 1);
    if (exchange.upgrade) {
      this.refuseUpgrade(exchange, where.kind === 'api' && path === CONNECT_PATH, path, headers);
      return;
    }
    if (this.hop !== null && this.hop.servesInternal(exchange, path, queryText)) return;
    if (where.kind === 'api') {
      // With --api-host, <domain> and api.<domain> serve the API to tokens but never the dashboard.
      if (!(where.dashboard && serveDashboard(exchange, path, this.dashboardHeaders))) this.serveApi(exchange, path, queryText, framing, where.dashboard);
      return;
    }
    this.writeApiResponse(exchange, errorResponse(new BurrowError('NOT_FOUND', 'Unknown host.')), false, NO_HEADERS);
  }

  /**
   * An upgrade to the API host or an unknown host. At /api/v1/connect it is a tunnel client at the wrong
   * port: a protocol 1 client (which connected here) is told both versions; a protocol 2 client is told
   * where the agent listener is.
   */
  private refuseUpgrade(exchange: ServerExchange, connect: boolean, path: string, headers: readonly (readonly [string, string])[]): void {
    let error = new BurrowError('NOT_FOUND', `No WebSocket endpoint at ${path}.`);
    if (connect) {
      const version = fieldValue(exchange.head.fields, PROTOCOL_HEADER) ?? '';
      error =
        version !== String(PROTOCOL_VERSION)
          ? new BurrowError('INVALID_REQUEST', versionMismatch(version))
          : new BurrowError('NOT_FOUND', `Tunnel clients connect to the agent endpoint, ${this.agentUrl(fieldValue(exchange.head.fields, 'host') ?? '')} (agent_url in GET /api/v1/instance).`);
    }
    this.writeApiResponse(exchange, errorResponse(error), false, headers);
  }

  // ---- the API ----------------------------------------------------------------------------------------

  private serveApi(exchange: ServerExchange, path: string, query: string, framing: { contentLength: number; chunked: boolean }, dashboardHost: boolean): void {
    const head = exchange.head;
    const fields = head.fields;
    // Behind a trusted proxy, the scheme and host the browser used are the forwarded ones (the
    // dashboard's CSRF rule compares the Origin with them).
    const origin = requestOrigin(exchange.connection, fields, this.proxies, this.publicScheme);
    const apiRequest: ApiRequest = {
      method: head.method,
      path,
      query,
      headers: {
        authorization: fieldValue(fields, 'authorization') ?? '',
        'content-type': fieldValue(fields, 'content-type') ?? '',
        cookie: joinedValues(fields, 'cookie', '; '),
        origin: fieldValue(fields, 'origin') ?? '',
        host: origin.forwardedHost === '' ? (fieldValue(fields, 'host') ?? '') : origin.forwardedHost,
        'x-burrow-csrf': fieldValue(fields, 'x-burrow-csrf') ?? '',
      },
      scheme: origin.proto,
      body: null,
      clientAddress: origin.client,
      dashboardHost,
    };
    const tooLarge = (): void =>
      this.writeApiResponse(exchange, errorResponse(new BurrowError('PAYLOAD_TOO_LARGE', `The body is larger than ${this.apiBodyLimit} bytes.`)), true, this.apiHostHeaders);
    gatherBody(exchange, framing, this.apiBodyLimit, tooLarge, (body) => {
      apiRequest.body = body;
      this.dispatchApi(exchange, apiRequest);
    });
  }

  private dispatchApi(exchange: ServerExchange, request: ApiRequest): void {
    this.apiInFlight++;
    this.api.handle(request).then(
      (response) => {
        this.apiInFlight--;
        if (response.status >= 400) this.observer.refused('api', (response.body as { error?: { code?: string } } | undefined)?.error?.code ?? '');
        if (!exchange.dead) this.writeApiResponse(exchange, response, false, this.apiHostHeaders);
      },
      (error: unknown) => {
        this.apiInFlight--;
        this.observer.refused('api', 'INTERNAL_ERROR');
        this.log(`api: ${(error as Error).stack ?? error}`);
        if (!exchange.dead) this.writeApiResponse(exchange, errorResponse(new BurrowError('INTERNAL_ERROR')), false, this.apiHostHeaders);
      },
    );
  }

  /** Writes an API response: JSON, never cached; `extraHeaders` the edge's own (HSTS on the API host). */
  private writeApiResponse(exchange: ServerExchange, response: ApiResponse, closeConnection: boolean, extraHeaders: readonly (readonly [string, string])[]): void {
    writeApiResponse(exchange, response, closeConnection, extraHeaders);
  }

  // ---- public traffic ---------------------------------------------------------------------------------

  /** The live session of `subdomain` with room for a stream, or undefined once the refusal is written. */
  private sessionFor(exchange: ServerExchange, subdomain: string, path: string, clientAddress: string, forwarded: boolean): TunnelSession | undefined {
    const session = this.registry.session(subdomain);
    if (session === undefined) {
      // Cluster mode: the tunnel is connected here, but its lease lapsed while the store is away.
      if (this.cluster?.lapsed(subdomain) === true) {
        this.refusePublic(exchange, subdomain, path, clientAddress, 'STORE_UNAVAILABLE', `The cluster's store is unreachable from this edge, which cannot vouch for ${subdomain} until it is back.`, false, RETRY_SOON);
        return undefined;
      }
      // Asked as the owner by another edge: say so, and that edge forgets its cached owner (never forwarded again).
      this.refusePublic(exchange, subdomain, path, clientAddress, 'TUNNEL_NOT_FOUND', this.notFoundMessage(subdomain), false, forwarded ? NOT_OWNER : undefined);
      return undefined;
    }
    if (!session.hasRoom()) {
      this.refusePublic(exchange, subdomain, path, clientAddress, 'TUNNEL_BUSY', undefined, false, RETRY_SOON);
      return undefined;
    }
    return session;
  }

  private notFoundMessage(subdomain: string): string {
    return `No tunnel is connected on ${subdomain}.${this.domain}.`;
  }

  /** Answers a public request with the edge's error, counted and access-logged. */
  private refusePublic(
    exchange: ServerExchange,
    subdomain: string,
    path: string,
    clientAddress: string,
    code: ErrorCode,
    message?: string,
    closeConnection = false,
    extraHeaders?: readonly [string, string][],
  ): void {
    if (this.observer.watching) this.observer.publicRefused(code, ERROR_CODES[code].status, subdomain, exchange.head.method, path, clientAddress);
    writePublicError(exchange, code, message, closeConnection, extraHeaders);
  }

  private servePublic(exchange: ServerExchange, subdomain: string, target: string, authority: string): void {
    const fields = exchange.head.fields;
    const upgrade = exchange.upgrade;
    // A request another edge of the cluster forwarded (with the secret) carries the client's own origin.
    const forwarded = this.hop === null ? null : this.hop.forwardedOrigin(fields);
    let clientAddress: string;
    let head: PublicRequestHead;
    let proto: string;
    let forwardedHost = '';
    if (forwarded === null) {
      const origin = requestOrigin(exchange.connection, fields, this.proxies, this.publicScheme);
      ({ client: clientAddress, proto, forwardedHost } = origin);
      head = readPublicRequestHead(fields, origin.hop, origin.proto, origin.forwardedHost, false, upgrade, authority);
    } else {
      ({ client: clientAddress, proto } = forwarded);
      head = readPublicRequestHead(fields, '', proto, '', true, upgrade, authority);
    }
    const framingProblem = head.framingProblem;
    if (framingProblem !== null) {
      this.refusePublic(exchange, subdomain, target, clientAddress, 'INVALID_REQUEST', framingProblem, true);
      return;
    }
    // The tunnel's policy, before anything else touches the request (docs/policies.md). A request another
    // edge forwarded was decided there.
    if (forwarded === null) {
      const policy = this.policyOf(subdomain);
      if (policy !== null) {
        const gated: GatedRequest = { subdomain, target, head, clientAddress, proto, host: forwardedHost === '' ? head.host : forwardedHost, receivedAt: Date.now() };
        this.gate.run(exchange, gated, policy);
        return;
      }
    }
    this.route(exchange, subdomain, target, head, clientAddress, proto, forwarded !== null, head.headers);
  }

  /**
   * The policy of a name as this edge applies it: its live session's; without one here, its
   * reservation's (the offline path), or on a forwarding edge of a cluster the owner's (a Promise until
   * read once). null: no policy, the request goes its way at once.
   */
  private policyOf(subdomain: string): TunnelPolicy | null | Promise<TunnelPolicy | null> {
    // A pool's members share the reservation's policy (one-run policies are refused with --pool).
    const session = this.registry.holder(subdomain);
    if (session !== undefined) return session.policy;
    if (this.hop !== null) return this.policies.ofRemote(subdomain, () => this.remotePolicy(subdomain));
    return this.policies.of(subdomain, this.store.getReservation(subdomain)?.policy);
  }

  /** What a forwarding edge applies for a name another edge holds: the stored policy, else the one-run one in the lease; null when no edge holds it. */
  private async remotePolicy(subdomain: string): Promise<StoredPolicy | undefined | null> {
    const owner = await this.hop!.directory.ownerOf(subdomain);
    if (owner === null || owner.nodeId === this.hop!.directory.self.nodeId) return null;
    return (await this.accounts.getReservation(subdomain))?.policy ?? owner.policy;
  }

  /**
   * A public request on its way after the policy (or without one): the offline queue, the hop to the
   * edge holding the tunnel, or a stream to the tunnel. `publicFields`: the headers as the public client
   * sent them (the queue verifies signatures on them), `head.headers` what is forwarded.
   */
  private route(
    exchange: ServerExchange,
    subdomain: string,
    target: string,
    head: PublicRequestHead,
    clientAddress: string,
    proto: string,
    forwarded: boolean,
    publicFields: readonly string[],
  ): void {
    const method = exchange.head.method;
    const upgrade = exchange.upgrade;
    if (!upgrade && this.offline.serves(exchange, target, head, subdomain, clientAddress, publicFields)) return;
    if (this.hop !== null && !forwarded && this.registry.holder(subdomain) === undefined) {
      this.forwardPublic(exchange, subdomain, target, head, clientAddress, proto);
      return;
    }
    // Cluster mode: events held for the name go first, live requests queue behind them (docs/offline.md).
    const clusterOffline = this.clusterOffline;
    if (!upgrade && clusterOffline !== null && clusterOffline.backlogged(subdomain) && clusterOffline.holdsLive(exchange, { subdomain, method, path: target, headers: head.headers, contentLength: head.contentLength, chunked: head.chunked, expectContinue: head.expectContinue, clientAddress, proto })) return;
    const session = this.sessionFor(exchange, subdomain, target, clientAddress, forwarded);
    if (session === undefined) return;
    const policy = session.policy;
    // A forwarded credential (--basic-auth-forward) is kept in the capture redacted, never in clear.
    const captureHeaders = policy === null || !policy.redactsForwarded ? null : policy.captureFields(head.headers);
    const requestHead = { method, target, headers: head.headers, clientAddress, upgrade, captureHeaders };
    if (upgrade) {
      // No body (an upgrade with one is declined, src/http1/server.ts): one OPEN, then the answer.
      const stream = session.openPublicHttp(exchange, requestHead, { gather: -1, limit: 0 });
      stream.sendOpen(null, true);
      exchange.attach(stream);
      return;
    }
    const length = head.contentLength;
    if (length > this.maxRequestBody) {
      // Read and dropped first (bounded), so a client that sends its whole body before it reads gets the 413.
      exchange.discardBody(() =>
        this.refusePublic(exchange, subdomain, target, clientAddress, 'PAYLOAD_TOO_LARGE', `The request body is larger than ${this.maxRequestBody} bytes.`, true),
      );
      return;
    }
    // The fast path gathers a small body into one OPEN; with Expect: 100-continue the body comes only
    // after the local server's 100, so the OPEN goes first.
    const gather = length > 0 && length <= this.settings.maxFrameBody && !head.expectContinue ? length : -1;
    const stream = session.openPublicHttp(exchange, requestHead, { gather, limit: this.maxRequestBody });
    if (length <= 0 && !head.chunked) stream.sendOpen(null, true);
    else if (gather < 0) stream.sendOpen(null, false);
    exchange.attach(stream);
  }

  // ---- policies ---------------------------------------------------------------------------------------

  /** The API changed a reservation's policy (or released the name): this edge applies the new one, and in a cluster every edge does. */
  private policyChanged(subdomain: string): void {
    this.refreshPolicies(subdomain);
    this.cluster?.announcePolicyChange(subdomain).catch((error: Error) => this.log(`cluster: the policy change of ${subdomain} was not announced: ${error.message}`));
  }

  /**
   * Compiles again the policy of the live sessions of `subdomain` (every name: null) from their
   * reservation, and forgets what this edge read about names other edges hold. The stored policy wins
   * over a one-run one: at connect they cannot both be there, and a policy stored later is the newer wish.
   */
  private refreshPolicies(subdomain: string | null): void {
    this.policies.forgetRemote(subdomain);
    for (const session of this.registry.sessions()) {
      // A tcp or tls tunnel's connections are not HTTP: its CIDR rules (addressRule) are all it takes.
      if ((subdomain !== null && session.subdomain !== subdomain) || session.kind !== TunnelKind.HTTP) continue;
      Promise.resolve(this.accounts.getReservation(session.subdomain)).then(
        // An ended session's policy is never read again: setting it is harmless.
        (reservation) => {
          session.policy = this.policies.of(session.subdomain, reservation?.policy ?? session.runPolicy);
        },
        (error: Error) => this.log(`policy of ${session.subdomain} not read again: ${error.message}`),
      );
    }
  }

  /**
   * Where a request of `subdomain` refused for its signature is captured: its live session's ring, else
   * the ring of its account on this edge (`accountId` when the caller knows it; else the owner's, on a
   * forwarding edge of a cluster, or the reservation's).
   */
  private rejectionRing(subdomain: string, accountId: string | null): RejectionRing | Promise<RejectionRing> {
    const session = this.registry.holder(subdomain);
    if (session !== undefined) return { ring: session.ring, tokenId: session.tokenId };
    return (async (): Promise<RejectionRing> => {
      const owner = accountId !== null || this.hop === null ? null : await this.hop.directory.ownerOf(subdomain).catch(() => null);
      const id = accountId ?? owner?.accountId ?? (await this.accounts.getReservation(subdomain))?.accountId;
      const account = id === undefined ? undefined : await this.accounts.getAccount(id);
      if (account === undefined) return null;
      const limits = this.accounts.planLimits(account.plan);
      return { ring: this.captures.ring(account.id, subdomain, limits.capturedRequests, limits.captureBytes), tokenId: '' };
    })();
  }

  /** The offline queue refused a request for its signature: captured (credentials redacted by the name's policy), then answered. */
  private keepQueueRejection(rejected: RejectedRequest, accountId: string, answer: () => void): void {
    const policy = this.policies.of(rejected.subdomain, this.store.getReservation(rejected.subdomain)?.policy);
    this.gate.captureRejected(policy === null ? rejected : { ...rejected, headers: policy.captureFields(rejected.headers) }, accountId, answer);
  }

  /** No session here, in cluster mode: the edge holding the tunnel answers, through the internal hop. */
  private forwardPublic(exchange: ServerExchange, subdomain: string, path: string, head: PublicRequestHead, clientAddress: string, proto: string): void {
    const method = exchange.head.method;
    const refused = (code: ErrorCode): void => {
      if (this.observer.watching) this.observer.publicRefused(code, ERROR_CODES[code].status, subdomain, method, path, clientAddress);
    };
    const notFound = this.notFoundMessage(subdomain);
    if (exchange.upgrade) {
      this.hop!.forwardUpgrade(exchange, { subdomain, method, path, headers: head.headers, clientAddress, proto, notFound }, refused);
      return;
    }
    this.hop!.forwardHttp(
      exchange,
      { subdomain, method, path, headers: head.headers, contentLength: head.contentLength, chunked: head.chunked, expectContinue: head.expectContinue, clientAddress, proto, notFound },
      { maxRequestBody: this.maxRequestBody, requestTimeoutMs: this.deps.requestTimeoutMs },
      refused,
    );
  }

  // ---- the agent listener: tunnel clients ---------------------------------------------------------------

  /**
   * A tunnel client connects: every check happens here, and a refusal is a plain HTTP error. The checks
   * may wait for the store (Redis in cluster mode); the admission and the upgrade then run in one turn,
   * so two connects of one account cannot both pass its tunnel cap in between.
   */
  private connectTunnel(res: HttpResponse, req: HttpRequest, context: us_socket_context_t): void {
    const clientAddress = requestOrigin(uwsOrigin(res), uwsFields(req), this.proxies, this.publicScheme).client;
    const authorization = req.getHeader('authorization');
    const version = req.getHeader(PROTOCOL_HEADER);
    const key = req.getHeader('sec-websocket-key');
    const protocol = req.getHeader('sec-websocket-protocol');
    const extensions = req.getHeader('sec-websocket-extensions');
    const policyHeader = req.getHeader(POLICY_HEADER);
    const query = new URLSearchParams(req.getQuery() ?? '');
    const connect = { aborted: false };
    res.onAborted(() => {
      connect.aborted = true;
    });
    const refuse = (error: unknown): void => {
      const refusal = error instanceof BurrowError ? error : new BurrowError('INTERNAL_ERROR');
      this.observer.refused('connect', refusal.code);
      if (!(error instanceof BurrowError)) this.log(`connect: ${(error as Error).stack ?? error}`);
      if (!connect.aborted) res.cork(() => writeUwsError(res, errorResponse(refusal)));
    };
    const upgrade = (connection: TunnelConnection): void => {
      res.cork(() => {
        res.writeStatus('101 Switching Protocols').writeHeader(PROTOCOL_HEADER, String(PROTOCOL_VERSION));
        res.upgrade<SocketData>({ session: connection }, key, protocol, extensions, context);
      });
    };
    const admit = async (): Promise<void> => {
      const principal = await this.api.authorize(authorization, clientAddress);
      if (principal instanceof BurrowError) throw principal;
      this.accounts.touchToken(principal.token.idSegment).catch(() => undefined);
      if (version !== String(PROTOCOL_VERSION)) throw new BurrowError('INVALID_REQUEST', versionMismatch(version));
      const portText = query.get('port');
      // No port: the connect names no tunnel, and every tunnel of the connection comes by BIND (section 18).
      const bindOnly = portText === null;
      const port = portText !== null && /^[0-9]{1,5}$/.test(portText) ? Number(portText) : 0;
      if (!bindOnly && (port < 1 || port > 65535)) throw new BurrowError('INVALID_REQUEST', 'The "port" query parameter must be the local port, 1 to 65535.');
      const requested = query.get('subdomain');
      const instance = query.get('instance');
      if (instance !== null && !INSTANCE_ID.test(instance)) throw new BurrowError('INVALID_REQUEST', 'The "instance" query parameter must be 8 to 64 of A-Z, a-z, 0-9, "_" and "-".');
      const dropText = query.get('drop') ?? '';
      const drop = dropText === '' ? [] : dropText.split(',').map(Number);
      if (drop.length > 8 || !drop.every((fence) => Number.isSafeInteger(fence) && fence > 0)) {
        throw new BurrowError('INVALID_REQUEST', 'The "drop" query parameter must be the attachments this connect replaces: up to 8 positive integers, comma-separated.');
      }
      const account = principal.account;
      const limits = this.accounts.planLimits(account.plan);
      const requestedName = requested === null || requested === '' ? null : requested.toLowerCase();
      const pool = query.get('pool') === '1';
      if (pool && policyHeader !== '') throw new BurrowError('INVALID_REQUEST', POOL_POLICY_REFUSAL);
      const details = { tokenId: principal.token.id, port, clientAddress, instance, replace: query.get('replace') === '1', pool, drop };
      const binder: TunnelBinder = {
        bind: (connection, frame) => this.bindTunnel(connection, frame, limits),
        bound: (session) => {
          this.offline.tunnelConnected(session);
          this.clusterOffline?.tunnelConnected(session);
        },
        attachment: (session) => this.cluster?.fenceOf(session.subdomain) ?? 0,
      };
      const owner = { accountId: account.id, tokenId: principal.token.id, instance, clientAddress };
      if (bindOnly) {
        if (requestedName !== null || policyHeader !== '') throw new BurrowError('INVALID_REQUEST', 'A connect without "port" names no tunnel: give the subdomain and policy in each BIND.');
        if (connect.aborted) return;
        upgrade(new TunnelConnection(this.deps, owner, binder));
        return;
      }
      const { runPolicy, storedPolicy } = await this.runPolicyOf(account.id, requestedName, policyHeader);
      if (connect.aborted) return;
      // One edge admits in this turn (no await between its cap check and the upgrade); a cluster takes the
      // name's lease in Redis, atomically with its own cap check, and gives it back if the client left.
      // In a cluster the one-run policy travels in the lease: a forwarding edge applies it before its hop.
      const admitted = this.registry.admit(account.id, limits.activeTunnels, requestedName, runPolicy === undefined ? details : { ...details, policy: runPolicy });
      const subdomain = typeof admitted === 'string' ? admitted : await admitted;
      if (connect.aborted) {
        this.registry.abandon(subdomain, account.id);
        return;
      }
      const connection = new TunnelConnection(this.deps, owner, binder);
      const session = this.newSession(connection, CONNECT_TUNNEL, TunnelKind.HTTP, subdomain, port, pool, limits);
      session.runPolicy = runPolicy;
      // Compiled before the upgrade, so the tunnel's first request meets it.
      session.policy = this.policies.of(subdomain, (subdomain === requestedName ? storedPolicy : undefined) ?? runPolicy);
      connection.tunnels.set(CONNECT_TUNNEL, session);
      upgrade(connection);
    };
    admit().catch(refuse);
  }

  /**
   * The one-run policy a connect or BIND sent (its encoded header), stored as a reservation's would be,
   * and the stored policy of the account's reservation of the name; refused when both are given.
   */
  private async runPolicyOf(accountId: string, requested: string | null, policyHeader: string): Promise<{ runPolicy: StoredPolicy | undefined; storedPolicy: StoredPolicy | undefined }> {
    const runSpec = policyHeader === '' ? undefined : decodePolicyHeader(policyHeader);
    const reservation = requested === null ? undefined : await this.accounts.getReservation(requested);
    const storedPolicy = reservation?.accountId === accountId ? reservation.policy : undefined;
    if (runSpec !== undefined && storedPolicy !== undefined) {
      throw new BurrowError(
        'INVALID_REQUEST',
        `The reserved subdomain "${requested}" has a stored policy; change it with "burrow reserve ${requested} ..." or connect without policy flags.`,
      );
    }
    // Passwords are hashed here, once per connect; secrets sealed as on a reservation (one code path).
    const runPolicy = runSpec === undefined ? undefined : await storePolicy(runSpec, undefined, this.secrets);
    return { runPolicy, storedPolicy };
  }

  private newSession(
    connection: TunnelConnection,
    id: number,
    kind: TunnelKindValue,
    name: string,
    port: number,
    pooled: boolean,
    limits: { capturedRequests: number; captureBytes: number },
    publicUrl = this.publicUrl(name),
  ): TunnelSession {
    const ring = this.captures.ring(connection.owner.accountId, name, limits.capturedRequests, limits.captureBytes);
    return new TunnelSession(connection, this.deps, { id, kind, subdomain: name, port, publicUrl, ring, pooled });
  }

  /**
   * BIND: one more tunnel on a connection, admitted as a connect is (its name, the tunnel cap, its policy)
   * for the connection's account and token. Resolves with the session; the connection makes it live.
   */
  private async bindTunnel(connection: TunnelConnection, frame: BindFrame, limits: { activeTunnels: number; capturedRequests: number; captureBytes: number }): Promise<TunnelSession> {
    const [, , id, kind, name, , localPort, policyHeader, replace, pool, drop] = frame;
    if (localPort < 1) throw new BurrowError('INVALID_REQUEST', 'BIND must name the local port, 1 to 65535.');
    if (kind === TunnelKind.TCP) return this.bindTcp(connection, frame, limits);
    if (kind === TunnelKind.TLS) {
      if (this.tls === null) throw new BurrowError('INVALID_REQUEST', 'This edge has no HTTPS port (no --tls-cert), so it passes no TLS through (docs/tcp.md).');
      if (this.cluster !== null) throw new BurrowError('INVALID_REQUEST', 'TLS passthrough tunnels are not available in cluster mode yet.');
      if (pool) throw new BurrowError('INVALID_REQUEST', 'TLS passthrough tunnels do not take --pool yet.');
    }
    if (pool && policyHeader !== '') throw new BurrowError('INVALID_REQUEST', POOL_POLICY_REFUSAL);
    const owner = connection.owner;
    const requested = name === '' ? null : name.toLowerCase();
    if (requested !== null) {
      for (const other of connection.tunnels.values()) {
        if (other.subdomain === requested) throw new BurrowError('INVALID_REQUEST', `This connection already serves "${requested}" (tunnel ${other.tunnelId}).`);
      }
    }
    const { runPolicy, storedPolicy } =
      kind === TunnelKind.TLS
        ? { runPolicy: await this.connectionPolicy(policyHeader, 'A TLS passthrough tunnel'), storedPolicy: undefined }
        : await this.runPolicyOf(owner.accountId, requested, policyHeader);
    const admitted = this.registry.admit(owner.accountId, limits.activeTunnels, requested, {
      tokenId: owner.tokenId,
      port: localPort,
      clientAddress: owner.clientAddress,
      instance: owner.instance,
      replace,
      kind,
      pool,
      ...(runPolicy === undefined || kind === TunnelKind.TLS ? {} : { policy: runPolicy }),
      // A BIND with `drop` names exactly what it replaces: another connection of the same client on this
      // edge is then refused ALREADY_ATTACHED (it belongs on another edge). Without it (an older client),
      // this edge's own attachment of the same client process is the one replaced.
      ...(this.cluster === null || requested === null
        ? {}
        : { drop: drop === undefined ? this.cluster.ownAttachment(requested, owner.accountId, owner.instance) : drop === 0 ? [] : [drop] }),
    });
    const subdomain = typeof admitted === 'string' ? admitted : await admitted;
    if (connection.closed) {
      this.registry.abandon(subdomain, owner.accountId);
      throw new BurrowError('TUNNEL_CLOSED');
    }
    if (kind !== TunnelKind.TLS) {
      const session = this.newSession(connection, id, kind, subdomain, localPort, pool, limits);
      session.runPolicy = runPolicy;
      session.policy = this.policies.of(subdomain, (subdomain === requested ? storedPolicy : undefined) ?? runPolicy);
      return session;
    }
    // A passthrough tunnel: its URL says tls://, and its policy's CIDR rules are checked per connection.
    const session = this.newSession(connection, id, kind, subdomain, localPort, false, limits, this.publicUrl(subdomain).replace(/^https:/, 'tls:'));
    session.addressRule = addressRuleOf(runPolicy);
    this.passthroughTunnels++;
    session.onEnded = () => this.passthroughTunnels--;
    return session;
  }

  /**
   * A TLS connection on the HTTPS port whose ClientHello names `serverName`: taken (not terminated) when
   * that is a live tls tunnel's `<name>.<domain>`, passed raw with the ClientHello as its first bytes.
   */
  private routePassthrough(serverName: string, socket: Socket, hello: Buffer, client: string): boolean {
    const name = serverName.toLowerCase();
    const suffix = `.${this.domain}`;
    if (!name.endsWith(suffix)) return false;
    const session = this.registry.tunnel(name.slice(0, -suffix.length));
    if (session === undefined || session.kind !== TunnelKind.TLS) return false;
    const stream = new EdgeRawStream(session.connection.allocateStreamId(), session, socket, 'TLS', client, socket.remotePort ?? 0, peerAddress(socket.localAddress), socket.localPort ?? 0, session);
    if (session.addressRule !== null && !session.addressRule.allows(client)) stream.cut('ADDRESS_FORBIDDEN');
    else if (!session.hasRoom()) stream.cut('TUNNEL_BUSY');
    else {
      session.adopt(stream);
      stream.start(hello);
    }
    return true;
  }

  /**
   * The policy of a tunnel whose connections the edge does not read (tcp, tls): CIDR rules only, which
   * each connection is checked by; anything else is an HTTP tunnel's and refused.
   */
  private async connectionPolicy(policyHeader: string, what: string): Promise<StoredPolicy | undefined> {
    const spec = policyHeader === '' ? undefined : decodePolicyHeader(policyHeader);
    const stored = spec === undefined ? undefined : await storePolicy(spec, undefined, this.secrets);
    const others = stored === undefined ? [] : Object.entries(stored).filter(([key, value]) => key !== 'allowCidr' && key !== 'denyCidr' && value !== undefined && value !== false && !(Array.isArray(value) && value.length === 0));
    if (others.length > 0) throw new BurrowError('INVALID_REQUEST', `${what} takes only --allow-cidr and --deny-cidr; ${others.map(([key]) => key).join(', ')} is for HTTP tunnels.`);
    return stored;
  }

  /**
   * BIND of a tcp tunnel: a public port of `--tcp-ports` (the one asked for, or a free one), admitted as
   * the name `tcp:PORT` (reservations, grace holds and the tunnel cap as for a subdomain), listened on
   * while the tunnel is live. Its policy may hold only CIDR rules, which every connection is checked by.
   */
  private async bindTcp(connection: TunnelConnection, frame: BindFrame, limits: { activeTunnels: number; capturedRequests: number; captureBytes: number }): Promise<TunnelSession> {
    const [, , id, , , remotePort, localPort, policyHeader, replace, pool] = frame;
    const tcp = this.tcp;
    if (tcp === null) throw new BurrowError('INVALID_REQUEST', 'This edge serves no TCP tunnels: it was started without --tcp-ports (docs/tcp.md).');
    if (pool) throw new BurrowError('INVALID_REQUEST', 'TCP tunnels do not take --pool yet.');
    const stored = await this.connectionPolicy(policyHeader, 'A TCP tunnel');
    const owner = connection.owner;
    const details = { tokenId: owner.tokenId, port: localPort, clientAddress: owner.clientAddress, instance: owner.instance, replace, kind: TunnelKind.TCP };
    // A port asked for is admitted before it is listened on; a free one is found (and listened on) first.
    if (remotePort !== 0) {
      if (!tcp.contains(remotePort)) throw new BurrowError('INVALID_REQUEST', `The port ${remotePort} is not one of this edge's TCP ports (${tcp.range.first}-${tcp.range.last}).`);
      this.registry.admit(owner.accountId, limits.activeTunnels, tcpName(remotePort), details);
    }
    const port = await tcp.open(remotePort);
    try {
      if (remotePort === 0) this.registry.admit(owner.accountId, limits.activeTunnels, tcpName(port), details);
      if (connection.closed) throw new BurrowError('TUNNEL_CLOSED');
    } catch (error) {
      tcp.release(port);
      throw error;
    }
    const session = this.newSession(connection, id, TunnelKind.TCP, tcpName(port), localPort, false, limits, tcp.publicUrl(port));
    session.addressRule = addressRuleOf(stored);
    session.onEnded = () => tcp.release(port);
    return session;
  }

  private tunnelOpened(ws: WebSocket<SocketData>): void {
    // Every tunnel socket is a TunnelConnection (connectTunnel); SocketData names it by its socket interface.
    const connection = ws.getUserData().session as TunnelConnection | null;
    if (connection === null) return;
    const cluster = this.cluster;
    connection.attach(ws, cluster === null ? null : (subdomain) => cluster.readySettings(subdomain));
    if (cluster !== null) {
      // A new connection learns the store's state at once: a client that moved here from an edge without
      // its store hears that this one has it.
      const [code, message] = storeNotice(cluster.storeStatus);
      connection.notice(code, message);
    }
    const first = connection.first;
    if (first !== undefined) {
      this.offline.tunnelConnected(first);
      this.clusterOffline?.tunnelConnected(first);
    }
  }

  /** The API changed a name's queue: the edge's own, and in cluster mode the cluster's (a release drops it). */
  private changedQueue(subdomain: string): void {
    this.offline.changed(subdomain);
    this.clusterOffline?.changed(subdomain);
  }

  private agentNotFound(res: HttpResponse, req: HttpRequest): void {
    writeUwsError(res, errorResponse(new BurrowError('NOT_FOUND', `The agent port serves tunnel clients at ${CONNECT_PATH} only; ${req.getUrl()} is not there.`)));
  }

  // ---- lifecycle --------------------------------------------------------------------------------------

  private openStreams(): number {
    let count = 0;
    for (const session of this.registry.sessions()) count += session.streams.size;
    return count;
  }

  /**
   * Graceful stop: no new connections, in-flight requests finish (up to `drainMs`), tunnels get
   * GOAWAY SHUTDOWN (clients reconnect elsewhere or later), pending writes commit, LMDB closes.
   */
  close(drainMs = 10_000): Promise<void> {
    this.closing ??= this.shutdown(drainMs);
    return this.closing;
  }

  private async shutdown(drainMs: number): Promise<void> {
    this.offline.close();
    this.clusterOffline?.close();
    // From here on /healthz answers 503: a load balancer stops sending before the drain ends.
    this.draining = true;
    // In a cluster, a closed listener reads as "gone" to the other edges' takeovers: serve nothing new from here.
    this.cluster?.quiesce();
    this.publicListener.close();
    this.tcp?.closeAll();
    this.agent.close();
    this.redirect?.close();
    const deadline = Date.now() + drainMs;
    while ((this.openStreams() > 0 || this.apiInFlight > 0) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    for (const session of [...this.registry.sessions()]) session.goAway(GoAwayCode.SHUTDOWN, 'the edge is shutting down');
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    // Streams cut by the GOAWAY still write their captures; give their batch a turn to queue.
    await new Promise((resolve) => setImmediate(resolve));
    this.stopped = true;
    // Answers of that last turn go out before the connections are cut.
    await new Promise((resolve) => setImmediate(resolve));
    this.connections.destroyAll();
    // The ended tunnels' grace holds are written to the cluster before it is left.
    await this.cluster?.stop();
    // Counted usage goes to the account store (Redis in cluster mode) before its connection closes; a
    // failed last flush is logged, and the shutdown goes on.
    await this.usage.flush().catch((error: Error) => this.log(`usage flush failed: ${error.message}`));
    await this.clusterConnection?.close();
    await this.captures.close();
    await this.store.close();
    this.space.stop();
    this.releaseDataDir();
    await this.observer.close();
    this.admin?.close();
    this.admin = null;
    await this.hop?.close();
  }
}

/** `http://authority/path?query` (any case of the scheme); the authority is what routes the request. */
const ABSOLUTE_FORM = /^([Hh][Tt][Tt][Pp][Ss]?):\/\/([^/?#\s]+)([/?][^#\s]*)?$/;
const ALLOW: readonly [string, string][] = [['allow', 'GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS']];

/** The refusal of a client of another protocol version, naming both (docs/protocol.md section 2). */
function versionMismatch(sent: string): string {
  return `This edge speaks tunnel protocol ${PROTOCOL_VERSION} and the client sent ${sent === '' ? 'none' : sent}; update the client${sent !== '' && Number(sent) > PROTOCOL_VERSION ? ' or the edge' : ''}.`;
}

/** Every value of a field, joined (Cookie may come in several lines: RFC 6265 joins them with "; "). */
function joinedValues(fields: readonly string[], lowerCaseName: string, separator: string): string {
  let joined = '';
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    if (name.length === lowerCaseName.length && name.toLowerCase() === lowerCaseName) joined = joined === '' ? fields[i + 1]! : `${joined}${separator}${fields[i + 1]!}`;
  }
  return joined;
}

/**
 * Writes an API response through the public writer: JSON, never cached; `closeConnection` after an
 * unread body; `extraHeaders` the edge's own (HSTS on the API host).
 */
export function writeApiResponse(
  exchange: ServerExchange,
  response: ApiResponse,
  closeConnection = false,
  extraHeaders: readonly (readonly [string, string])[] = NO_HEADERS,
): void {
  const fields: string[] = [];
  if (response.headers !== undefined) for (const [name, value] of response.headers) fields.push(name, value);
  for (const [name, value] of extraHeaders) fields.push(name, value);
  fields.push('cache-control', 'no-store');
  if (response.status === 204 || response.body === undefined) {
    writeOwn(exchange, response.status, fields, null, closeConnection);
    return;
  }
  fields.push('content-type', 'application/json; charset=utf-8');
  writeOwn(exchange, response.status, fields, JSON.stringify(response.body), closeConnection);
}

/** An API error on the agent listener (uWS), before any upgrade (inside a cork or its handler). */
function writeUwsError(res: HttpResponse, response: ApiResponse): void {
  res.writeStatus(statusLine(response.status));
  for (const [name, value] of response.headers ?? []) res.writeHeader(name, value);
  res.writeHeader('cache-control', 'no-store').writeHeader('content-type', 'application/json; charset=utf-8');
  res.end(JSON.stringify(response.body));
}

/**
 * One-run policy flags with `--pool`: the members of a pool are chosen per request, so one member's own
 * rules would protect only its share of the traffic.
 */
const POOL_POLICY_REFUSAL =
  'A pool takes its policy from the reservation, so every member applies the same one: store it with "burrow reserve NAME ..." and start the members with --pool but without policy flags.';

/** The CIDR rules of a connection policy, or null: anyone may connect. */
function addressRuleOf(policy: StoredPolicy | undefined): AddressRule | null {
  if (policy === undefined || ((policy.allowCidr?.length ?? 0) === 0 && (policy.denyCidr?.length ?? 0) === 0)) return null;
  return new AddressRule(policy.allowCidr, policy.denyCidr);
}
