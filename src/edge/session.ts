/**
 * A tunnel session: one client WebSocket carrying many streams (DESIGN.md section 2).
 *
 * Frames from the client are decoded and dispatched by type; a frame that breaks the protocol ends
 * this tunnel with GOAWAY and a reason, never the process. Frames to the client are batched: sends
 * made during one event-loop turn go out corked together in the check phase right after it, and when
 * the WebSocket's buffer passes a high-water mark they wait in a backlog for `drain`, so uWS never drops
 * a message. The backlog is bounded because every body byte needs credit the client granted.
 */
import type { StoredPolicy } from '../protocol/policy.js';
import { closeReason } from '../protocol/close-reason.js';
import { BurrowError, type ErrorCode } from '../errors.js';
import { decode, encode, ProtocolError, type Frame } from '../protocol/codec.js';
import {
  CLOSE_CODE_BASE,
  FrameType,
  GoAwayCode,
  type GoAwayCodeValue,
  type NoticeCodeValue,
  type Settings,
} from '../protocol/constants.js';
import { ReceiveWindow, SendCredit } from '../protocol/flow.js';
import type { CaptureRecord, CaptureStore, RingHandle } from '../store/captures.js';
import type { UsageCounter } from '../store/account-store.js';
import type { ReplayOverrides, TunnelInfo } from '../api/types.js';
import type { ServerExchange } from '../http1/server.js';
import type { WebSocket } from '../uws.js';
import type { EdgeHttpStream, RequestHead } from './http-stream.js';
import type { EdgeObserver } from './observer.js';
import { PublicHttpStream, type RequestIntake } from './public-stream.js';
import { ReplayHttpStream } from './replay-stream.js';
import type { HostedStream, SocketData, StreamHost } from './stream-host.js';
import type { Captured, Turn, Writable } from './turn.js';

export type { SocketData } from './stream-host.js';

/** Where live sessions are listed (the TunnelRegistry). */
export interface SessionDirectory {
  add(session: TunnelSession): void;
  /** The WebSocket ended: the name is held for its owner for the grace period. */
  remove(session: TunnelSession): void;
}

export interface SessionDeps {
  settings: Settings;
  captures: CaptureStore;
  usage: UsageCounter;
  capture: { enabled: boolean; bodyLimit: number };
  requestTimeoutMs: number;
  registry: SessionDirectory;
  /** The edge's end-of-turn work: capture commits, public writes, tunnel frames. */
  turn: Turn;
  /** Connect/disconnect log lines, metrics, the access log. */
  observer: EdgeObserver;
  log(message: string): void;
}

/** Above this many buffered bytes in uWS, frames wait in the session's backlog for `drain`. */
export const HIGH_WATER_MARK = 1024 * 1024;

type Stream = EdgeHttpStream;

export class TunnelSession implements StreamHost {
  ws: WebSocket<SocketData> | null = null;
  /** The one-run policy its client sent at connect (docs/policies.md); enforced by src/edge/policy. */
  runPolicy: StoredPolicy | undefined = undefined;
  readonly streams = new Map<number, Stream>();
  /** Streams whose outgoing bytes wait for connection credit. */
  readonly blocked = new Set<Stream>();
  readonly connectionSend: SendCredit;
  private readonly connectionReceive: ReceiveWindow;
  private nextStreamId = 1;
  /** Stream ids wrapped around once: "never opened" can no longer be told from "already ended". */
  private wrapped = false;
  private outbox: Buffer[] = [];
  private backlog: Buffer[] = [];
  private framesScheduled = false;
  closed = false;
  readonly startedAt = Date.now();
  readonly settings: Settings;
  readonly requestTimeoutMs: number;
  readonly captureLimit: number;
  readonly timesHops: boolean;

