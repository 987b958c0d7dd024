/**
 * The local inspector (spec section 1 and section 4's "Local inspector interface"): a uWebSockets.js app
 * on a loopback address (127.0.0.1:4040 by default) serving
 * - the page (src/inspector/page/),
 * - a JSON API: GET /api/requests, GET /api/requests/:id, POST /api/requests/:id/replay, GET /api/status,
 * - a live feed: a WebSocket at /api/live pushing each new exchange's summary to the page.
 *
 * Exchanges come from the TunnelClients' 'exchange' events into a bounded ring (ring.ts): one client for
 * `burrow http`, several named ones for `burrow start` (each exchange then carries its tunnel's name,
 * and /api/status lists the tunnels). Recording is
 * O(1) and serialises nothing; the feed batches summaries on one short timer and only while someone is
 * subscribed, and a subscriber whose socket buffer is full is skipped (then told to resync once it
 * drains), never buffered for without bound.
 *
 * Replays go through the edge's replay API, so they reach the local handler the way the original did
 * (the tunnel, the routes) and the edge captures them under a new `req_` id; the new exchange arrives
 * here as an ordinary 'exchange' event and is marked `replay_of` when the edge answers.
 * docs/inspector.md explains the choice.
 */
import { isUtf8 } from 'node:buffer';
import { request } from 'undici';
import { refuseTruncatedReplay, takeAllowTruncated, validateReplayOverrides } from '../api/api.js';
import type { ReplayOverrides } from '../api/types.js';
import type { Exchange } from '../client/exchange.js';
import type { Tunnel } from '../client/tunnel.js';
import type { BoundTunnel } from '../client/bound-tunnel.js';
import type { MultiEdgeBoundTunnel } from '../client/multi-edge.js';
import type { RawConnectionEnd } from '../client/raw-stream.js';
import type { EventEmitter } from 'node:events';

/** A tunnel the inspector shows: `burrow http`'s (one session, or one on several edges), or one of `burrow start`'s tunnels. */
type InspectedTunnel = Tunnel | BoundTunnel | MultiEdgeBoundTunnel;
import { BurrowError, isErrorCode } from '../errors.js';
import { statusLine } from '../edge/responses.js';
import { peerText } from '../edge/raw-stream.js';
import { connectionRecordKind } from '../store/captures.js';
import { listenAlone, listenPort, uws, type HttpRequest, type HttpResponse, type TemplatedApp, type us_listen_socket, type us_socket_context_t, type WebSocket } from '../uws.js';
import { DEFAULT_INSPECT_HOST, DEFAULT_INSPECT_PORT, urlHost } from './address.js';
import { loadAssets, type Asset } from './assets.js';
import { curlCommand, type CurlTarget } from './curl.js';
import { harLog } from './har.js';
import { deliveryOf, exchangeJson, summaryJson } from './json.js';
import { matchesSearch, searchWords } from './search.js';
import { ExchangeRing, type Entry, type RingOptions } from './ring.js';
import { allowedHosts, hostAllowed, isJsonContentType, originAllowed } from './security.js';

export interface InspectorOptions extends RingOptions {
  /** A loopback IP literal to bind (default 127.0.0.1). */
  host?: string;
  /** The first port to try (default 4040); 0 picks any free port. */
  port?: number;
  /** Further ports tried, one after another, when `port` is taken (default 0: `port` or fail). */
  portTries?: number;
  /** The edge and token replays go through (the tunnel client's own). */
  edge?: string;
  token?: string;
  /** The live feed sends at most one message per subscriber per this many milliseconds (default 50). */
  feedIntervalMs?: number;
  /** A subscriber with more than this many bytes unsent is skipped until it drains (default 1 MiB). */
  feedMaxBuffered?: number;
  /** Largest request body the API reads (default 1 MiB). */
  maxBodyBytes?: number;
  /** Captures loaded from the edge's history when the tunnel is first ready (default 100; 0: none). */
  historyCount?: number;
  log?: (line: string) => void;
}

/** A tunnel client this inspector records: `burrow start`'s carry their name, `burrow http`'s is null. */
interface AttachedTunnel {
  client: InspectedTunnel;
  name: string | null;
  history: { loaded: number; error: string | null; started: boolean };
  detach: () => void;
}

interface FeedSocket {
  /** Skipped messages since its buffer filled: it gets a resync once it drains. */
  lagging: boolean;
}

const REQUEST_PATH = /^\/api\/requests\/([^/]+)$/;
const REPLAY_PATH = /^\/api\/requests\/([^/]+)\/replay$/;
const CURL_PATH = /^\/api\/requests\/([^/]+)\/curl$/;
/** Replays the edge answered before their exchange arrived: new id → original id (bounded). */
const MAX_PENDING_REPLAYS = 256;

export class Inspector {
  readonly ring: ExchangeRing;
  readonly host: string;
  port = 0;
  private readonly app: TemplatedApp;
  private listenSocket: us_listen_socket | null = null;
  private allowed: Set<string> = new Set();
  private readonly assets: Map<string, Asset>;
  private readonly subscribers = new Set<WebSocket<FeedSocket>>();
  private pending: Entry[] = [];
  private flushTimer: NodeJS.Timeout | null = null;
  private readonly pendingReplays = new Map<string, string>();
  /** History entries whose detail is still at the edge (only the list's fields are here). */
  private readonly edgeDetailPending = new Set<string>();
  /** By name, in the order attached. */
  private readonly tunnels = new Map<string | null, AttachedTunnel>();
  private closed = false;
  private readonly feedIntervalMs: number;
  private readonly feedMaxBuffered: number;
  private readonly maxBodyBytes: number;
  private readonly log: (line: string) => void;

