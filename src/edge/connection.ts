/**
 * A tunnel connection: one client WebSocket carrying one or more tunnels (TunnelSession, session.ts) and
 * the streams of all of them (DESIGN.md section 2; docs/protocol.md section 18).
 *
 * Frames from the client are decoded and dispatched by type; a frame that breaks the protocol ends the
 * connection with GOAWAY and a reason, never the process. Frames to the client are batched: sends made
 * during one event-loop turn go out corked together in the check phase right after it, and when the
 * WebSocket's buffer passes a high-water mark they wait in a backlog for `drain`, so uWS never drops a
 * message. The backlog is bounded because every body byte needs credit the client granted.
 *
 * Stream ids, the stream table and the connection's credit are the connection's: its tunnels share them
 * (a busy tunnel slows its neighbours on the same connection only as far as credit does). The tunnels
 * come from the connect itself (tunnel 0, the query's `port` and `subdomain`) and from BIND frames, each
 * admitted by the edge as a connect would be and answered with BOUND.
 */
import { closeReason } from '../protocol/close-reason.js';
import { BurrowError, type ErrorCode } from '../errors.js';
import { KeyTable } from '../key-table.js';
import { decode, encode, ProtocolError, type BindFrame, type Frame } from '../protocol/codec.js';
import { CLOSE_CODE_BASE, FrameType, GoAwayCode, type GoAwayCodeValue, type NoticeCodeValue, type Settings } from '../protocol/constants.js';
import { ReceiveWindow, SendCredit } from '../protocol/flow.js';
import type { WebSocket } from '../uws.js';
import type { EdgeObserver } from './observer.js';
import type { EdgeStream, HostedStream, SocketData, TunnelSocket } from './stream-host.js';
import type { FrameSender, Turn } from './turn.js';
import type { TunnelSession } from './session.js';

/** Above this many buffered bytes in uWS, frames wait in the connection's backlog for `drain`. */
export const HIGH_WATER_MARK = 1024 * 1024;
/** A client that said GOAWAY has this long to finish its open streams before the edge closes the connection. */
export const LEAVE_DRAIN_MS = 30_000;

/** What the connection needs from the edge. */
export interface ConnectionDeps {
  settings: Settings;
  /** The edge's end-of-turn work: capture commits, public writes, tunnel frames. */
  turn: Turn;
  observer: EdgeObserver;
  log(message: string): void;
}

/** Who connected: every tunnel of the connection is this account's, opened with this token by this client. */
export interface ConnectionOwner {
  accountId: string;
  tokenId: string;
  /** The client process's id (the connect's `instance`), null from a client that sends none. */
  instance: string | null;
  clientAddress: string;
}

/**
 * Admits the tunnels a connection asks for after READY (BIND): the edge's connect checks, answered as
 * BOUND. Resolves with the live tunnel (already added to the registry), or rejects with the BurrowError
 * the BOUND carries.
 */
export interface TunnelBinder {
  bind(connection: TunnelConnection, frame: BindFrame): Promise<TunnelSession>;
  /** A tunnel of the connection was bound and added to the registry (held webhooks, say). */
  bound(session: TunnelSession): void;
  /** The tunnel's lease attachment on this edge (cluster mode), 0 for none: BOUND's `attachment`. */
  attachment(session: TunnelSession): number;
}

export class TunnelConnection implements TunnelSocket, FrameSender {
  ws: WebSocket<SocketData> | null = null;
  readonly streams = new KeyTable<number, EdgeStream>();
  /** Streams whose outgoing bytes wait for connection credit. */
  readonly blocked = new Set<HostedStream>();
  readonly connectionSend: SendCredit;
  private readonly connectionReceive: ReceiveWindow;
  /** The live tunnels, by their id on this connection. */
  readonly tunnels = new Map<number, TunnelSession>();
  /** Tunnel ids a BIND is being admitted for. */
  private readonly binding = new Set<number>();
  private nextStreamId = 1;
  /** Stream ids wrapped around once: "never opened" can no longer be told from "already ended". */
  private wrapped = false;
  private outbox: Buffer[] = [];
  private backlog: Buffer[] = [];
  private framesScheduled = false;
  closed = false;
  /** The client said GOAWAY: nothing new opens here, and the connection closes once its streams are done. */
  private leaving: { code: number; message: string; timer: NodeJS.Timeout } | null = null;
  readonly startedAt = Date.now();
  readonly settings: Settings;

  constructor(
    readonly deps: ConnectionDeps,
    readonly owner: ConnectionOwner,
    private readonly binder: TunnelBinder | null,
  ) {
    this.settings = deps.settings;
    this.connectionSend = new SendCredit(deps.settings.connectionWindow);
    this.connectionReceive = new ReceiveWindow(deps.settings.connectionWindow);
  }

