/**
 * A public TCP connection on the client's side (docs/tcp.md): the edge's ACCEPT opens it, the client dials
 * the tunnel's local target (`localhost` on both loopbacks) and bytes pass raw as DATA both ways under the
 * stream's and the connection's credit, each direction's end as DATA `end` (a FIN), as on the edge's side
 * (src/edge/raw-stream.ts).
 *
 * Memory is bounded by credit (src/protocol/raw-pipe.ts, shared with the edge's side): local bytes the
 * credit does not cover wait (one socket read at most, then the local socket pauses), and bytes from the
 * edge are written to the local socket with their credit returned only once the socket took them. With
 * `--proxy-protocol` a PROXY v2 header naming the public client goes first.
 */
import { connect, type Socket } from 'node:net';
import { encode } from '../protocol/codec.js';
import { FrameType, ResetCode } from '../protocol/constants.js';
import { RawPipe } from '../protocol/raw-pipe.js';
import { dialOptions } from './local-connector.js';
import { plainError } from './local-hop/errors.js';
import type { LocalTarget } from './routes.js';
import type { FlushableStream, StreamHost } from './stream-host.js';

/** How a raw connection ended, for its line, the counters and the inspector. */
export interface RawConnectionEnd {
  /** The edge's id for the connection's record (ACCEPT's `requestId`): the API's and dashboard's id of it. */
  id: string;
  protocol: 'TCP' | 'TLS';
  /** When the client took the connection (ms since the epoch). */
  startedAt: number;
  clientAddress: string;
  clientPort: number;
  bytesIn: number;
  bytesOut: number;
  durationMs: number;
  /**
   * null: both sides closed cleanly; else why it was cut, in the words of the edge's record where the
   * client can know them (docs/tcp.md, Records): `CLIENT_CLOSED` (the edge cancelled the stream: the
   * public client went), `LOCAL_UNREACHABLE` (the local server could not be reached, failed or closed
   * early), `TUNNEL_CLOSED`; else `RESET` (any other reset by the edge) or `PROTOCOL_ERROR`.
   */
  error: string | null;
}

/** What a raw stream needs from its tunnel beyond a StreamHost. */
export interface RawStreamHost extends StreamHost {
  readonly kind: 'http' | 'tcp' | 'tls';
  rawEnded(end: RawConnectionEnd): void;
}

export class ClientRawStream implements FlushableStream {
  closed = false;
  private readonly socket: Socket;
  private connected = false;
  /** Credit both ways (src/protocol/raw-pipe.ts): local bytes out as DATA, the edge's bytes in. */
  private readonly pipe: RawPipe;
  /** Bytes from the edge before the local connection opened. */
  private early: Buffer[] = [];
  private earlyEnd = false;
  private localFinished = false;
  private publicFinished = false;
  private bytesIn = 0;
  private bytesOut = 0;
  private readonly startedAt = performance.now();
  private readonly startedAtMs = Date.now();

  constructor(
    readonly id: number,
    /** The edge's id for this connection's record (ACCEPT). */
    private readonly requestId: string,
    readonly host: RawStreamHost,
    readonly target: LocalTarget,
    private readonly clientAddress: string,
    private readonly clientPort: number,
    /** Written before any byte (PROXY v2), or null. */
    private readonly preamble: Buffer | null,
  ) {
    this.pipe = new RawPipe(id, {
      get settings() {
        return host.settings;
      },
      get connectionSend() {
        return host.connectionSend;
      },
      send: (frame) => host.send(frame),
      consumedConnection: (bytes) => host.consumedConnection(bytes),
      waitForConnection: () => host.blocked.add(this),
      pauseSource: () => this.socket.pause(),
      resumeSource: () => this.socket.resume(),
    }, host.settings.streamWindow);
    this.socket = connect({ host: target.host, port: target.port, noDelay: true, allowHalfOpen: true, ...dialOptions(target, false) });
    this.socket.setTimeout(10_000);
    this.socket.once('timeout', () => this.failLocal('connect timed out after 10 s'));
    this.socket.once('connect', () => this.onConnect());
    this.socket.on('data', (chunk: Buffer) => this.fromLocal(chunk));
    this.socket.on('end', () => this.localEnd());
    this.socket.on('drain', () => this.onDrain());
    this.socket.on('error', (error: Error) => this.failLocal(plainError(error).message));
    this.socket.on('close', () => this.localClosed());
  }

  private onConnect(): void {
    this.connected = true;
    this.socket.setTimeout(0);
    this.socket.setKeepAlive(true, 60_000);
    if (this.preamble !== null) this.socket.write(this.preamble);
    const early = this.early;
    this.early = [];
    for (const chunk of early) this.pipe.wrote(chunk.byteLength, this.socket.write(chunk));
    if (this.earlyEnd) this.socket.end();
  }

