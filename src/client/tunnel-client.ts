/**
 * The tunnel client library: one WebSocket to the edge carrying many streams to local ports.
 *
 * `start()` resolves once the edge says READY, or rejects with the edge's refusal (401, 403, 409, 400).
 * After that a dropped connection reconnects with exponential backoff and full jitter, asking for the
 * same subdomain; the edge holds it for the owner meanwhile. A GOAWAY that is final (closed through the
 * API, token revoked, replaced) ends the client with the edge's reason.
 */
import { closeReason } from '../protocol/close-reason.js';
import { EventEmitter } from 'node:events';
import { Pool, type Dispatcher } from 'undici';
import WebSocket from 'ws';
import { decode, encode, ProtocolError, type Frame } from '../protocol/codec.js';
import {
  CLOSE_CODE_BASE,
  CONNECT_PATH,
  DEFAULT_SETTINGS,
  FINAL_GOAWAY_CODES,
  FrameType,
  GoAwayCode,
  PROTOCOL_HEADER,
  PROTOCOL_VERSION,
  type Settings,
} from '../protocol/constants.js';
import { ReceiveWindow, SendCredit } from '../protocol/flow.js';
import { cleartextRefusal, describeTlsError, trustedCas } from './edge-trust.js';
import type { Exchange } from './exchange.js';
import { ClientHttpStream } from './http-stream.js';
import type { HostHeader } from './host-header.js';
import { localConnector } from './local-connector.js';
import type { LocalTarget, RouteTable } from './routes.js';
import type { FlushableStream, StreamHost, TurnEndStream } from './stream-host.js';
import { ClientWsStream } from './ws-stream.js';

export interface TunnelClientOptions {
  edge: string;
  token: string;
  routes: RouteTable;
  /** The Host local servers see: the public one (default), the target's (`rewrite`) or a value. */
  hostHeader?: HostHeader;
  /** Accept any certificate from https:// targets (self-signed dev servers). */
  localInsecure?: boolean;
  /** The subdomain to ask for; the edge makes one up when absent. */
  subdomain?: string;
  /** Bytes of each body kept for `exchange` events; 0 turns recording off. */
  recordLimit?: number;
  /** Connections per local port (undici pool). */
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
}

export interface ClosedInfo {
  /** Why the tunnel ended for good. */
  reason: string;
  /** The GOAWAY code or the refusal's error code, when there was one. */
  code: string;
  /** true when the user closed it (close()); false when the edge ended it. */
  byUser: boolean;
}

export interface TunnelClientEvents {
  ready: [ReadyInfo];
  reconnecting: [{ attempt: number; delayMs: number; reason: string }];
  closed: [ClosedInfo];
  exchange: [Exchange];
  /** A passthrough WebSocket opened or closed: emitted twice with the same object (inspector only). */
  websocket: [Exchange];
}

type Stream = ClientHttpStream | ClientWsStream;

const GOAWAY_NAMES = Object.fromEntries(Object.entries(GoAwayCode).map(([name, code]) => [code, name])) as Record<number, string>;

export class TunnelClient extends EventEmitter<TunnelClientEvents> implements StreamHost {
  settings: Settings = DEFAULT_SETTINGS;
  readonly routes: RouteTable;
  readonly hostHeader: HostHeader;
  readonly localInsecure: boolean;
  recordLimit: number;
  connectionSend = new SendCredit(DEFAULT_SETTINGS.connectionWindow);
  private connectionReceive = new ReceiveWindow(DEFAULT_SETTINGS.connectionWindow);
  readonly blocked = new Set<FlushableStream>();
  private readonly streams = new Map<number, Stream>();
  /** One pool per target origin. */
  private readonly pools = new Map<string, Pool>();
  private socket: WebSocket | null = null;
  private outbox: Buffer[] = [];
  /** Streams holding this turn's response bytes, framed in the check phase before the outbox goes. */
  private turnEndStreams: TurnEndStream[] = [];
  /** A frame went out at once this turn: the rest of the turn's frames wait for the check phase. */
  private sentThisTurn = false;
  private flushScheduled = false;
  private readonly flushNow = (): void => this.flush();
  private subdomain: string | undefined;
  private publicUrlValue: string | null = null;
  private everReady = false;
  private stopped = false;
  private attempt = 0;
  private lastSeen = 0;
  private watchdog: NodeJS.Timeout | null = null;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private goAway: { code: number; message: string } | null = null;
  /** Why the current WebSocket failed, from its 'error' event (ECONNREFUSED, ENOTFOUND...): named to the user. */
  private socketError: string | null = null;
  private readonly trustedCas: string[] | undefined;
  private firstConnect: { resolve: (info: ReadyInfo) => void; reject: (error: Error) => void } | null = null;
  /** Live counters for the terminal: open streams and totals. */
  readonly stats = { requests: 0, errors: 0, bytesIn: 0, bytesOut: 0 };