  /** The connect's own tunnel (0), when its query named one. */
  get first(): TunnelSession | undefined {
    return this.tunnels.get(0);
  }

  /**
   * The WebSocket opened: the connect's tunnel goes live, and the client is told (READY). `cluster` adds
   * the cluster's READY settings (docs/protocol.md section 4) for the connect's tunnel once the registry
   * knows them (a connect that names no tunnel is told clusterEdges only: its BIND tunnels have no
   * attachment to name in a `drop`).
   */
  attach(ws: WebSocket<SocketData>, cluster: ((subdomain: string | null) => Pick<Settings, 'clusterEdges' | 'attachment'> | null) | null = null): void {
    this.ws = ws;
    const first = this.first;
    if (first !== undefined) first.goLive();
    const extra = cluster?.(first?.subdomain ?? null) ?? null;
    this.send(encode([FrameType.READY, 0, first?.subdomain ?? '', first?.publicUrl ?? '', extra === null ? this.settings : { ...this.settings, ...extra }]));
  }

  /** Tells the client something about the edge (NOTICE, docs/protocol.md section 10), once for all its tunnels. */
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

  /** The turn's last step: this connection's frames go out, corked together. */
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

  /** What this connection holds in memory now: frames waiting for the socket and bodies waiting for peers. */
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

  allocateStreamId(): number {
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

  /** Whether another stream may open now (the settings' stream cap, shared by the connection's tunnels). */
  hasRoom(): boolean {
    return !this.closed && this.leaving === null && this.streams.size < this.settings.maxStreams;
  }

  /**
   * A stream finished or failed (its state says so): it leaves the table, and frames for it are ignored.
   * True when it was in the table (its tunnel counts it out).
   */
  endStream(stream: HostedStream): boolean {
    const had = this.streams.deleteIf(stream.id, stream);
    this.blocked.delete(stream);
    const leaving = this.leaving;
    if (leaving !== null && this.streams.size === 0) {
      this.flushFrames();
      this.close(leaving.code, leaving.message);
    }
    return had;
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
      const limit = this.settings.maxMessage;
      if (message.byteLength > limit) throw new ProtocolError(`a message of ${message.byteLength} bytes exceeds maxMessage (${limit})`);
      // The one copy of what the client sent: uWS reuses the message's memory when this callback
      // returns, and bodies are written out later (deferred writes, backpressure, the capture commit).
      // Into uninitialised memory: Buffer.copyBytesFrom zero-fills a large buffer before it copies.
      const bytes = Buffer.allocUnsafe(message.byteLength);
      bytes.set(new Uint8Array(message));
      this.dispatch(decode(bytes), bytes);
    } catch (error) {
      const reason = error instanceof ProtocolError ? error.message : `internal error: ${(error as Error).message}`;
      if (!(error instanceof ProtocolError)) this.deps.log(`tunnel connection of ${this.owner.accountId}: ${(error as Error).stack}`);
      this.goAway(GoAwayCode.PROTOCOL_ERROR, reason);
    }
  }