  // ---- edge → local ---------------------------------------------------------------------------------

  onRequestData(chunk: Uint8Array | null, end: boolean): void {
    const size = chunk === null ? 0 : chunk.byteLength;
    if (this.closed) {
      if (size > 0) this.host.consumedConnection(size);
      return;
    }
    if (size > 0) {
      if (!this.pipe.receive(size)) {
        this.host.protocolError(`the edge exceeded the window of stream ${this.id}`);
        return;
      }
      this.bytesIn += size;
      // The frame's memory is the message's: a copy is kept only while the socket is not connected.
      if (this.connected) this.pipe.wrote(size, this.socket.write(chunk!));
      else this.early.push(Buffer.from(chunk!));
    }
    if (end) {
      this.publicFinished = true;
      if (this.connected) this.socket.end();
      else this.earlyEnd = true;
      this.checkDone();
    }
  }

  private onDrain(): void {
    this.pipe.sinkDrained();
    this.checkDone();
  }

  onRequestTrailers(): void {
    this.reset(ResetCode.PROTOCOL_ERROR, `TRAILERS on the raw stream ${this.id}`, 'PROTOCOL_ERROR');
  }

  // ---- local → edge ---------------------------------------------------------------------------------

  private fromLocal(chunk: Buffer): void {
    if (this.closed) return;
    this.bytesOut += chunk.byteLength;
    this.pipe.fromSource(chunk);
  }

  /** More credit: send what waits, then read on. */
  flush(): void {
    if (this.closed) return;
    if (this.pipe.drain()) this.checkDone();
  }

  onWindow(credit: number): void {
    if (this.closed) return;
    if (this.pipe.grant(credit)) this.checkDone();
  }

  private localEnd(): void {
    if (this.closed || this.localFinished) return;
    this.localFinished = true;
    if (this.pipe.sourceEnd()) this.checkDone();
  }

  // ---- ending ---------------------------------------------------------------------------------------

  private checkDone(): void {
    if (this.closed || !this.localFinished || !this.publicFinished || !this.pipe.idle) return;
    this.finish(null);
  }

  private failLocal(message: string): void {
    if (this.closed) return;
    if (this.connected) this.reset(ResetCode.LOCAL_ERROR, `local server at ${this.target.authority}: ${message}`, 'LOCAL_UNREACHABLE');
    else this.reset(ResetCode.LOCAL_UNREACHABLE, `cannot connect to ${this.target.authority}: ${message}`, 'LOCAL_UNREACHABLE');
  }

  /**
   * The local socket closed. After both FINs that is the normal end: the local server's last bytes may
   * still wait for the edge's credit, and go on as it comes (cutting here lost them). Before, the public
   * connection is cut too.
   */
  private localClosed(): void {
    if (this.closed) return;
    if (this.localFinished && this.publicFinished) {
      // Everything written has left the socket: a 'drain' may never come now.
      this.pipe.sinkDrained();
      this.checkDone();
      return;
    }
    this.reset(ResetCode.LOCAL_ERROR, `local server at ${this.target.authority} closed the connection`, 'LOCAL_UNREACHABLE');
  }

  private reset(code: number, message: string, error: string): void {
    if (this.closed) return;
    this.host.send(encode([FrameType.RESET, this.id, code, message]));
    this.finish(error);
  }

  onReset(code?: number): void {
    // The edge cancels a stream whose public client went (src/edge/raw-stream.ts), and records CLIENT_CLOSED.
    this.finish(code === ResetCode.CANCEL ? 'CLIENT_CLOSED' : 'RESET');
  }

  tunnelClosed(): void {
    this.finish('TUNNEL_CLOSED');
  }

  private finish(error: string | null): void {
    if (this.closed) return;
    this.closed = true;
    this.early = [];
    if (error !== null) this.socket.destroy();
    // Bytes received but never written: their connection credit goes back.
    this.pipe.close();
    this.host.endStream(this);
    this.host.count(this.bytesIn, this.bytesOut, error !== null);
    this.host.rawEnded({
      id: this.requestId,
      protocol: this.host.kind === 'tls' ? 'TLS' : 'TCP',
      startedAt: this.startedAtMs,
      clientAddress: this.clientAddress,
      clientPort: this.clientPort,
      bytesIn: this.bytesIn,
      bytesOut: this.bytesOut,
      durationMs: Math.round(performance.now() - this.startedAt),
      error,
    });
  }
}