  private constructor(private readonly options: InspectorOptions) {
    this.ring = new ExchangeRing(options);
    this.host = options.host ?? DEFAULT_INSPECT_HOST;
    this.feedIntervalMs = options.feedIntervalMs ?? 50;
    this.feedMaxBuffered = options.feedMaxBuffered ?? 1024 * 1024;
    this.maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
    this.log = options.log ?? (() => {});
    this.assets = loadAssets();
    this.app = uws.App();
    this.routes();
  }

  /** Starts listening; rejects when no port could be bound (each tried port is named). */
  static async start(options: InspectorOptions = {}): Promise<Inspector> {
    const inspector = new Inspector(options);
    await inspector.listen(options.port ?? DEFAULT_INSPECT_PORT, options.portTries ?? 0);
    return inspector;
  }

  /** The page's address. */
  get url(): string {
    return `http://${urlHost(this.host)}:${this.port}`;
  }

  /**
   * Records every exchange of `client` and shows its state on /api/status; returns the detach function.
   * `name` is the tunnel's in `burrow start` (stamped on its exchanges); a client attached under a name
   * already attached (null included) takes that one's place.
   */
  attach(client: InspectedTunnel, name: string | null = null): () => void {
    this.tunnels.get(name)?.detach();
    const tunnel: AttachedTunnel = { client, name, history: { loaded: 0, error: null, started: false }, detach: () => {} };
    const onExchange =
      name === null
        ? (exchange: Exchange): void => this.record(exchange)
        : (exchange: Exchange): void => {
            exchange.tunnel = name;
            this.record(exchange);
          };
    const onState = (): void => {
      this.broadcast(JSON.stringify({ type: 'status', status: this.status() }));
      if (client.connected) void this.loadHistory(tunnel);
    };
    // A tcp or tls tunnel's connections, as each ends (an http tunnel has none).
    const onConnection = (end: RawConnectionEnd): void => this.record(connectionExchange(end, client.routes.defaultPort, name));
    const connections = client as unknown as EventEmitter<{ connection: [RawConnectionEnd] }>;
    client.on('exchange', onExchange);
    client.on('websocket', onExchange);
    connections.on('connection', onConnection);
    client.on('ready', onState);
    client.on('reconnecting', onState);
    client.on('closed', onState);
    // `burrow start`'s tunnels (MultiEdgeBoundTunnel) tell their first BOUND only through `started`, not 'ready'.
    if ('started' in client) {
      client.started.then(
        () => {
          if (this.tunnels.get(name) === tunnel) onState();
        },
        () => undefined,
      );
    }
    tunnel.detach = () => {
      client.off('exchange', onExchange);
      client.off('websocket', onExchange);
      connections.off('connection', onConnection);
      client.off('ready', onState);
      client.off('reconnecting', onState);
      client.off('closed', onState);
      if (this.tunnels.get(name) === tunnel) this.tunnels.delete(name);
    };
    this.tunnels.set(name, tunnel);
    if (client.connected) void this.loadHistory(tunnel);
    return tunnel.detach;
  }

  /** Keeps an exchange: O(1), nothing serialised here. */
  record(exchange: Exchange): void {
    if (this.closed) return;
    if (this.pendingReplays.size > 0) {
      const original = this.pendingReplays.get(exchange.id);
      if (original !== undefined) {
        this.pendingReplays.delete(exchange.id);
        exchange.replayOf = original;
      }
    }
    // Seen live while its history entry was loading: the live one is the complete one.
    if (this.edgeDetailPending.size > 0) this.edgeDetailPending.delete(exchange.id);
    const entry = this.ring.add(exchange);
    if (this.subscribers.size > 0) this.queue(entry);
  }

  /** Stops listening and closes every connection, the live feed's included. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const tunnel of [...this.tunnels.values()]) tunnel.detach();
    if (this.flushTimer !== null) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    if (this.listenSocket !== null) uws.us_listen_socket_close(this.listenSocket);
    this.listenSocket = null;
    for (const ws of [...this.subscribers]) ws.close();
    this.subscribers.clear();
    // Closes the keep-alive connections too (present in the binary, missing from its typings).
    (this.app as unknown as { close?: () => void }).close?.();
  }

  /** The live feed's state: subscribers, those skipped for a full buffer, bytes unsent, summaries queued. */
  feedStats(): { subscribers: number; lagging: number; buffered: number; queued: number } {
    let lagging = 0;
    let buffered = 0;
    for (const ws of this.subscribers) {
      if (ws.getUserData().lagging) lagging++;
      buffered += ws.getBufferedAmount();
    }
    return { subscribers: this.subscribers.size, lagging, buffered, queued: this.pending.length };
  }

