/**
 * A public TCP connection through a tunnel, on the edge's side (docs/tcp.md): a connection to a tcp
 * tunnel's public port, or a TLS connection passed through to a tls tunnel (its ClientHello included).
 * ACCEPT opens the stream; from then on bytes pass raw as DATA both ways under the stream's and the
 * connection's credit, each direction's FIN as DATA `end`, as after a 101 (docs/protocol.md section 13).
 *
 * Memory is bounded by credit (src/protocol/raw-pipe.ts, shared with the client's side): public bytes
 * the credit does not cover wait (one socket read at most, then the socket is paused), and bytes from
 * the client are written to the public socket with their credit returned only once the socket took
 * them, so a slow public reader slows the local server.
 *
 * When it ends it is recorded like a capture (method `TCP` or `TLS`, the client's address and port as
 * the path, the bytes each way as the body sizes, how it ended as the error), which the API lists with
 * the tunnel's requests and the dashboard shows.
 */
import type { Socket } from 'node:net';
import type { ErrorCode } from '../errors.js';
import { encode } from '../protocol/codec.js';
import { FrameType, ResetCode } from '../protocol/constants.js';
import type { ReceiveWindow } from '../protocol/flow.js';
import { RawPipe } from '../protocol/raw-pipe.js';
import type { StoredCapture } from '../store/captures.js';
import type { EdgeStream, StreamHost } from './stream-host.js';
import type { Captured } from './turn.js';

/** Where a raw stream is: both directions open, one ended (a FIN each way ends it), or over. */
export const enum RawState {
  OPEN,
  /** Both directions ended and every byte left: recorded. */
  COMPLETE,
  /** Cut: a RESET, the tunnel closed, the public socket failed. */
  RESET,
}

/** Who is told when a raw stream ended (its tunnel): the record, the usage, the access log. */
export interface RawStreamEnd {
  rawEnded(stream: EdgeRawStream): void;
}

export class EdgeRawStream implements EdgeStream, Captured {
  readonly kind = 'raw';
  readonly deadline = Number.POSITIVE_INFINITY;
  state = RawState.OPEN;
  readonly requestId: string;
  readonly seq: number;
  readonly receivedAt = Date.now();
  private readonly startedAt = performance.now();
  private durationMs = -1;
  /** Credit both ways (src/protocol/raw-pipe.ts): public bytes out as DATA, the client's bytes in. */
  private readonly pipe: RawPipe;
  private publicFinished = false;
  private localFinished = false;
  bytesIn = 0;
  bytesOut = 0;
  /** How it ended: null when both sides closed cleanly, else the edge's error code. */
  error: string | null = null;

  constructor(
    readonly id: number,
    readonly session: StreamHost,
    private readonly socket: Socket,
    /** `TCP` or `TLS`, the record's method. */
    readonly protocol: 'TCP' | 'TLS',
    readonly clientAddress: string,
    readonly clientPort: number,
    private readonly serverAddress: string,
    private readonly serverPort: number,
    private readonly end: RawStreamEnd,
  ) {
    const next = session.ring.next();
    this.requestId = next.id;
    this.seq = next.seq;
    this.pipe = new RawPipe(id, {
      settings: session.settings,
      connectionSend: session.connectionSend,
      send: (frame) => session.send(frame),
      consumedConnection: (bytes) => session.consumedConnection(bytes),
      waitForConnection: () => session.blocked.add(this),
      pauseSource: () => socket.pause(),
      resumeSource: () => socket.resume(),
    }, session.settings.streamWindow);
  }

  get ring(): StreamHost['ring'] {
    return this.session.ring;
  }

  get receiveWindow(): ReceiveWindow {
    return this.pipe.receiveWindow;
  }

  get closed(): boolean {
    return this.state !== RawState.OPEN;
  }

  get bufferedRequestBytes(): number {
    return this.pipe.pendingBytes;
  }

  /** Tells the client (ACCEPT), then passes `early` (bytes read before: a peeked ClientHello) and reads on. */
  start(early: Buffer | null): void {
    const socket = this.socket;
    this.session.send(
      encode([FrameType.ACCEPT, this.id, this.session.tunnelId, this.requestId, this.clientAddress, this.clientPort, this.serverAddress, this.serverPort]),
    );
    socket.setNoDelay(true);
    // A peer that vanished (a NAT that forgot it) is noticed by keep-alive probes, not by an idle cut:
    // a TCP tunnel may sit idle for hours (an SSH session, a database connection pool).
    socket.setKeepAlive(true, 60_000);
    socket.on('data', (chunk: Buffer) => this.fromPublic(chunk));
    socket.on('end', () => this.publicEnd());
    socket.on('drain', () => this.onDrain());
    socket.on('close', () => this.publicClosed());
    socket.on('error', () => undefined);
    if (early !== null && early.byteLength > 0) this.fromPublic(early);
    if (!this.pipe.holding) socket.resume();
  }

  // ---- public → client ------------------------------------------------------------------------------