  constructor(private readonly options: TunnelClientOptions) {
    super();
    this.routes = options.routes;
    this.recordLimit = options.recordLimit ?? 0;
    this.subdomain = options.subdomain;
    this.hostHeader = options.hostHeader ?? 'keep';
    this.localInsecure = options.localInsecure ?? false;
    this.trustedCas = options.ca === undefined ? undefined : trustedCas(options.ca);
    for (const target of this.routes.targets()) {
      this.pools.set(
        target.origin,
        new Pool(target.origin, {
          connections: options.connectionsPerPort ?? 128,
          pipelining: 1,
          keepAliveTimeout: 10_000,
          headersTimeout: 0,
          bodyTimeout: 0,
          connect: localConnector(target, this.localInsecure),
        }),
      );
    }
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

  /** Connects; resolves on READY, rejects with TunnelRefusedError or a connection error. */
  start(): Promise<ReadyInfo> {
    return new Promise<ReadyInfo>((resolve, reject) => {
      // Decided before any connection: a token must not leave in clear text, not even in a first packet.
      const refusal = cleartextRefusal(this.options.edge, this.options.insecure === true);
      if (refusal !== null) {
        this.stopped = true;
        void Promise.all([...this.pools.values()].map((pool) => pool.destroy().catch(() => undefined)));
        reject(new Error(refusal));
        return;
      }
      this.firstConnect = { resolve, reject };
      this.connect();
    });
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
    await Promise.all([...this.pools.values()].map((pool) => pool.destroy().catch(() => undefined)));
    this.emit('closed', { reason, code: 'CLIENT_CLOSING', byUser: true });
  }

  // ---- connection -----------------------------------------------------------------------------------

  private connect(): void {
    const url = new URL(CONNECT_PATH, this.options.edge);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    url.searchParams.set('port', String(this.routes.defaultPort));
    if (this.subdomain !== undefined) url.searchParams.set('subdomain', this.subdomain);
    const socket = new WebSocket(url, {
      headers: { authorization: `Bearer ${this.options.token}`, [PROTOCOL_HEADER]: String(PROTOCOL_VERSION) },
      perMessageDeflate: false,
      maxPayload: 8 * 1024 * 1024,
      handshakeTimeout: 15_000,
      ...(this.trustedCas === undefined ? {} : { ca: this.trustedCas }),
    });
    this.socket = socket;
    this.goAway = null;
    this.socketError = null;
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
        socket.terminate();
        this.refused(new TunnelRefusedError(response.statusCode ?? 0, code, message));
      });
    });
    socket.on('open', () => {
      this.lastSeen = Date.now();
    });
    socket.on('ping', () => {
      this.lastSeen = Date.now();
    });
    socket.on('message', (data: Buffer, isBinary: boolean) => this.onMessage(data, isBinary));
    socket.on('error', (error: NodeJS.ErrnoException) => {
      // 'close' follows and decides what happens next; it names this cause (a certificate problem in full).
      this.socketError = describeTlsError(error) ?? error.code ?? error.message;
    });
    socket.on('close', (code: number, reason: Buffer) => this.onClose(socket, code, reason.toString('utf8')));
    this.startWatchdog();
  }

  private refused(error: TunnelRefusedError): void {
    // A refusal is final: retrying cannot fix a bad token, a taken name or a full plan.
    if (this.firstConnect !== null) {
      const { reject } = this.firstConnect;
      this.firstConnect = null;
      this.stopped = true;
      this.clearTimers();
      void Promise.all([...this.pools.values()].map((pool) => pool.destroy().catch(() => undefined)));
      reject(error);
      return;
    }
    if (error.status === 429 || error.status >= 500) return; // transient: the close handler retries
    this.finish({ reason: `${error.code}: ${error.message}`, code: error.code, byUser: false });
  }

  private onClose(socket: WebSocket, code: number, reason: string): void {
    if (this.socket !== socket) return;
    this.socket = null;
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
    if (!this.everReady && this.firstConnect !== null) {
      // The first connection failed before READY: nothing to keep alive yet.
      const { reject } = this.firstConnect;
      this.firstConnect = null;
      this.stopped = true;
      this.clearTimers();
      reject(new Error(`cannot connect to the edge at ${this.options.edge}: ${this.socketError ?? (reason === '' ? `the connection closed (${code})` : reason)}`));
      return;
    }
    this.scheduleReconnect(goAway?.message ?? this.lostReason(code, reason));
  }

  /** What happened to a connection, said once: "the edge at URL is unreachable (ECONNREFUSED)". */
  private lostReason(code: number, reason: string): string {
    if (reason !== '') return reason;
    if (this.socketError !== null) return `the edge at ${this.options.edge} is unreachable (${this.socketError})`;
    return `the connection to the edge at ${this.options.edge} dropped (WebSocket close ${code})`;
  }

  private scheduleReconnect(reason: string): void {
    this.attempt++;
    const min = this.options.minBackoffMs ?? 250;
    const max = this.options.maxBackoffMs ?? 15_000;
    const ceiling = Math.min(max, min * 2 ** Math.min(this.attempt - 1, 16));
    // Full jitter between half and all of the ceiling: clients dropped together do not return together.
    const delayMs = Math.round(ceiling / 2 + Math.random() * (ceiling / 2));
    this.emit('reconnecting', { attempt: this.attempt, delayMs, reason });
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      if (!this.stopped) this.connect();
    }, delayMs);
  }

  private finish(info: ClosedInfo): void {
    if (this.stopped) return;
    this.stopped = true;
    this.clearTimers();
    this.socket?.terminate();
    this.failStreams();
    void Promise.all([...this.pools.values()].map((pool) => pool.destroy().catch(() => undefined)));
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
    for (const stream of [...this.streams.values()]) stream.tunnelClosed();
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
        const [, id, requestId, method, path, headers, clientAddress, body, end] = frame;
        if (this.streams.has(id)) throw new ProtocolError(`OPEN for stream ${id}, which is already open`);
        if (body !== null && body.byteLength > 0) this.receiveConnection(body.byteLength);
        const stream = new ClientHttpStream(id, this, { requestId, method, path, headers, clientAddress, replayOf: null });
        this.streams.set(id, stream);
        this.stats.requests++;
        stream.start(body, end);
        return;
      }
      case FrameType.DATA: {
        const chunk = frame[2];
        const size = chunk === null ? 0 : chunk.byteLength;
        if (size > 0) this.receiveConnection(size);
        const stream = this.streams.get(frame[1]);
        if (stream === undefined || stream.kind !== 'http') {
          if (size > 0) this.consumedConnection(size);
          return;
        }
        stream.onRequestData(chunk, frame[3]);
        return;
      }
      case FrameType.WINDOW:
        if (frame[1] === 0) {
          this.connectionSend.grant(frame[2]);
          const waiting = [...this.blocked];
          this.blocked.clear();
          for (const stream of waiting) stream.flush();
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
      case FrameType.WS_OPEN: {
        if (this.streams.has(frame[1])) throw new ProtocolError(`WS_OPEN for stream ${frame[1]}, which is already open`);
        const stream = new ClientWsStream(frame[1], this, frame[3], frame[4], frame[2], frame[5]);
        this.streams.set(frame[1], stream);
        stream.start();
        return;
      }
      case FrameType.WS_MESSAGE: {
        const size = frame[2].byteLength;
        this.receiveConnection(size);
        const stream = this.streams.get(frame[1]);
        if (stream === undefined || stream.kind !== 'passthrough') {
          this.consumedConnection(size);
          return;
        }
        stream.onFrame(frame);
        return;
      }
      case FrameType.WS_CLOSE: {
        const stream = this.streams.get(frame[1]);
        if (stream !== undefined && stream.kind === 'passthrough') stream.onFrame(frame);
        return;
      }
      default:
        throw new ProtocolError(`an edge may not send frame type ${frame[0]}`);
    }
  }

  private receiveConnection(size: number): void {
    if (size > this.settings.maxFrameBody) throw new ProtocolError(`a body chunk of ${size} bytes exceeds maxFrameBody`);
    if (!this.connectionReceive.receive(size)) throw new ProtocolError('the edge exceeded the connection window');
  }

  private onReady(subdomain: string, publicUrl: string, settings: Settings): void {
    this.settings = settings;
    this.connectionSend = new SendCredit(settings.connectionWindow);
    this.connectionReceive = new ReceiveWindow(settings.connectionWindow);
    this.subdomain = subdomain;
    this.publicUrlValue = publicUrl;
    const reconnected = this.everReady;
    this.everReady = true;
    this.attempt = 0;
    const info: ReadyInfo = { subdomain, publicUrl, settings, reconnected };
    if (this.firstConnect !== null) {
      const { resolve } = this.firstConnect;
      this.firstConnect = null;
      resolve(info);
    }
    this.emit('ready', info);
  }

  // ---- StreamHost -----------------------------------------------------------------------------------

  pool(target: LocalTarget): Dispatcher {
    const pool = this.pools.get(target.origin);
    // Routes decide targets; anything outside them is never dialled.
    if (pool === undefined) throw new Error(`${target.origin} is not one of this tunnel's local targets`);
    return pool;
  }

  /**
   * Frames go out batched: after the first of a loop turn, those produced during it are sent together in
   * its check phase, with the TCP socket corked, so many responses cost two writes instead of one each.
   */
  send(frame: Buffer): void {
    if (this.sentThisTurn) {
      this.outbox.push(frame);
      return;
    }
    // The first frame of a loop turn goes at once, so a lone request waits for nothing; the frames
    // after it in the same turn go out together in the check phase.
    this.sentThisTurn = true;
    this.scheduleFlush();
    const socket = this.socket;
    if (socket !== null && socket.readyState === WebSocket.OPEN) socket.send(frame);
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

  private flush(): void {
    this.flushScheduled = false;
    if (this.turnEndStreams.length > 0) {
      // What these streams send joins the outbox written below, corked with the turn's other frames.
      this.sentThisTurn = true;
      const streams = this.turnEndStreams;
      this.turnEndStreams = [];
      for (const stream of streams) stream.turnEnded();
    }
    this.sentThisTurn = false;
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
    if (this.streams.get(stream.id) === stream) this.streams.delete(stream.id);
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
    this.emit('exchange', exchange);
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