  /**
   * The tunnels and the ring. The top-level tunnel fields are the first tunnel's (the only one under
   * `burrow http`), with counters summed and `connected` true when every tunnel is; `tunnels` lists each.
   */
  status(): Record<string, unknown> {
    const tunnels = [...this.tunnels.values()];
    const first = tunnels[0]?.client ?? null;
    const sum = (count: (client: InspectedTunnel) => number): number => tunnels.reduce((total, tunnel) => total + count(tunnel.client), 0);
    return {
      connected: tunnels.length > 0 && tunnels.every((tunnel) => tunnel.client.connected),
      public_url: first?.publicUrl ?? null,
      default_port: first?.routes.defaultPort ?? null,
      routes: first === null ? [] : routesJson(first),
      active_streams: sum((client) => client.activeStreams),
      requests: sum((client) => client.stats.requests),
      errors: sum((client) => client.stats.errors),
      bytes_in: sum((client) => client.stats.bytesIn),
      bytes_out: sum((client) => client.stats.bytesOut),
      recorded: this.ring.size,
      recorded_bytes: this.ring.bytes,
      max_exchanges: this.ring.maxExchanges,
      max_bytes: this.ring.maxBytes,
      replay: this.options.edge !== undefined && this.options.token !== undefined,
      history: { loaded: tunnels.reduce((total, tunnel) => total + tunnel.history.loaded, 0), error: tunnels.find((tunnel) => tunnel.history.error !== null)?.history.error ?? null },
      tunnels: tunnels.map(({ client, name, history }) => ({
        name,
        connected: client.connected,
        public_url: client.publicUrl,
        default_port: client.routes.defaultPort,
        routes: routesJson(client),
        active_streams: client.activeStreams,
        requests: client.stats.requests,
        errors: client.stats.errors,
        bytes_in: client.stats.bytesIn,
        bytes_out: client.stats.bytesOut,
        history: { loaded: history.loaded, error: history.error },
      })),
    };
  }

  /** The tunnel an exchange came through (by its name), while it is attached. */
  private tunnelOf(exchange: Exchange): AttachedTunnel | undefined {
    return this.tunnels.get(exchange.tunnel ?? null);
  }

  // ---- listening --------------------------------------------------------------------------------------

  private async listen(first: number, tries: number): Promise<void> {
    const taken: number[] = [];
    for (let port = first; port <= Math.min(65535, first + tries); port++) {
      const socket = await this.listenOn(port);
      if (socket !== false) {
        this.listenSocket = socket;
        this.port = listenPort(socket);
        this.allowed = allowedHosts(this.port, this.host);
        return;
      }
      taken.push(port);
      if (port === 0) break;
    }
    const ports = taken.length === 1 ? `port ${taken[0]}` : `ports ${taken[0]}-${taken[taken.length - 1]}`;
    throw new Error(`the inspector cannot listen on ${urlHost(this.host)} ${ports} (in use, or not an address of this machine)`);
  }

  private async listenOn(port: number): Promise<us_listen_socket | false> {
    // Alone: otherwise two inspectors would share 4040 silently.
    const listening = await listenAlone(this.app, this.host, port);
    return 'socket' in listening ? listening.socket : false;
  }

  // ---- routes -----------------------------------------------------------------------------------------

  private routes(): void {
    this.app.ws<FeedSocket>('/api/live', {
      compression: uws.DISABLED,
      maxPayloadLength: 4 * 1024,
      // Far above feedMaxBuffered: a subscriber is skipped long before uWS would drop a message.
      maxBackpressure: 64 * 1024 * 1024,
      closeOnBackpressureLimit: 0,
      idleTimeout: 120,
      sendPingsAutomatically: true,
      upgrade: (res, req, context) => this.onUpgrade(res, req, context),
      open: (ws) => {
        this.subscribers.add(ws);
        ws.send(JSON.stringify({ type: 'status', status: this.status() }), false);
      },
      message: () => {
        // The page sends nothing; anything it sends is ignored.
      },
      drain: (ws) => {
        const data = ws.getUserData();
        if (data.lagging && ws.getBufferedAmount() < this.feedMaxBuffered / 4) {
          data.lagging = false;
          ws.send('{"type":"resync"}', false);
        }
      },
      close: (ws) => {
        this.subscribers.delete(ws);
      },
    });
    this.app.any('/*', (res, req) => this.onRequest(res, req));
  }

  private onUpgrade(res: HttpResponse, req: HttpRequest, context: us_socket_context_t): void {
    const host = req.getHeader('host');
    const origin = req.getHeader('origin');
    const key = req.getHeader('sec-websocket-key');
    const protocol = req.getHeader('sec-websocket-protocol');
    const extensions = req.getHeader('sec-websocket-extensions');
    const refusal = this.refuseHost(host) ?? (originAllowed(origin, host) ? null : forbiddenOrigin(origin));
    if (refusal !== null) {
      writeError(res, refusal);
      return;
    }
    res.upgrade<FeedSocket>({ lagging: false }, key, protocol, extensions, context);
  }

  private refuseHost(host: string): BurrowError | null {
    if (hostAllowed(host, this.allowed)) return null;
    return new BurrowError(
      'FORBIDDEN',
      `The inspector answers only to Host localhost:${this.port}, 127.0.0.1:${this.port} or [::1]:${this.port}, not "${host}".`,
    );
  }

  private onRequest(res: HttpResponse, req: HttpRequest): void {
    const method = req.getCaseSensitiveMethod();
    const path = req.getUrl();
    const query = req.getQuery() ?? '';
    const host = req.getHeader('host');
    const hostRefusal = this.refuseHost(host);
    if (hostRefusal !== null) {
      writeError(res, hostRefusal, true);
      return;
    }
    if (method !== 'GET') {
      const origin = req.getHeader('origin');
      if (!originAllowed(origin, host)) {
        writeError(res, forbiddenOrigin(origin), true);
        return;
      }
      if (!isJsonContentType(req.getHeader('content-type'))) {
        writeError(res, new BurrowError('UNSUPPORTED_MEDIA_TYPE', 'Requests other than GET must be sent with Content-Type: application/json.'), true);
        return;
      }
    }

    if (path.startsWith('/api/')) {
      this.serveApi(res, req, method, path, query);
      return;
    }
    const asset = this.assets.get(path);
    if (asset === undefined) {
      writeError(res, new BurrowError('NOT_FOUND', `Nothing at ${path}.`), method !== 'GET');
      return;
    }
    if (method !== 'GET') {
      writeError(res, notAllowed(path, 'GET'), true);
      return;
    }
    res.writeStatus('200 OK');
    res.writeHeader('content-type', asset.contentType);
    res.writeHeader('cache-control', 'no-cache');
    res.writeHeader('x-content-type-options', 'nosniff');
    res.writeHeader('referrer-policy', 'no-referrer');
    if (asset.contentType.startsWith('text/html')) {
      // No framing (a page elsewhere cannot trick a click on Replay); nothing loads from anywhere else.
      res.writeHeader(
        'content-security-policy',
        `default-src 'self'; connect-src 'self' ws://${host}; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'`,
      );
      res.writeHeader('x-frame-options', 'DENY');
    }
    res.end(asset.body);
  }