  constructor(
    readonly deps: SessionDeps,
    readonly subdomain: string,
    readonly accountId: string,
    readonly tokenId: string,
    readonly port: number,
    readonly publicUrl: string,
    readonly ring: RingHandle,
    /** Who connected it: the client's instance id (null from older clients) and address (registry.ts). */
    readonly instance: string | null = null,
    readonly clientAddress = '',
  ) {
    this.connectionSend = new SendCredit(deps.settings.connectionWindow);
    this.connectionReceive = new ReceiveWindow(deps.settings.connectionWindow);
    this.settings = deps.settings;
    this.requestTimeoutMs = deps.requestTimeoutMs;
    this.captureLimit = deps.capture.enabled ? deps.capture.bodyLimit : 0;
    this.timesHops = deps.observer.metrics !== null;
  }

  info(): TunnelInfo {
    return {
      subdomain: this.subdomain,
      accountId: this.accountId,
      tokenId: this.tokenId,
      port: this.port,
      startedAt: this.startedAt,
      publicUrl: this.publicUrl,
    };
  }

  /**
   * The WebSocket opened: register and tell the client it is live. `cluster` adds the cluster's READY
   * settings (docs/protocol.md section 4) once the registry knows them.
   */
  attach(ws: WebSocket<SocketData>, cluster: ((session: TunnelSession) => Pick<Settings, 'clusterEdges' | 'attachment'> | null) | null = null): void {
    this.ws = ws;
    this.deps.registry.add(this);
    this.deps.observer.tunnelConnected(this);
    const extra = cluster?.(this) ?? null;
    this.send(encode([FrameType.READY, 0, this.subdomain, this.publicUrl, extra === null ? this.deps.settings : { ...this.deps.settings, ...extra }]));
  }

  /** Tells the client something about the edge (NOTICE, docs/protocol.md section 10): nothing changes for the tunnel. */
  notice(code: NoticeCodeValue, message: string): void {
    this.send(encode([FrameType.NOTICE, 0, code, message]));
  }

  // ---- sending ----------------------------------------------------------------------------------------