  private dispatch(frame: Frame, bytes: Buffer): void {
    switch (frame[0]) {
      case FrameType.RESPONSE: {
        const body = frame[5];
        this.stream(frame[1], body)?.onResponse(frame[2], frame[3], frame[4], body, frame[6], bytes);
        return;
      }
      case FrameType.DATA: {
        const chunk = frame[2];
        this.stream(frame[1], chunk)?.onData(chunk, frame[3]);
        return;
      }
      case FrameType.INFO:
        this.stream(frame[1], null)?.onInfo(frame[2], frame[3], frame[4]);
        return;
      case FrameType.TRAILERS:
        this.stream(frame[1], null)?.onTrailers(frame[2]);
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
        this.leave(CLOSE_CODE_BASE + frame[2], frame[3] === '' ? 'client closed the tunnel' : frame[3]);
        return;
      }
      case FrameType.BIND:
        this.onBind(frame);
        return;
      default:
        throw new ProtocolError(`a client may not send frame type ${frame[0]}`);
    }
  }

  /**
   * The stream a body-carrying frame is for, after flow-control accounting. Bytes for a stream that
   * already ended are dropped but their connection credit is returned.
   */
  private stream(id: number, body: Uint8Array | null): EdgeStream | null {
    const size = body === null ? 0 : body.byteLength;
    if (size > this.settings.maxFrameBody) throw new ProtocolError(`a body chunk of ${size} bytes exceeds maxFrameBody`);
    if (size > 0 && !this.connectionReceive.receive(size)) throw new ProtocolError('the client exceeded the connection window');
    const stream = this.streams.get(id);
    if (stream === undefined) {
      if (size > 0) this.consumedConnection(size);
      if (!this.wrapped && id >= this.nextStreamId) throw new ProtocolError(`frame for stream ${id}, which the edge never opened`);
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

  // ---- tunnels ----------------------------------------------------------------------------------------

  /** BIND: one more tunnel, admitted as a connect would be; the answer is BOUND either way. */
  private onBind(frame: BindFrame): void {
    const id = frame[2];
    if (this.tunnels.has(id) || this.binding.has(id)) throw new ProtocolError(`BIND for tunnel ${id}, which this connection already has`);
    if (this.binder === null) throw new ProtocolError('this edge takes no BIND');
    const most = this.settings.maxTunnels ?? 1;
    if (this.tunnels.size + this.binding.size >= most) {
      this.send(encode([FrameType.BOUND, 0, id, 'TUNNEL_LIMIT_REACHED', `One connection carries at most ${most} tunnels (maxTunnels).`, '', '']));
      return;
    }
    this.binding.add(id);
    this.binder.bind(this, frame).then(
      (session) => {
        this.binding.delete(id);
        // The connection ended while the tunnel was admitted: the binder gave its name back already.
        if (this.closed) return;
        this.tunnels.set(id, session);
        session.goLive();
        // A client that sent `drop` (section 18) is told the attachment to name in its next BIND's.
        this.send(encode(frame.length > 10 ? [FrameType.BOUND, 0, id, '', '', session.subdomain, session.publicUrl, this.binder!.attachment(session)] : [FrameType.BOUND, 0, id, '', '', session.subdomain, session.publicUrl]));
        this.binder!.bound(session);
      },
      (error: unknown) => {
        this.binding.delete(id);
        const refusal = error instanceof BurrowError ? error : new BurrowError('INTERNAL_ERROR');
        if (!(error instanceof BurrowError)) this.deps.log(`bind: ${(error as Error).stack ?? error}`);
        this.deps.observer.refused('connect', refusal.code);
        this.send(encode([FrameType.BOUND, 0, id, refusal.code, refusal.message, '', '']));
      },
    );
  }

  /**
   * Ends one tunnel and leaves the others: UNBOUND with `code`, or GOAWAY when it is the connection's
   * last (a connection without tunnels has nothing to carry). The tunnel's streams end with 502.
   */
  endTunnel(session: TunnelSession, code: GoAwayCodeValue, message: string): void {
    if (this.closed || this.tunnels.get(session.tunnelId) !== session) return;
    if (this.tunnels.size === 1 && this.binding.size === 0) {
      this.goAway(code, message);
      return;
    }
    this.tunnels.delete(session.tunnelId);
    this.failStreamsOf(session, 'TUNNEL_CLOSED');
    this.send(encode([FrameType.UNBOUND, 0, session.tunnelId, code, message]));
    session.ended(CLOSE_CODE_BASE + code, message);
  }

  private failStreamsOf(session: TunnelSession, failure: ErrorCode): void {
    for (const stream of this.streams.values()) if (stream.session === session) stream.fail(failure);
  }

  // ---- closing ----------------------------------------------------------------------------------------

  /**
   * The client's GOAWAY: it is leaving. Its tunnels leave the registry at once, so new requests go to
   * another member of a pool (or get what an offline name gets), while the streams it has finish: the
   * connection closes once none is left (the client may close it sooner), at the latest after
   * LEAVE_DRAIN_MS (docs/protocol.md section 10).
   */
  private leave(code: number, message: string): void {
    if (this.leaving !== null) return;
    if (this.streams.size === 0) {
      this.close(code, message);
      return;
    }
    const timer = setTimeout(() => this.close(code, message), LEAVE_DRAIN_MS);
    timer.unref();
    this.leaving = { code, message, timer };
    for (const session of this.tunnels.values()) session.ended(code, message);
  }

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
   * uWS: the WebSocket is gone. Every open stream ends, and each tunnel's name is held for its account for
   * the grace period whatever the reason, a clean Ctrl-C too: a restarted client asks for it again and
   * keeps its URL. (Closing through the API, a revoked token and a replacement detach the tunnel first.)
   * `code` and `message`: the close as uWS reports it, for the disconnect log line.
   */
  onClose(code: number, message = ''): void {
    if (this.closed) return;
    this.closed = true;
    this.ws = null;
    if (this.leaving !== null) clearTimeout(this.leaving.timer);
    for (const stream of this.streams.values()) stream.fail('TUNNEL_CLOSED');
    this.outbox = [];
    this.backlog = [];
    this.blocked.clear();
    const tunnels = [...this.tunnels.values()];
    this.tunnels.clear();
    for (const session of tunnels) session.ended(code, message);
  }
}