  private serveApi(res: HttpResponse, req: HttpRequest, method: string, path: string, query: string): void {
    // A refused request's body is never read: close that connection rather than parse the body as a request.
    const unread = method !== 'GET';
    if (path === '/api/requests') {
      if (method !== 'GET') return writeError(res, notAllowed(path, 'GET'), unread);
      return this.answer(res, () => this.list(query));
    }
    if (path === '/api/har') {
      if (method !== 'GET') return writeError(res, notAllowed(path, 'GET'), unread);
      return this.serveHar(res, query);
    }
    if (path === '/api/status') {
      if (method !== 'GET') return writeError(res, notAllowed(path, 'GET'), unread);
      return writeJson(res, 200, this.status());
    }
    let match = REPLAY_PATH.exec(path);
    if (match !== null) {
      if (method !== 'POST') return writeError(res, notAllowed(path, 'POST'), unread);
      return this.serveReplay(res, req, decodeId(match[1]!));
    }
    match = CURL_PATH.exec(path);
    if (match !== null) {
      if (method !== 'GET') return writeError(res, notAllowed(path, 'GET'), unread);
      const id = decodeId(match[1]!);
      return this.answerLater(res, () => this.curl(id, query));
    }
    match = REQUEST_PATH.exec(path);
    if (match !== null) {
      if (method !== 'GET') return writeError(res, notAllowed(path, 'GET'), unread);
      const id = decodeId(match[1]!);
      if (this.edgeDetailPending.has(id)) return this.answerLater(res, async () => exchangeJson((await this.detailed(id)).exchange));
      const live = this.ring.get(id);
      if (live !== undefined && live.exchange.eventId === undefined && deliveryOf(live.exchange) !== null) {
        return this.answerLater(res, async () => exchangeJson((await this.withEventId(live)).exchange));
      }
      return this.answer(res, () => exchangeJson(this.entry(id).exchange));
    }
    writeError(res, new BurrowError('NOT_FOUND', `No inspector endpoint at ${path}.`), unread);
  }

  /** Answers at once with `build()`'s JSON, or its error. */
  private answer(res: HttpResponse, build: () => unknown): void {
    let body: unknown;
    try {
      body = build();
    } catch (error) {
      writeError(res, asBurrowError(error, this.log));
      return;
    }
    writeJson(res, 200, body);
  }

  /** Answers with `build()`'s JSON once it resolves, or its error; the client may leave meanwhile. */
  private answerLater(res: HttpResponse, build: () => Promise<unknown>): void {
    const state = { aborted: false };
    res.onAborted(() => {
      state.aborted = true;
    });
    build().then(
      (body) => {
        if (!state.aborted) res.cork(() => writeJson(res, 200, body));
      },
      (error: unknown) => {
        if (!state.aborted) res.cork(() => writeError(res, asBurrowError(error, this.log)));
      },
    );
  }

  private entry(id: string): Entry {
    const entry = this.ring.get(id);
    if (entry === undefined) throw new BurrowError('NOT_FOUND', `No request ${id} in the inspector (it keeps the last ${this.ring.maxExchanges}).`);
    return entry;
  }

  private list(query: string): { requests: unknown[] } {
    const params = new URLSearchParams(query);
    const limitText = params.get('limit');
    let limit = 50;
    if (limitText !== null) {
      if (!/^[0-9]{1,7}$/.test(limitText) || Number(limitText) < 1) {
        throw new BurrowError('INVALID_REQUEST', `"limit" must be a whole number from 1 to ${this.ring.maxExchanges}.`);
      }
      limit = Math.min(Number(limitText), this.ring.maxExchanges);
    }
    const before = params.get('before') ?? undefined;
    if (before !== undefined && this.ring.get(before) === undefined) {
      throw new BurrowError('NOT_FOUND', `No request ${before} in the inspector to list from.`);
    }
    const tunnelName = params.get('tunnel');
    const summary = params.get('summary');
    const brief = summary === '1' || summary === 'true';
    const words = searchWords(params.get('q') ?? '');
    let entries: Entry[];
    if (words.length === 0 && tunnelName === null) {
      entries = this.ring.list(limit, before);
    } else {
      // A search reads the bodies it needs, on demand: nothing is indexed as traffic passes.
      entries = [];
      let started = before === undefined;
      for (const entry of this.ring.newestFirst()) {
        if (!started) {
          started = entry.exchange.id === before;
          continue;
        }
        if ((tunnelName === null || entry.exchange.tunnel === tunnelName) && (words.length === 0 || matchesSearch(entry.exchange, words))) entries.push(entry);
        if (entries.length >= limit) break;
      }
    }
    return { requests: entries.map((entry) => (brief ? summaryJson(entry.exchange) : exchangeJson(entry.exchange))) };
  }