  /** Queued for the end of this turn, written corked with the turn's other frames (one write per turn). */
  send(frame: Buffer): void {
    if (this.closed) return;
    this.outbox.push(frame);
    if (this.framesScheduled) return;
    this.framesScheduled = true;
    this.deps.turn.frames(this);
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

  /** The turn's last step: this tunnel's frames go out, corked together. */
  flushFrames(): void {
    this.framesScheduled = false;
    const ws = this.ws;
    if (ws === null || this.closed || this.outbox.length === 0) return;
    if (this.backlog.length > 0) {
      for (const frame of this.outbox) this.backlog.push(frame);
      this.outbox = [];
      return;
    }
    const frames = this.outbox;
    this.outbox = [];
    ws.cork(() => this.sendAll(ws, frames, 0));
  }

  private sendAll(ws: WebSocket<SocketData>, frames: Buffer[], from: number): void {
    for (let i = from; i < frames.length; i++) {
      if (ws.getBufferedAmount() > HIGH_WATER_MARK) {
        for (let j = i; j < frames.length; j++) this.backlog.push(frames[j]!);
        return;
      }
      ws.send(frames[i]!, true, false);
    }
  }

  /** uWS drained the socket's buffer: send what waited. */
  onDrain(): void {
    if (this.backlog.length === 0 || this.ws === null || this.closed) return;
    const frames = this.backlog;
    this.backlog = [];
    const ws = this.ws;
    ws.cork(() => this.sendAll(ws, frames, 0));
  }

  /** What this tunnel holds in memory now: frames waiting for the socket and bodies waiting for peers. */
  memory(): { streams: number; frameBytes: number; requestBytes: number; responseBytes: number } {
    let frameBytes = 0;
    for (const frame of this.backlog) frameBytes += frame.byteLength;
    for (const frame of this.outbox) frameBytes += frame.byteLength;
    let requestBytes = 0;
    for (const stream of this.streams.values()) requestBytes += stream.bufferedRequestBytes;
    // Response bytes are counted by the connection window: it also covers finished responses still
    // draining to a slow public client, which have left the stream table.
    return { streams: this.streams.size, frameBytes, requestBytes, responseBytes: this.connectionReceive.held };
  }

  // ---- streams ----------------------------------------------------------------------------------------

  private allocateStreamId(): number {
    for (;;) {
      const id = this.nextStreamId;
      if (id >= 0xfffffff0) {
        this.nextStreamId = 1;
        this.wrapped = true;
      } else {
        this.nextStreamId = id + 1;
      }
      // After a wrap, a long-lived stream (a WebSocket, say) may still hold a low id.
      if (!this.wrapped || !this.streams.has(id)) return id;
    }
  }

  /** Whether another stream may open now (the settings' stream cap). */
  hasRoom(): boolean {
    return !this.closed && this.streams.size < this.deps.settings.maxStreams;
  }

  openPublicHttp(exchange: ServerExchange, head: RequestHead, intake: RequestIntake): PublicHttpStream {
    const stream = new PublicHttpStream(this.allocateStreamId(), this, head, exchange, intake);
    this.streams.set(stream.id, stream);
    return stream;
  }

  /** Replays a captured request through this tunnel; resolves with the new capture. */
  replay(capture: CaptureRecord, overrides: ReplayOverrides): Promise<CaptureRecord> {
    if (!this.hasRoom()) return Promise.reject(new BurrowError('TUNNEL_BUSY'));
    const stream = new ReplayHttpStream(this.allocateStreamId(), this, capture, overrides);
    this.streams.set(stream.id, stream);
    return stream.start();
  }

  /** A stream finished or failed (its state says so): it leaves the table, and frames for it are ignored. */
  endStream(stream: HostedStream): void {
    if (this.streams.get(stream.id) === stream) this.streams.delete(stream.id);
    this.blocked.delete(stream as Stream);
  }

  upgradeEnded(stream: HostedStream): void {
    if (this.deps.observer.watching && stream instanceof PublicHttpStream) this.deps.observer.exchangeEnded(stream, { bytesIn: stream.bytesIn, bytesOut: stream.bytesOut });
  }

  /** Response bytes written out (or dropped): return connection credit to the client. */
  consumedConnection(bytes: number): void {
    const grant = this.connectionReceive.consume(bytes);
    if (grant > 0) this.send(encode([FrameType.WINDOW, 0, grant]));
  }

  checkDeadlines(now: number): void {
    for (const stream of this.streams.values()) {
      if (stream.deadline <= now) stream.checkDeadline(now);
    }
  }

  // ---- receiving --------------------------------------------------------------------------------------

  onMessage(message: ArrayBuffer, isBinary: boolean): void {
    if (this.closed) return;
    try {
      if (!isBinary) throw new ProtocolError('text messages are not part of the protocol');
      const limit = this.deps.settings.maxMessage;
      if (message.byteLength > limit) throw new ProtocolError(`a message of ${message.byteLength} bytes exceeds maxMessage (${limit})`);
      // The one copy of what the client sent: uWS reuses the message's memory when this callback
      // returns, and bodies are written out later (deferred writes, backpressure, the capture commit).
      const bytes = Buffer.copyBytesFrom(new Uint8Array(message));
      this.dispatch(decode(bytes), bytes);
    } catch (error) {
      const reason = error instanceof ProtocolError ? error.message : `internal error: ${(error as Error).message}`;
      if (!(error instanceof ProtocolError)) this.deps.log(`tunnel ${this.subdomain}: ${(error as Error).stack}`);
      this.goAway(GoAwayCode.PROTOCOL_ERROR, reason);
    }
  }

  private dispatch(frame: Frame, bytes: Buffer): void {
    switch (frame[0]) {
      case FrameType.RESPONSE: {
        const body = frame[5];
        this.httpStream(frame[1], body)?.onResponse(frame[2], frame[3], frame[4], body, frame[6], bytes);
        return;
      }
      case FrameType.DATA: {
        const chunk = frame[2];
        this.httpStream(frame[1], chunk)?.onData(chunk, frame[3]);
        return;
      }
      case FrameType.INFO:
        this.httpStream(frame[1], null)?.onInfo(frame[2], frame[3], frame[4]);
        return;
      case FrameType.TRAILERS:
        this.httpStream(frame[1], null)?.onTrailers(frame[2]);
        return;
      case FrameType.WINDOW: {
        if (frame[1] === 0) {
          this.connectionSend.grant(frame[2]);
          this.unblock();
          return;
        }
        this.streams.get(frame[1])?.onWindow(frame[2]);
        return;
      }
      case FrameType.RESET: {
        const stream = this.streams.get(frame[1]);
        if (stream !== undefined) stream.onReset(frame[2], frame[3]);
        return;
      }
      case FrameType.GOAWAY: {
        this.close(CLOSE_CODE_BASE + frame[2], frame[3] === '' ? 'client closed the tunnel' : frame[3]);
        return;
      }
      default:
        throw new ProtocolError(`a client may not send frame type ${frame[0]}`);
    }
  }

  /**
   * The HTTP stream a body-carrying frame is for, after flow-control accounting. Bytes for a stream
   * that already ended are dropped but their connection credit is returned.
   */
  private httpStream(id: number, body: Uint8Array | null): EdgeHttpStream | null {
    const size = body === null ? 0 : body.byteLength;
    if (size > this.deps.settings.maxFrameBody) throw new ProtocolError(`a body chunk of ${size} bytes exceeds maxFrameBody`);
    if (size > 0 && !this.connectionReceive.receive(size)) throw new ProtocolError('the client exceeded the connection window');
    const stream = this.streams.get(id);
    if (stream === undefined) {
      if (size > 0) this.consumedConnection(size);
      if (stream === undefined && !this.wrapped && id >= this.nextStreamId) {
        throw new ProtocolError(`frame for stream ${id}, which the edge never opened`);
      }
      return null;
    }
    if (size > 0 && !stream.receiveWindow.receive(size)) throw new ProtocolError(`the client exceeded the window of stream ${id}`);
    return stream;
  }

  private unblock(): void {
    if (this.blocked.size === 0) return;
    const waiting = [...this.blocked];
    this.blocked.clear();
    for (const stream of waiting) {
      if (this.connectionSend.available === 0) {
        this.blocked.add(stream);
        continue;
      }
      stream.drain();
    }
  }

  // ---- closing ----------------------------------------------------------------------------------------

  /** Sends GOAWAY and closes the WebSocket; the client learns why from both. */
  goAway(code: GoAwayCodeValue, message: string): void {
    if (this.closed) return;
    this.send(encode([FrameType.GOAWAY, 0, code, message]));
    this.flushFrames();
    this.close(CLOSE_CODE_BASE + code, message);
  }

  private close(code: number, message: string): void {
    const ws = this.ws;
    if (ws !== null && !this.closed) {
      try {
        ws.end(code, closeReason(message));
      } catch {
        // Already closed by the peer; the close handler runs (or ran) anyway.
      }
    }
  }

  /**
   * uWS: the WebSocket is gone. Every open stream ends, and the name is held for its account for the
   * grace period whatever the reason, a clean Ctrl-C too: a restarted client asks for it again and keeps
   * its URL. (Closing through the API, a revoked token and a replacement detach the session first.)
   * `code` and `message`: the close as uWS reports it, for the disconnect log line.
   */
  onClose(code: number, message = ''): void {
    if (this.closed) return;
    this.deps.observer.tunnelDisconnected(this, code, message);
    this.closed = true;
    this.ws = null;
    const failure: ErrorCode = 'TUNNEL_CLOSED';
    for (const stream of [...this.streams.values()]) stream.fail(failure);
    this.outbox = [];
    this.backlog = [];
    this.blocked.clear();
    this.deps.registry.remove(this);
  }
}

