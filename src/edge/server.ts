/**
 * The edge: one uWebSockets.js app on one port (DESIGN.md section 1). Host dispatch sends API hosts to
 * the /api/v1 router and tunnel hosts to their session; WebSocket upgrades are either a tunnel client
 * connecting (/api/v1/connect on the API host) or a public WebSocket passed through to a tunnel.
 */
import { join } from 'node:path';
import { BurrowError, ERROR_CODES, type ErrorCode } from '../errors.js';
import { VERSION } from '../version.js';
import { Api, API_SECURITY_HEADERS, errorResponse } from '../api/api.js';
import { LocalCaptureLog } from '../api/capture-log.js';
import type { ApiRequest, ApiResponse } from '../api/types.js';
import { defaultSecretKeyFile, SecretBox } from '../store/secret-box.js';
import { storePolicy } from '../store/stored-policy.js';
import { decodePolicyHeader, POLICY_HEADER } from '../protocol/policy.js';
import type { StoredPolicy } from '../protocol/policy.js';
import { CONNECT_PATH, DEFAULT_SETTINGS, INSTANCE_ID, PROTOCOL_HEADER, PROTOCOL_VERSION, GoAwayCode, type Settings } from '../protocol/constants.js';
import { CaptureStore, clusterRingIds } from '../store/captures.js';
import { lockDataDirectory } from '../store/data-lock.js';
import { FreeSpace, type MinFreeSpace } from '../store/free-space.js';
import { WriteFailures } from '../store/write-failures.js';
import type { SessionOptions } from '../store/sessions.js';
import { Store, type StoreOptions } from '../store/store.js';
import { listenAlone, listenPort, uws, type HttpRequest, type HttpResponse, type TemplatedApp, type us_listen_socket, type us_socket_context_t } from '../uws.js';
import { AccessLog } from './access-log.js';
import { AdminServer, type AdminAddress } from './admin.js';
import { TrustedProxies, requestOrigin } from './client-address.js';
import { loadDashboard, serveDashboard } from './dashboard.js';
import { readPublicRequestHead, type PublicRequestHead } from './headers.js';
import { apiHostProblem, HostDispatch } from './host.js';
import { OfflineQueue, type OfflineQueueOptions } from './offline-queue.js';
import { EdgeMetrics } from './metrics.js';
import { EdgeObserver } from './observer.js';
import { discardBody, gatherBody, refuseAndClose, requestFramingProblem } from './request-framing.js';
import { PassthroughStream } from './passthrough.js';
import { TunnelRegistry, type EdgeRegistry } from './registry.js';
import type { AccountStore, UsageCounter } from '../store/account-store.js';
import { ClusterConnection } from './cluster/connection.js';
import { ClusterRegistry, type ClusterTimings } from './cluster/registry.js';
import type { ClusterOptions } from './cluster/types.js';
import { endHeadResponse, statusLine, writePublicError } from './responses.js';
import { TunnelSession, type SessionDeps, type SocketData } from './session.js';
import { HttpRedirectListener } from './http-redirect.js';
import { TlsListener, type CertificateSummary, type TlsOptions } from './tls.js';
import { Turn } from './turn.js';
import { ClusterHop, NOT_OWNER, type ClusterHopOptions } from './cluster/hop.js';

export interface EdgeOptions {
  dataDir: string;
  /** The key that seals policy secrets at rest (docs/policies.md); `<dataDir>/secret.key` by default, created on first start. */
  secretKeyFile?: string;
  /** Address to bind; 127.0.0.1 by default. */
  host?: string;
  /** Port to bind; 0 picks a free one. */
  port?: number;
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
  /** Largest WebSocket message on the edge (passthrough messages, tunnel frames). */
  maxWebSocketMessage?: number;
  settings?: Partial<Settings>;
  plans?: StoreOptions['plans'];
  /** How public URLs are printed: scheme and port (the edge's own port by default). */
  publicScheme?: 'http' | 'https';
  publicPort?: number;
  /** Dashboard session lifetimes and cap per token (docs/dashboard.md): 12 h idle, 7 days at most, 20 by default. */
  dashboardSessions?: SessionOptions;
  /** Dashboard sign-ins per minute per token and per client address (10 and 30 by default). */
  signInLimits?: { perToken?: number; perAddress?: number };
  /** Serve HTTPS and wss:// with these certificates (src/edge/tls.ts); public URLs are then https. */
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
  readonly api: Api;
  readonly domain: string;
  readonly settings: Settings;
  /** The plain app, or null when `tls` owns the apps (one per certificate generation). */
  private readonly app: TemplatedApp | null;
  private readonly tls: TlsListener | null;
  private redirect: HttpRedirectListener | null = null;
  private readonly hosts: HostDispatch;
  private readonly deps: SessionDeps;
  private listenSocket: us_listen_socket | null = null;
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
  /** Seals and opens policy secrets and sign-in cookies (src/store/secret-box.ts). */
  readonly secrets: SecretBox;