  // ---- replay -----------------------------------------------------------------------------------------

  private serveReplay(res: HttpResponse, req: HttpRequest, id: string): void {
    const lengthText = req.getHeader('content-length');
    const state = { aborted: false };
    res.onAborted(() => {
      state.aborted = true;
    });
    if (lengthText !== '' && Number(lengthText) > this.maxBodyBytes) {
      writeError(res, new BurrowError('PAYLOAD_TOO_LARGE', `The body is larger than ${this.maxBodyBytes} bytes.`), true);
      state.aborted = true;
      return;
    }
    const run = (body: Buffer): void => {
      this.replay(id, body).then(
        (result) => {
          if (!state.aborted) res.cork(() => writeJson(res, 200, result));
        },
        (error: unknown) => {
          if (!state.aborted) res.cork(() => writeError(res, asBurrowError(error, this.log)));
        },
      );
    };
    if ((lengthText === '' || lengthText === '0') && req.getHeader('transfer-encoding') === '') {
      run(Buffer.alloc(0));
      return;
    }
    const chunks: Buffer[] = [];
    let received = 0;
    res.onData((chunk, isLast) => {
      if (state.aborted) return;
      received += chunk.byteLength;
      if (received > this.maxBodyBytes) {
        state.aborted = true;
        writeError(res, new BurrowError('PAYLOAD_TOO_LARGE', `The body is larger than ${this.maxBodyBytes} bytes.`), true);
        return;
      }
      chunks.push(Buffer.copyBytesFrom(new Uint8Array(chunk)));
      if (isLast) run(Buffer.concat(chunks, received));
    });
  }