  private fromPublic(chunk: Buffer): void {
    if (this.closed || this.publicFinished) return;
    this.bytesIn += chunk.byteLength;
    this.pipe.fromSource(chunk);
  }

  private publicEnd(): void {
    if (this.closed || this.publicFinished) return;
    this.publicFinished = true;
    this.pipe.sourceEnd();
    this.checkDone();
  }

  /** More credit (stream or connection): send what waits, then read on. */
  drain(): void {
    if (this.closed) return;
    if (this.pipe.drain()) this.checkDone();
  }

  onWindow(credit: number): void {
    if (this.closed) return;
    if (this.pipe.grant(credit)) this.checkDone();
  }

  // ---- client → public ------------------------------------------------------------------------------

  onData(chunk: Uint8Array | null, end: boolean): void {
    const size = chunk === null ? 0 : chunk.byteLength;
    if (this.localFinished) {
      this.refuse(`DATA after the end of the raw stream ${this.id}`, size);
      return;
    }
    if (size > 0) {
      this.pipe.counted(size);
      this.bytesOut += size;
      this.pipe.wrote(size, this.socket.write(chunk!));
    }
    if (end) {
      this.localFinished = true;
      this.socket.end();
      this.checkDone();
    }
  }

  private onDrain(): void {
    this.pipe.sinkDrained();
    this.checkDone();
  }

  onResponse(_status: number, _reason: string, _headers: string[], body: Uint8Array | null): void {
    this.refuse(`RESPONSE on the raw stream ${this.id}`, body === null ? 0 : body.byteLength);
  }

  onInfo(): void {
    this.refuse(`INFO on the raw stream ${this.id}`, 0);
  }

  onTrailers(): void {
    this.refuse(`TRAILERS on the raw stream ${this.id}`, 0);
  }

  /** A frame a raw stream does not take: it is reset and the public connection cut; the tunnel carries on. */
  private refuse(reason: string, droppedBytes: number): void {
    if (droppedBytes > 0) this.session.consumedConnection(droppedBytes);
    if (this.closed) return;
    this.session.send(encode([FrameType.RESET, this.id, ResetCode.PROTOCOL_ERROR, reason]));
    this.cut('INVALID_RESPONSE');
  }

  // ---- ending ---------------------------------------------------------------------------------------

  /** Both directions ended and every byte left: recorded; the socket closes after both FINs. */
  private checkDone(): void {
    if (this.closed || !this.publicFinished || !this.localFinished || !this.pipe.idle) return;
    this.state = RawState.COMPLETE;
    this.finish();
  }

  onReset(code: number): void {
    // The codes an HTTP exchange's record would carry for the same resets (docs/protocol.md section 9).
    this.cut(code === ResetCode.LOCAL_UNREACHABLE || code === ResetCode.LOCAL_ERROR ? 'LOCAL_UNREACHABLE' : code === ResetCode.CANCEL ? 'CLIENT_CLOSED' : 'TUNNEL_CLOSED');
  }

  fail(code: ErrorCode): void {
    this.cut(code);
  }

  checkDeadline(): void {}

  /**
   * The public socket closed. After both FINs that is the normal end: the public client's last bytes may
   * still wait for the client's credit, and go on as it comes. Before, the client reset or dropped it.
   */
  private publicClosed(): void {
    if (this.closed) return;
    if (this.publicFinished && this.localFinished) {
      // Everything written has left the socket: a 'drain' may never come now.
      this.pipe.sinkDrained();
      this.checkDone();
      return;
    }
    this.session.send(encode([FrameType.RESET, this.id, ResetCode.CANCEL, 'the public client closed the connection']));
    this.cut('CLIENT_CLOSED');
  }

  /** Ends the stream at once: the socket is destroyed, and the record says why. */
  cut(error: string): void {
    if (this.closed) return;
    this.state = RawState.RESET;
    this.error = error;
    this.socket.destroy();
    this.finish();
  }

  private finish(): void {
    this.durationMs = Math.round(performance.now() - this.startedAt);
    this.session.endStream(this);
    this.pipe.close();
    this.end.rawEnded(this);
  }

  // ---- the record (Captured) --------------------------------------------------------------------------

  afterCapture(): void {}

  storedCapture(): StoredCapture {
    return {
      id: this.requestId,
      seq: this.seq,
      subdomain: this.session.subdomain,
      accountId: this.session.accountId,
      tokenId: this.session.tokenId,
      clientAddress: this.clientAddress,
      method: this.protocol,
      path: peerText(this.clientAddress, this.clientPort),
      status: 0,
      receivedAt: this.receivedAt,
      durationMs: this.durationMs < 0 ? Math.round(performance.now() - this.startedAt) : this.durationMs,
      error: this.error,
      replayOf: null,
      requestBodySize: this.bytesIn,
      requestTruncated: false,
      responseBodySize: this.bytesOut,
      responseTruncated: false,
      open: null,
      requestHeaders: [],
      requestBody: null,
      response: null,
      responseHeaders: [],
      responseBody: null,
    };
  }
}

/** `203.0.113.7:51234`, `[2001:db8::1]:51234`. */
export function peerText(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}