  private constructor(
    private readonly options: EdgeOptions,
    cluster: ClusterConnection | null = null,
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
    this.tls = options.tls === undefined ? null : new TlsListener(options.tls, (app) => this.routes(app));
    // The dashboard's files are read now, before the data directory is taken, as certificates are.
    loadDashboard();
    // The secret key too: a key file others can read is refused before anything is taken.
    this.secrets = SecretBox.open(options.secretKeyFile ?? defaultSecretKeyFile(options.dataDir));
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
      this.hop = new ClusterHop({ directory: this.cluster, local: this.cluster, secret: cluster.secret }, this.log);
      this.cluster.peerLink = this.hop.peerLink;
    } else this.registry = new TunnelRegistry(this.store, options.graceMs ?? 60_000);
    const metrics =
      options.admin === undefined
        ? null
        : new EdgeMetrics({
            tunnelsActive: () => this.registry.size,
            streamsOpen: () => this.openStreams(),
            draining: () => this.draining,
            storage: {
              freeBytes: () => this.space.freeBytes,
              minFreeBytes: () => this.space.minFreeBytes,
              low: () => this.space.low,
              quotaUse: () => this.captures.quotaUse(),
              skipped: () => this.captures.skipped,
              writeFailures: (kind) => this.writeFailures.count(kind),
            },
          });
    const accessLog = options.accessLog === undefined ? null : new AccessLog(options.accessLog, this.log, (lines) => metrics !== null && (metrics.accessLogDropped += lines));
    this.observer = new EdgeObserver(metrics, accessLog, this.log);
    this.offline = new OfflineQueue(this.store, this.registry, this.log, { ...options.offlineQueue, storageLow: () => this.space.low, secrets: this.secrets }, this.observer);
    // In cluster mode the API reads every edge's captures and replays through the tunnel's edge.
    const clusterApi = this.hop === null ? null : this.hop.apiParts(new LocalCaptureLog(this.captures), this.registry);
    this.api = new Api({
      store: this.accounts,
      heldEvents: this.store.queue,
      offlineModes: this.cluster === null,
      captures: this.captures,
      ...(clusterApi === null ? {} : { captureLog: clusterApi.captureLog }),
      usage: this.usage,
      tunnels: clusterApi === null ? this.registry : clusterApi.tunnels,
      queue: this.offline,
      writeFailures: this.writeFailures,
      instance: { build: VERSION, region: options.region ?? 'local' },
      ...(options.rateLimit === undefined ? {} : { rateLimit: options.rateLimit }),
      ...(options.rateWindowMs === undefined ? {} : { rateWindowMs: options.rateWindowMs }),
      ...(options.authFailureLimit === undefined ? {} : { authFailureLimit: options.authFailureLimit }),
      publicScheme: this.publicScheme === 'https' ? 'https' : 'http',
      publicUrlOf: (subdomain) => this.publicUrl(subdomain),
      ...(options.dashboardSessions === undefined ? {} : { sessions: options.dashboardSessions }),
      secrets: this.secrets,
      ...(options.signInLimits === undefined ? {} : { signInLimits: options.signInLimits }),
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
    this.app = this.tls === null ? uws.App() : null;
    if (this.app !== null) this.routes(this.app);
  }

  /** Opens the store (and joins the cluster), binds the port and starts the coarse timer. */
  static async start(options: EdgeOptions): Promise<Edge> {
    const cluster =
      options.cluster === undefined
        ? null
        : await ClusterConnection.open(options.cluster, options.plans === undefined ? {} : { plans: options.plans }, options.log ?? ((line) => process.stderr.write(`${line}\n`)));
    let edge: Edge;
    try {
      edge = new Edge(options, cluster);
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

  /** The API's base URL as users see it: on its own host with `apiHost`, else on the domain. */
  get url(): string {
    return `${this.publicScheme}://${this.options.apiHost?.toLowerCase() ?? this.domain}${this.portSuffix()}`;
  }

  publicUrl(subdomain: string): string {
    return `${this.publicScheme}://${subdomain}.${this.domain}${this.portSuffix()}`;
  }

  private portSuffix(): string {
    const port = this.options.publicPort ?? this.port;
    if ((this.publicScheme === 'http' && port === 80) || (this.publicScheme === 'https' && port === 443)) return '';
    return `:${port}`;
  }

  private async listen(host: string, port: number): Promise<void> {
    const failed = async (reason: string): Promise<never> => {
      if (this.listenSocket !== null) uws.us_listen_socket_close(this.listenSocket);
      this.listenSocket = null;
      this.tls?.close();
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
    if (this.app !== null) {
      const listening = await listenAlone(this.app, host, port);
      if ('refused' in listening) return listening.refused;
      this.listenSocket = listening.socket;
      this.port = listenPort(listening.socket);
      return null;
    }
    try {
      await this.tls!.listen(host, port);
      this.port = this.tls!.port;
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
   * SIGHUP: reads the certificate files again; new TLS connections get the new certificate, tunnels and
   * other established connections are kept. A bad file is an error and the old certificate stays.
   */
  async reloadCertificates(): Promise<CertificateSummary> {
    if (this.tls === null) throw new Error('this edge serves plain HTTP: there are no certificates to reload');
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
    if (this.ticks % 240 === 0) this.api.sweep();
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

  // ---- routes -----------------------------------------------------------------------------------------

  private routes(app: TemplatedApp): void {
    app.ws<SocketData>('/*', {
      compression: uws.DISABLED,
      maxPayloadLength: this.options.maxWebSocketMessage ?? 4 * 1024 * 1024,
      // Far above the session's high-water mark: with credit in force, a send is never dropped.
      maxBackpressure: 64 * 1024 * 1024,
      closeOnBackpressureLimit: 0,
      idleTimeout: 32,
      sendPingsAutomatically: true,
      upgrade: (res, req, context) => {
        if (this.stopped) res.close();
        else this.onUpgrade(res, req, context);
      },
      open: (ws) => {
        const data = ws.getUserData();
        if (data.session !== null) {
          data.session.attach(ws);
          // Every tunnel socket is a TunnelSession (connectTunnel); SocketData names it by its socket interface.
          this.offline.tunnelConnected(data.session as TunnelSession);
        } else data.passthrough?.onPublicOpen(ws);
      },
      message: (ws, message, isBinary) => {
        const data = ws.getUserData();
        if (data.session !== null) data.session.onMessage(message, isBinary);
        else data.passthrough?.onPublicMessage(message, isBinary);
      },
      drain: (ws) => {
        const data = ws.getUserData();
        if (data.session !== null) data.session.onDrain();
        else data.passthrough?.onPublicDrain();
      },
      close: (ws, code, message) => {
        const data = ws.getUserData();
        // The reason is copied now: uWS reuses its memory when this callback returns.
        if (data.session !== null) data.session.onClose(code, Buffer.from(message).toString());
        else data.passthrough?.onPublicClose(code, message);
      },
    });
    app.any('/*', (res, req) => {
      if (this.stopped) {
        // A kept-alive connection outlived the listener: the stores it would reach are closed.
        res.close();
        return;
      }
      const target = this.hosts.resolve(req.getHeader('host'));
      // Public requests have their framing checked on the header walk they need anyway.
      if (target.kind === 'tunnel') this.servePublic(res, req, target.subdomain);
      else if (this.refusedFraming(res, req, target.kind === 'api' ? this.apiHostHeaders : NO_HEADERS)) return;
      else if (this.hop !== null && this.hop.servesInternal(res, req)) return;
      else if (target.kind === 'api') {
        if (!(target.dashboard && serveDashboard(res, req, this.dashboardHeaders))) this.serveApi(res, req, target.dashboard);
      } else writeApiResponse(res, errorResponse(new BurrowError('NOT_FOUND', 'Unknown host.')), false);
    });
  }

  /** Refuses (400, connection closed) a request to the API or an unknown host whose framing is ambiguous. */
  private refusedFraming(res: HttpResponse, req: HttpRequest, headers: readonly (readonly [string, string])[]): boolean {
    const problem = requestFramingProblem(req);
    if (problem === null) return false;
    refuseAndClose(res, () => writeApiResponse(res, errorResponse(new BurrowError('INVALID_REQUEST', problem)), false, true, headers));
    return true;
  }

  // ---- the API ----------------------------------------------------------------------------------------

  private serveApi(res: HttpResponse, req: HttpRequest, dashboardHost: boolean): void {
    const method = req.getCaseSensitiveMethod();
    // Behind a trusted proxy, the scheme and host the browser used are the forwarded ones (the
    // dashboard's CSRF rule compares the Origin with them).
    const origin = requestOrigin(res, req, this.proxies, this.publicScheme);
    const apiRequest: ApiRequest = {
      method,
      path: req.getUrl(),
      query: req.getQuery() ?? '',
      headers: {
        authorization: req.getHeader('authorization'),
        'content-type': req.getHeader('content-type'),
        cookie: req.getHeader('cookie'),
        origin: req.getHeader('origin'),
        host: origin.forwardedHost === '' ? req.getHeader('host') : origin.forwardedHost,
        'x-burrow-csrf': req.getHeader('x-burrow-csrf'),
      },
      scheme: origin.proto,
      body: null,
      clientAddress: origin.client,
      dashboardHost,
    };
    const isHead = method === 'HEAD';
    const lengthHeader = req.getHeader('content-length');
    const chunked = req.getHeader('transfer-encoding') !== '';
    const length = lengthHeader === '' ? 0 : Number(lengthHeader);
    const tooLarge = (): void =>
      writeApiResponse(res, errorResponse(new BurrowError('PAYLOAD_TOO_LARGE', `The body is larger than ${this.apiBodyLimit} bytes.`)), isHead, true, this.apiHostHeaders);
    const exchange = { aborted: false };
    res.onAborted(() => {
      exchange.aborted = true;
    });
    gatherBody(res, { contentLength: length, chunked }, this.apiBodyLimit, () => exchange.aborted, tooLarge, (body) => {
      apiRequest.body = body;
      this.dispatchApi(res, apiRequest, exchange, isHead);
    });
  }

  private dispatchApi(res: HttpResponse, request: ApiRequest, exchange: { aborted: boolean }, isHead: boolean): void {
    this.apiInFlight++;
    this.api.handle(request).then(
      (response) => {
        this.apiInFlight--;
        if (response.status >= 400) this.observer.refused('api', (response.body as { error?: { code?: string } } | undefined)?.error?.code ?? '');
        if (!exchange.aborted) res.cork(() => writeApiResponse(res, response, isHead, false, this.apiHostHeaders));
      },
      (error: unknown) => {
        this.apiInFlight--;
        this.observer.refused('api', 'INTERNAL_ERROR');
        this.log(`api: ${(error as Error).stack ?? error}`);
        if (!exchange.aborted) res.cork(() => writeApiResponse(res, errorResponse(new BurrowError('INTERNAL_ERROR')), isHead, false, this.apiHostHeaders));
      },
    );
  }

  // ---- public traffic ---------------------------------------------------------------------------------

  /** The live session of `subdomain` with room for a stream, or undefined once the refusal is written. */
  private sessionFor(res: HttpResponse, req: HttpRequest, subdomain: string, forwarded = false): TunnelSession | undefined {
    const session = this.registry.session(subdomain);
    if (session === undefined) {
      // Cluster mode: the tunnel is connected here, but its lease lapsed while the store is away.
      if (this.cluster?.lapsed(subdomain) === true) {
        this.refusePublic(res, req, subdomain, 'STORE_UNAVAILABLE', `The cluster's store is unreachable from this edge, which cannot vouch for ${subdomain} until it is back.`, false, RETRY_SOON);
        return undefined;
      }
      // Asked as the owner by another edge: say so, and that edge forgets its cached owner (never forwarded again).
      this.refusePublic(res, req, subdomain, 'TUNNEL_NOT_FOUND', this.notFoundMessage(subdomain), false, forwarded ? NOT_OWNER : undefined);
      return undefined;
    }
    if (!session.hasRoom()) {
      this.refusePublic(res, req, subdomain, 'TUNNEL_BUSY', undefined, false, RETRY_SOON);
      return undefined;
    }
    return session;
  }

  private notFoundMessage(subdomain: string): string {
    return `No tunnel is connected on ${subdomain}.${this.domain}.`;
  }

  /** Answers a public request with the edge's error, counted and access-logged (inside the uWS handler). */
  private refusePublic(
    res: HttpResponse,
    req: HttpRequest,
    subdomain: string,
    code: ErrorCode,
    message?: string,
    closeConnection = false,
    extraHeaders?: readonly [string, string][],
  ): void {
    this.observeRefusal(res, req, subdomain, code);
    writePublicError(res, code, message, closeConnection, extraHeaders, req.getHeader('accept'));
  }

  /** Counts and access-logs a public request the edge refuses (while `req` is valid: in the uWS handler). */
  private observeRefusal(res: HttpResponse, req: HttpRequest, subdomain: string, code: ErrorCode): void {
    if (!this.observer.watching) return;
    const query = req.getQuery();
    const url = req.getUrl();
    const client = requestOrigin(res, req, this.proxies, this.publicScheme).client;
    this.observer.publicRefused(code, ERROR_CODES[code].status, subdomain, req.getCaseSensitiveMethod(), query ? `${url}?${query}` : url, client);
  }

  private servePublic(res: HttpResponse, req: HttpRequest, subdomain: string): void {
    // A request another edge of the cluster forwarded (with the secret) carries the client's own origin.
    const forwarded = this.hop === null ? null : this.hop.forwardedOrigin(req);
    let clientAddress: string;
    let head: PublicRequestHead;
    let proto: string;
    if (forwarded === null) {
      const origin = requestOrigin(res, req, this.proxies, this.publicScheme);
      ({ client: clientAddress, proto } = origin);
      head = readPublicRequestHead(req, origin.hop, origin.proto, origin.forwardedHost);
    } else {
      ({ client: clientAddress, proto } = forwarded);
      head = readPublicRequestHead(req, '', proto, '', true);
    }
    const framingProblem = head.framingProblem;
    if (framingProblem !== null) {
      this.observeRefusal(res, req, subdomain, 'INVALID_REQUEST');
      const accept = req.getHeader('accept');
      refuseAndClose(res, () => writePublicError(res, 'INVALID_REQUEST', framingProblem, true, undefined, accept));
      return;
    }
    if (this.offline.serves(res, req, head, subdomain, clientAddress)) return;
    if (this.hop !== null && forwarded === null && this.registry.session(subdomain) === undefined) {
      this.forwardPublic(res, req, subdomain, head, clientAddress, proto);
      return;
    }
    const session = this.sessionFor(res, req, subdomain, forwarded !== null);
    if (session === undefined) return;
    const method = req.getCaseSensitiveMethod();
    const url = req.getUrl();
    const query = req.getQuery();
    if (head.contentLength > this.maxRequestBody) {
      this.observeRefusal(res, req, subdomain, 'PAYLOAD_TOO_LARGE');
      const accept = req.getHeader('accept');
      const refusal = { aborted: false };
      res.onAborted(() => {
        refusal.aborted = true;
      });
      discardBody(
        res,
        () => refusal.aborted,
        () => writePublicError(res, 'PAYLOAD_TOO_LARGE', `The request body is larger than ${this.maxRequestBody} bytes.`, true, undefined, accept),
      );
      return;
    }
    const stream = session.openPublicHttp(
      res,
      { method, path: query ? `${url}?${query}` : url, headers: head.headers, clientAddress },
      method === 'HEAD',
    );
    res.onAborted(() => stream.onAborted());
    const length = head.contentLength;
    if (length <= 0 && !head.chunked) {
      stream.sendOpen(null, true);
      return;
    }
    if (length > 0 && length <= this.settings.maxFrameBody) {
      // The fast path: gather the body (usually one chunk, passed on without a copy) into one OPEN.
      let gathered: Buffer | null = null;
      let offset = 0;
      res.onData((chunk, isLast) => {
        if (gathered === null && isLast) {
          stream.sendOpen(new Uint8Array(chunk), true);
          return;
        }
        gathered ??= Buffer.allocUnsafe(length);
        const bytes = new Uint8Array(chunk);
        gathered.set(bytes.subarray(0, Math.min(bytes.byteLength, length - offset)), offset);
        offset += bytes.byteLength;
        if (isLast) stream.sendOpen(gathered.subarray(0, Math.min(offset, length)), true);
      });
      return;
    }
    stream.sendOpen(null, false);
    let received = 0;
    const limit = this.maxRequestBody;
    res.onData((chunk, isLast) => {
      if (stream.closed) return;
      received += chunk.byteLength;
      if (received > limit) {
        // The 413 waits until the rest of the body was read and dropped (bounded), as above.
        const refuse = (): void => stream.cancel('PAYLOAD_TOO_LARGE', `The request body is larger than ${limit} bytes.`);
        if (isLast) refuse();
        else discardBody(res, () => stream.closed, refuse, received);
        return;
      }
      stream.sendBody(new Uint8Array(chunk), isLast);
    });
  }

  /** No session here, in cluster mode: the edge holding the tunnel answers, through the internal hop. */
  private forwardPublic(res: HttpResponse, req: HttpRequest, subdomain: string, head: PublicRequestHead, clientAddress: string, proto: string): void {
    const method = req.getCaseSensitiveMethod();
    const url = req.getUrl();
    const query = req.getQuery();
    const path = query ? `${url}?${query}` : url;
    this.hop!.forwardHttp(
      res,
      { subdomain, method, path, headers: head.headers, contentLength: head.contentLength, chunked: head.chunked, clientAddress, proto, notFound: this.notFoundMessage(subdomain) },
      { maxRequestBody: this.maxRequestBody, requestTimeoutMs: this.deps.requestTimeoutMs },
      (code) => this.observer.watching && this.observer.publicRefused(code, ERROR_CODES[code].status, subdomain, method, path, clientAddress),
    );
  }

  // ---- WebSockets -------------------------------------------------------------------------------------

  private onUpgrade(res: HttpResponse, req: HttpRequest, context: us_socket_context_t): void {
    const target = this.hosts.resolve(req.getHeader('host'));
    const headers = target.kind === 'api' ? this.apiHostHeaders : NO_HEADERS;
    if (this.refusedFraming(res, req, headers)) return;
    if (target.kind === 'api' && req.getUrl() === CONNECT_PATH) this.connectTunnel(res, req, context);
    else if (target.kind === 'tunnel') this.upgradePublic(res, req, context, target.subdomain);
    else writeApiResponse(res, errorResponse(new BurrowError('NOT_FOUND', `No WebSocket endpoint at ${req.getUrl()}.`)), false, false, headers);
  }

  /**
   * A tunnel client connects: every check happens here, and a refusal is a plain HTTP error. The checks
   * may wait for the store (Redis in cluster mode); the admission and the upgrade then run in one turn,
   * so two connects of one account cannot both pass its tunnel cap in between.
   */
  private connectTunnel(res: HttpResponse, req: HttpRequest, context: us_socket_context_t): void {
    const clientAddress = requestOrigin(res, req, this.proxies, this.publicScheme).client;
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
      if (!connect.aborted) res.cork(() => writeApiResponse(res, errorResponse(refusal), false, false, this.apiHostHeaders));
    };
    const admit = async (): Promise<void> => {
      const principal = await this.api.authorize(authorization, clientAddress);
      if (principal instanceof BurrowError) throw principal;
      this.accounts.touchToken(principal.token.idSegment).catch(() => undefined);
      if (version !== String(PROTOCOL_VERSION)) {
        throw new BurrowError(
          'INVALID_REQUEST',
          `This edge speaks tunnel protocol ${PROTOCOL_VERSION} and the client sent ${version === '' ? 'none' : version}; update the client.`,
        );
      }
      const portText = query.get('port') ?? '';
      const port = /^[0-9]{1,5}$/.test(portText) ? Number(portText) : 0;
      if (port < 1 || port > 65535) throw new BurrowError('INVALID_REQUEST', 'The "port" query parameter must be the local port, 1 to 65535.');
      const requested = query.get('subdomain');
      const instance = query.get('instance');
      if (instance !== null && !INSTANCE_ID.test(instance)) throw new BurrowError('INVALID_REQUEST', 'The "instance" query parameter must be 8 to 64 of A-Z, a-z, 0-9, "_" and "-".');
      const runSpec = policyHeader === '' ? undefined : decodePolicyHeader(policyHeader);
      if (runSpec !== undefined && requested !== null && requested !== '' && (await this.accounts.getReservation(requested.toLowerCase()))?.policy !== undefined) {
        throw new BurrowError(
          'INVALID_REQUEST',
          `The reserved subdomain "${requested.toLowerCase()}" has a stored policy; change it with "burrow reserve ${requested.toLowerCase()} ..." or connect without policy flags.`,
        );
      }
      // Passwords are hashed here, once per connect; secrets sealed as on a reservation (one code path).
      const runPolicy = runSpec === undefined ? undefined : await storePolicy(runSpec, undefined, this.secrets);
      const unenforced = rulesNotYetEnforced(runPolicy ?? (requested === null || requested === '' ? undefined : (await this.accounts.getReservation(requested.toLowerCase()))?.policy));
      if (unenforced.length > 0) {
        // The public listener does not apply access rules to live traffic yet (docs/policies.md): a tunnel
        // that asks for one is refused rather than served without the protection it asked for.
        throw new BurrowError(
          'INVALID_REQUEST',
          `This edge stores access rules but does not yet apply them to live traffic (${unenforced.join(', ')}); the tunnel was not opened rather than served open to anyone. ` +
            'Connect without policy flags, or clear the reservation\'s policy (burrow reserve NAME --clear-policy).',
        );
      }
      const account = principal.account;
      const limits = this.accounts.planLimits(account.plan);
      if (connect.aborted) return;
      // One edge admits in this turn (no await between its cap check and the upgrade); a cluster takes the
      // name's lease in Redis, atomically with its own cap check, and gives it back if the client left.
      const admitted = this.registry.admit(account.id, limits.activeTunnels, requested === null || requested === '' ? null : requested.toLowerCase(), {
        tokenId: principal.token.id,
        port,
        clientAddress,
        instance,
        replace: query.get('replace') === '1',
      });
      const subdomain = typeof admitted === 'string' ? admitted : await admitted;
      if (connect.aborted) {
        this.registry.abandon(subdomain, account.id);
        return;
      }
      const ring = this.captures.ring(account.id, subdomain, limits.capturedRequests, limits.captureBytes);
      const session = new TunnelSession(this.deps, subdomain, account.id, principal.token.id, port, this.publicUrl(subdomain), ring, instance, clientAddress);
      session.runPolicy = runPolicy;
      res.cork(() => {
        res.writeStatus('101 Switching Protocols').writeHeader(PROTOCOL_HEADER, String(PROTOCOL_VERSION));
        res.upgrade<SocketData>({ session, passthrough: null }, key, protocol, extensions, context);
      });
    };
    admit().catch(refuse);
  }

  private upgradePublic(res: HttpResponse, req: HttpRequest, context: us_socket_context_t, subdomain: string): void {
    const forwarded = this.hop === null ? null : this.hop.forwardedOrigin(req);
    if (this.hop !== null && forwarded === null && this.registry.session(subdomain) === undefined) {
      this.forwardUpgrade(res, req, context, subdomain);
      return;
    }
    const session = this.sessionFor(res, req, subdomain, forwarded !== null);
    if (session === undefined) return;
    let clientAddress: string;
    let head: PublicRequestHead;
    if (forwarded === null) {
      const origin = requestOrigin(res, req, this.proxies, this.publicScheme);
      clientAddress = origin.client;
      head = readPublicRequestHead(req, origin.hop, origin.proto, origin.forwardedHost);
    } else {
      clientAddress = forwarded.client;
      head = readPublicRequestHead(req, '', forwarded.proto, '', true);
    }
    const url = req.getUrl();
    const query = req.getQuery();
    const stream = new PassthroughStream(
      session.newStreamId(),
      session,
      { method: 'GET', path: query ? `${url}?${query}` : url, headers: head.headers, clientAddress },
      res,
      context,
      { key: head.secWebSocketKey, protocol: head.secWebSocketProtocol, extensions: head.secWebSocketExtensions },
      this.options.maxWebSocketMessage ?? 4 * 1024 * 1024,
    );
    res.onAborted(() => stream.upgradeAborted());
    session.registerPassthrough(stream);
    stream.start();
  }

  /** No session here, in cluster mode: the upgrade goes to the edge holding the tunnel. */
  private forwardUpgrade(res: HttpResponse, req: HttpRequest, context: us_socket_context_t, subdomain: string): void {
    const origin = requestOrigin(res, req, this.proxies, this.publicScheme);
    const clientAddress = origin.client;
    const proto = origin.proto;
    const head = readPublicRequestHead(req, origin.hop, proto, origin.forwardedHost);
    const url = req.getUrl();
    const query = req.getQuery();
    const path = query ? `${url}?${query}` : url;
    this.hop!.forwardUpgrade(
      res,
      context,
      { subdomain, path, headers: head.headers, key: head.secWebSocketKey, protocol: head.secWebSocketProtocol, clientAddress, proto, notFound: this.notFoundMessage(subdomain) },
      this.options.maxWebSocketMessage ?? 4 * 1024 * 1024,
      (code) => this.observer.watching && this.observer.publicRefused(code, ERROR_CODES[code].status, subdomain, 'GET', path, clientAddress),
    );
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
    // From here on /healthz answers 503: a load balancer stops sending before the drain ends.
    this.draining = true;
    // In a cluster, a closed listener reads as "gone" to the other edges' takeovers: serve nothing new from here.
    this.cluster?.quiesce();
    if (this.listenSocket !== null) {
      uws.us_listen_socket_close(this.listenSocket);
      this.listenSocket = null;
    }
    this.tls?.close();
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

/**
 * Writes an API response (inside a cork). JSON, never cached; `closeConnection` after an unread body;
 * `extraHeaders` the edge's own (HSTS on the API host).
 */
export function writeApiResponse(
  res: HttpResponse,
  response: ApiResponse,
  isHead: boolean,
  closeConnection = false,
  extraHeaders: readonly (readonly [string, string])[] = NO_HEADERS,
): void {
  res.writeStatus(statusLine(response.status));
  if (response.headers !== undefined) {
    for (const [name, value] of response.headers) res.writeHeader(name, value);
  }
  for (const [name, value] of extraHeaders) res.writeHeader(name, value);
  res.writeHeader('cache-control', 'no-store');
  if (response.status === 204 || response.body === undefined) {
    // No length argument at all: uWS reads an explicit `undefined` as a huge Content-Length (or aborts),
    // and a 204 must carry no Content-Length.
    if (closeConnection) res.endWithoutBody(0, true);
    else res.endWithoutBody();
    return;
  }
  const body = JSON.stringify(response.body);
  res.writeHeader('content-type', 'application/json; charset=utf-8');
  if (isHead) endHeadResponse(res, Buffer.byteLength(body), closeConnection);
  else res.end(body, closeConnection);
}

/**
 * The access rules of `policy` (who may reach the tunnel) that this build does not apply to live traffic
 * yet: a tunnel relying on one is refused, never served open. Webhook verification (it guards the offline
 * queue already; on a live tunnel the local app still checks signatures itself), header rules and the rate
 * limit are stored and taken, and docs/policies.md says they are not applied to live traffic yet.
 */
function rulesNotYetEnforced(policy: StoredPolicy | undefined): string[] {
  if (policy === undefined) return [];
  const rules: string[] = [];
  if ((policy.basicAuth?.length ?? 0) > 0) rules.push('basic auth');
  if ((policy.allowCidr?.length ?? 0) > 0 || (policy.denyCidr?.length ?? 0) > 0) rules.push('CIDR rules');
  if (policy.oidc !== undefined) rules.push('OIDC');
  return rules;
}