  /**
   * Replays `id` with the edits in `body` (JSON {headers, method, path, body, allow_truncated}, all
   * optional; a header mapped to null is removed). A request whose captured body was cut at the capture
   * limit is refused (409 REPLAY_TRUNCATED) unless `allow_truncated` is true or the body is replaced.
   */
  async replay(id: string, body: Buffer | (ReplayOverrides & { allow_truncated?: boolean }) = {}): Promise<unknown> {
    refuseConnection(this.entry(id).exchange, 'replayed');
    const original = (await this.detailed(id)).exchange;
    if (original.websocket !== undefined) {
      // The edge keeps no capture of a WebSocket connection: there is nothing it could send again.
      throw new BurrowError('INVALID_REQUEST', `${id} is a WebSocket connection; only HTTP requests can be replayed.`);
    }
    let overrides: ReplayOverrides;
    let fields: Record<string, unknown>;
    if (Buffer.isBuffer(body)) {
      let parsed: unknown = {};
      if (body.byteLength > 0) {
        try {
          parsed = JSON.parse(body.toString('utf8'));
        } catch (error) {
          throw new BurrowError('INVALID_REQUEST', `The body is not valid JSON: ${(error as Error).message}`);
        }
      }
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new BurrowError('INVALID_REQUEST', 'The body must be a JSON object.');
      fields = parsed as Record<string, unknown>;
    } else {
      fields = { ...body };
    }
    const allowTruncated = takeAllowTruncated(fields);
    overrides = validateReplayOverrides(fields);
    // The inspector's copy and the edge's are cut at the same limit by default; the edge checks its own too.
    refuseTruncatedReplay(original.requestTruncated, original.requestBodySize, overrides, allowTruncated);
    const truncated = original.requestTruncated && overrides.body === undefined;
    const { edgeUrl: edge } = this;
    const { token } = this.options;
    if (edge === undefined || token === undefined) {
      throw new BurrowError('TUNNEL_OFFLINE', 'This inspector has no edge to replay through.');
    }
    let response;
    try {
      response = await request(`${edge}/api/v1/requests/${encodeURIComponent(id)}/replay`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json' },
        // Only the known fields, named as the edge's API names them.
        body: JSON.stringify({
          ...(overrides.method === undefined ? {} : { method: overrides.method }),
          ...(overrides.path === undefined ? {} : { path: overrides.path }),
          ...(overrides.headers === undefined ? {} : { headers: overrides.headers }),
          ...(overrides.body === undefined ? {} : bodyFields(overrides.body)),
          ...(truncated ? { allow_truncated: true } : {}),
        }),
        headersTimeout: 120_000,
        bodyTimeout: 120_000,
      });
    } catch (error) {
      const cause = (error as { cause?: { code?: string } }).cause?.code ?? (error as { code?: string }).code ?? (error as Error).message;
      throw new BurrowError('EDGE_UNREACHABLE', `The edge at ${edge} is unreachable (${cause}); replays go through the tunnel.`);
    }
    const text = await response.body.text();
    let parsed: { id?: unknown; error?: { code?: unknown; message?: unknown } } | undefined;
    try {
      parsed = JSON.parse(text) as typeof parsed;
    } catch {
      parsed = undefined;
    }
    if (response.statusCode !== 200) {
      const code = parsed?.error?.code;
      const message = typeof parsed?.error?.message === 'string' ? parsed.error.message : `The edge answered ${response.statusCode}.`;
      const retry = response.headers['retry-after'];
      throw new BurrowError(isErrorCode(code) ? code : 'EDGE_UNREACHABLE', message, typeof retry === 'string' ? { 'retry-after': retry } : {});
    }
    const newId = typeof parsed?.id === 'string' ? parsed.id : null;
    if (newId === null) throw new BurrowError('INTERNAL_ERROR', 'The edge answered the replay without an id.');
    const replayed = this.markReplay(newId, id);
    // The client records the exchange before the edge can answer, so it is normally here already.
    return replayed === undefined ? { ...(parsed as object), replay_of: id, truncated } : { ...exchangeJson(replayed.exchange), truncated };
  }

  /** Marks the exchange `newId` as a replay of `original`, now or when it arrives. */
  private markReplay(newId: string, original: string): Entry | undefined {
    const entry = this.ring.get(newId);
    if (entry === undefined) {
      if (this.pendingReplays.size >= MAX_PENDING_REPLAYS) this.pendingReplays.delete(this.pendingReplays.keys().next().value!);
      this.pendingReplays.set(newId, original);
      return undefined;
    }
    if (entry.exchange.replayOf !== original) {
      entry.exchange.replayOf = original;
      if (this.subscribers.size > 0) this.queue(entry);
    }
    return entry;
  }

  // ---- curl and HAR -----------------------------------------------------------------------------------

  /** GET /api/requests/:id/curl?target=public|local (default local): {command, target, url, truncated}. */
  private async curl(id: string, query: string): Promise<unknown> {
    const targetText = new URLSearchParams(query).get('target') ?? 'local';
    if (targetText !== 'public' && targetText !== 'local') throw new BurrowError('INVALID_REQUEST', '"target" must be "public" or "local".');
    const target: CurlTarget = targetText;
    refuseConnection(this.entry(id).exchange, 'copied as curl');
    const exchange = (await this.detailed(id)).exchange;
    let base = `http://localhost:${exchange.port}`;
    if (target === 'public') {
      const publicUrl = this.tunnelOf(exchange)?.client.publicUrl ?? null;
      if (publicUrl === null) throw new BurrowError('TUNNEL_OFFLINE', 'The tunnel has no public URL right now (reconnecting or closed); copy the local command instead.');
      base = publicUrl;
    }
    return curlCommand(exchangeJson(exchange), target, base);
  }

  /** GET /api/har[?id=ID&id=...][&limit=N]: a HAR 1.2 file of those exchanges (default: all in the ring). */
  private serveHar(res: HttpResponse, query: string): void {
    const params = new URLSearchParams(query);
    const ids = params.getAll('id');
    let exchanges: Exchange[];
    try {
      if (ids.length > 0) {
        exchanges = ids.map((id) => this.entry(id).exchange);
      } else {
        const limitText = params.get('limit');
        const limit = limitText === null ? this.ring.maxExchanges : Number(limitText);
        if (!Number.isInteger(limit) || limit < 1) throw new BurrowError('INVALID_REQUEST', '"limit" must be a whole number of at least 1.');
        exchanges = this.ring.list(limit).map((entry) => entry.exchange);
      }
      // A TCP or TLS connection's record is no HTTP exchange: a HAR has no place for it.
      exchanges = exchanges.filter((exchange) => exchange.connection === undefined);
    } catch (error) {
      writeError(res, asBurrowError(error, this.log));
      return;
    }
    const stamp = new Date().toISOString().replace(/[:.]/g, '-');
    res.writeStatus('200 OK');
    res.writeHeader('content-type', 'application/json; charset=utf-8');
    res.writeHeader('content-disposition', `attachment; filename="burrow-${stamp}.har"`);
    res.writeHeader('cache-control', 'no-store');
    res.writeHeader('x-content-type-options', 'nosniff');
    res.end(JSON.stringify(harLog(exchanges.map(exchangeJson), (exchange) => this.harBase(exchange.tunnel, exchange.port)), null, 1));
  }

  /**
   * A HAR entry's URL base: the public URL of the tunnel the exchange came through (burrow start records
   * several), else that tunnel's local port while it has no public URL, else (its tunnel gone) the
   * exchange's own local port.
   */
  private harBase(tunnel: string | null, port?: number): string {
    const client = this.tunnels.get(tunnel)?.client;
    return client?.publicUrl ?? `http://localhost:${client?.routes.defaultPort ?? port ?? 80}`;
  }

  // ---- history from the edge --------------------------------------------------------------------------

  /**
   * Once per tunnel, when it is first up: the subdomain's newest captures from the edge's API, put behind
   * everything seen live and marked `source: 'edge'`. Only the list is fetched (one request); a detail
   * comes from the edge when it is first opened, so a restart costs one API call of the token's rate.
   * An edge that refuses (old, capture off, rate limited) just means no history. Without `tunnel`,
   * every attached tunnel's.
   */
  async loadHistory(tunnel?: AttachedTunnel): Promise<void> {
    if (tunnel === undefined) {
      await Promise.all([...this.tunnels.values()].map((each) => this.loadHistory(each)));
      return;
    }
    const count = this.options.historyCount ?? 100;
    const { edgeUrl: edge } = this;
    const { token } = this.options;
    const publicUrl = tunnel.client.publicUrl;
    if (tunnel.history.started || count <= 0 || edge === undefined || token === undefined || publicUrl === null) return;
    tunnel.history.started = true;
    const subdomain = recordsName(publicUrl);
    try {
      const list = (await this.edgeJson(`/api/v1/requests?subdomain=${encodeURIComponent(subdomain)}&limit=${Math.min(count, 1000)}`)) as {
        requests?: { id: string; method: string; path: string; status: number; duration_ms: number; received_at: string; rejected?: string | null; error?: string | null }[];
      };
      if (this.closed) return;
      const added: Entry[] = [];
      // Newest first: each goes behind the previous one.
      for (const item of list.requests ?? []) {
        const connection = connectionRecordKind(item);
        const entry = this.ring.addOldest({
          id: item.id,
          method: item.method,
          path: item.path,
          port: connection === undefined ? tunnel.client.routes.portFor(item.path) : tunnel.client.routes.defaultPort,
          requestHeaders: [],
          requestBody: null,
          requestBodySize: 0,
          requestTruncated: false,
          status: item.status,
          responseHeaders: [],
          responseBody: null,
          responseBodySize: 0,
          responseTruncated: false,
          startedAt: Date.parse(item.received_at),
          latencyMs: item.duration_ms,
          // A request the edge refused (its signature) never reached this client: the history is where it shows.
          // A connection's record says how it ended; its byte counts come with its detail.
          error: item.rejected === 'signature' ? 'SIGNATURE_INVALID' : connection === undefined ? null : (item.error ?? null),
          replayOf: null,
          source: 'edge',
          ...(connection === undefined ? {} : { connection }),
          ...(tunnel.name === null ? {} : { tunnel: tunnel.name }),
        });
        if (entry === undefined) continue;
        this.edgeDetailPending.add(item.id);
        added.push(entry);
      }
      tunnel.history.loaded = added.length;
      if (added.length > 0 && this.subscribers.size > 0) this.broadcast('{"type":"resync"}');
    } catch (error) {
      tunnel.history.error = (error as Error).message;
      this.log(`inspector: no history from the edge${tunnel.name === null ? '' : ` for tunnel ${tunnel.name}`}: ${(error as Error).message}`);
    }
  }

  /** The entry with its full detail: a history entry's is fetched from the edge the first time. */
  private async detailed(id: string): Promise<Entry> {
    const entry = this.entry(id);
    if (!this.edgeDetailPending.has(id)) return entry;
    const detail = (await this.edgeJson(`/api/v1/requests/${encodeURIComponent(id)}`)) as EdgeCaptureJson;
    if (!this.edgeDetailPending.delete(id)) return entry;
    const exchange = entry.exchange;
    exchange.requestHeaders = detail.request.headers.flat();
    exchange.requestBody = Buffer.from(detail.request.body, detail.request.body_encoding === 'base64' ? 'base64' : 'utf8');
    exchange.requestBodySize = detail.request.body_size;
    exchange.requestTruncated = detail.request.truncated;
    exchange.responseHeaders = detail.response.headers.flat();
    exchange.responseBody = Buffer.from(detail.response.body, detail.response.body_encoding === 'base64' ? 'base64' : 'utf8');
    exchange.responseBodySize = detail.response.body_size;
    exchange.responseTruncated = detail.response.truncated;
    exchange.clientAddress = detail.client_address;
    exchange.replayOf = detail.replay_of;
    exchange.error = detail.error;
    exchange.eventId = detail.event_id ?? null;
    this.ring.resized(entry);
    if ((exchange.replayOf !== null || exchange.eventId !== null) && this.subscribers.size > 0) this.queue(entry);
    return entry;
  }

  /**
   * A held webhook's delivery seen live carries its attempt and received time but not its event id (the
   * edge sends only `Burrow-Delivery` and `Burrow-Received-At`). The edge's capture of it names the
   * event: asked when its detail is opened, until the edge has answered once. Without an edge, or
   * while the edge does not answer (its capture not committed yet, rate limited), the id is shown as
   * unknown (null) and asked again on the next opening.
   */
  private async withEventId(entry: Entry): Promise<Entry> {
    const exchange = entry.exchange;
    if (exchange.eventId !== undefined || this.options.edge === undefined || this.options.token === undefined) return entry;
    try {
      const detail = (await this.edgeJson(`/api/v1/requests/${encodeURIComponent(exchange.id)}`)) as EdgeCaptureJson;
      exchange.eventId = detail.event_id ?? null;
    } catch {
      return entry;
    }
    if (exchange.eventId !== null && this.subscribers.size > 0) this.queue(entry);
    return entry;
  }

  /**
   * The edge replays and history go through: the one an attached client is on now (a connected one
   * first), so after a failover to another edge they follow the tunnel (the option names the first;
   * undefined: none at all). Every edge of a cluster answers for the account's captures.
   */
  private get edgeUrl(): string | undefined {
    if (this.options.edge === undefined) return undefined;
    let fallback: string | undefined;
    for (const { client } of this.tunnels.values()) {
      if (client.connected) return client.edge;
      fallback ??= client.edge;
    }
    return fallback ?? this.options.edge;
  }

  /** GET on the edge's API with the client's token; the edge's error, or EDGE_UNREACHABLE. */
  private async edgeJson(path: string): Promise<unknown> {
    const { edgeUrl: edge } = this;
    const { token } = this.options;
    if (edge === undefined || token === undefined) throw new BurrowError('EDGE_UNREACHABLE', 'This inspector has no edge.');
    let response;
    try {
      response = await request(`${edge}${path}`, {
        headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
        // These calls are rare (start-up, a history detail opened): no idle connection is kept to the edge.
        reset: true,
        headersTimeout: 15_000,
        bodyTimeout: 15_000,
      });
    } catch (error) {
      const cause = (error as { cause?: { code?: string } }).cause?.code ?? (error as { code?: string }).code ?? (error as Error).message;
      throw new BurrowError('EDGE_UNREACHABLE', `The edge at ${edge} is unreachable (${cause}).`);
    }
    const text = await response.body.text();
    let parsed: { error?: { code?: unknown; message?: unknown } } | undefined;
    try {
      parsed = JSON.parse(text) as typeof parsed;
    } catch {
      parsed = undefined;
    }
    if (response.statusCode !== 200 || parsed === undefined) {
      const code = parsed?.error?.code;
      const message = typeof parsed?.error?.message === 'string' ? parsed.error.message : `The edge answered ${response.statusCode}.`;
      throw new BurrowError(isErrorCode(code) ? code : 'EDGE_UNREACHABLE', message);
    }
    return parsed;
  }

  // ---- the live feed ----------------------------------------------------------------------------------

  private queue(entry: Entry): void {
    // Bounded: past a page's worth, the subscribers resync from the list instead.
    if (this.pending.length < 500) this.pending.push(entry);
    else this.pending.length = 0;
    this.flushTimer ??= setTimeout(() => this.flush(), this.feedIntervalMs);
  }

  private flush(): void {
    this.flushTimer = null;
    const entries = this.pending;
    this.pending = [];
    if (this.subscribers.size === 0) return;
    const message =
      entries.length === 0
        ? '{"type":"resync"}'
        : JSON.stringify({ type: 'exchanges', items: entries.map((entry) => summaryJson(entry.exchange)), status: this.status() });
    this.broadcast(message);
  }

  private broadcast(message: string): void {
    for (const ws of this.subscribers) {
      const data = ws.getUserData();
      if (data.lagging) continue;
      if (ws.getBufferedAmount() > this.feedMaxBuffered) {
        data.lagging = true;
        continue;
      }
      ws.send(message, false);
    }
  }
}

/** A replacement body as the edge's replay API takes it: text when it is UTF-8 (what any edge reads), else base64. */
function bodyFields(body: Uint8Array): { body: string; body_encoding?: 'base64' } {
  const bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  return isUtf8(bytes) ? { body: bytes.toString('utf8') } : { body: bytes.toString('base64'), body_encoding: 'base64' };
}

interface EdgeBodyJson {
  headers: [string, string][];
  body: string;
  body_encoding: 'utf8' | 'base64';
  body_size: number;
  truncated: boolean;
}

/** GET /api/v1/requests/:id (docs/api.md): the fields the inspector uses. */
interface EdgeCaptureJson {
  client_address: string;
  error: string | null;
  replay_of: string | null;
  /** Absent from edges older than the offline queue. */
  event_id?: string | null;
  request: EdgeBodyJson;
  response: EdgeBodyJson & { status: number };
}

/**
 * The name the edge files a tunnel's records under (GET /api/v1/requests?subdomain=): `tcp:PORT` for a
 * TCP tunnel (public URL tcp://HOST:PORT), else the public host's first label (an HTTP tunnel's
 * subdomain, a TLS tunnel's name in tls://NAME.DOMAIN:PORT).
 */
export function recordsName(publicUrl: string): string {
  const url = new URL(publicUrl);
  if (url.protocol === 'tcp:') return `tcp:${url.port}`;
  return url.hostname.split('.')[0]!;
}

/** A tcp or tls tunnel's connection, as it ended, in the shape of the edge's record of it (docs/tcp.md, Records). */
function connectionExchange(end: RawConnectionEnd, localPort: number, tunnel: string | null): Exchange {
  return {
    id: end.id,
    method: end.protocol,
    path: peerText(end.clientAddress, end.clientPort),
    port: localPort,
    requestHeaders: [],
    requestBody: null,
    requestBodySize: end.bytesIn,
    requestTruncated: false,
    status: 0,
    responseHeaders: [],
    responseBody: null,
    responseBodySize: end.bytesOut,
    responseTruncated: false,
    startedAt: end.startedAt,
    latencyMs: end.durationMs,
    error: end.error,
    replayOf: null,
    clientAddress: end.clientAddress,
    connection: end.protocol === 'TLS' ? 'tls' : 'tcp',
    ...(tunnel === null ? {} : { tunnel }),
  };
}

/** Replay and curl are for HTTP requests: a connection's bytes are counted, never kept. */
function refuseConnection(exchange: Exchange, what: string): void {
  if (exchange.connection === undefined) return;
  throw new BurrowError('INVALID_REQUEST', `${exchange.id} is a ${exchange.method} connection's record: its bytes are not kept, so it cannot be ${what}; only HTTP requests can.`);
}

function routesJson(client: InspectedTunnel): { prefix: string; port: number }[] {
  return client.routes.rules.map((route) => ({ prefix: route.prefix, port: route.port }));
}

// ---- responses --------------------------------------------------------------------------------------

function forbiddenOrigin(origin: string): BurrowError {
  return new BurrowError('FORBIDDEN', `Requests from ${origin} may not use the inspector; only its own page may.`);
}

function notAllowed(path: string, allow: string): BurrowError {
  return new BurrowError('METHOD_NOT_ALLOWED', `${path} takes ${allow} only.`, { allow });
}

function decodeId(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function asBurrowError(error: unknown, log: (line: string) => void): BurrowError {
  if (error instanceof BurrowError) return error;
  log(`inspector: ${(error as Error)?.stack ?? String(error)}`);
  return new BurrowError('INTERNAL_ERROR');
}

function writeJson(res: HttpResponse, status: number, body: unknown, headers: [string, string][] = [], closeConnection = false): void {
  res.writeStatus(statusLine(status));
  for (const [name, value] of headers) res.writeHeader(name, value);
  res.writeHeader('content-type', 'application/json; charset=utf-8');
  res.writeHeader('cache-control', 'no-store');
  res.writeHeader('x-content-type-options', 'nosniff');
  res.end(JSON.stringify(body), closeConnection);
}

/** The spec's error shape. A refused request's unread body closes the connection. */
function writeError(res: HttpResponse, error: BurrowError, closeConnection = false): void {
  writeJson(res, error.status, error.toBody(), Object.entries(error.headers), closeConnection);
}
