/**
 * WebSocket passthrough on the edge: a public WebSocket upgrade on a tunnel's subdomain becomes a
 * stream; the upgrade completes only when the local server accepted it (WS_RESPONSE 101), and then
 * messages flow both ways as WS_MESSAGE frames within credit, and close codes are kept.
 *
 * uWS cannot pause reading a WebSocket, so messages from a public socket that outruns the tunnel wait
 * in a bounded queue; past it the public socket is closed (1008), never the edge's memory.
 */
import { closeReason } from '../protocol/close-reason.js';
import { ERROR_CODES, type ErrorCode } from '../errors.js';
import { encode, ProtocolError, type Frame } from '../protocol/codec.js';
import { FrameType, ResetCode } from '../protocol/constants.js';
import { MessageRelay } from '../protocol/ws-relay.js';
import type { HttpResponse, us_socket_context_t, WebSocket } from '../uws.js';
import type { RequestHead } from './http-stream.js';
import { checkResponseHeaders, checkSubprotocol, statusKind, StatusKind } from './response-head.js';
import { BURROW_ERROR_HEADER, errorJson } from './public-error.js';
import { statusLine } from './responses.js';
import type { SocketData, StreamHost } from './stream-host.js';

/** Where a passthrough stream is; every frame from the client is checked against it. */
export const enum PassthroughState {
  /** WS_OPEN sent; the public upgrade waits for WS_RESPONSE. */
  AWAITING_UPGRADE,
  /** The local server accepted (101): messages flow both ways. */
  OPEN,
  /** Closed on either side, refused, reset, or the tunnel dropped. */
  CLOSED,
}

export interface UpgradeKeys {
  key: string;
  protocol: string;
  extensions: string;
}

const NORMAL_CLOSURE = 1000;
const NO_STATUS = 1005;
const ABNORMAL = 1006;
const POLICY_VIOLATION = 1008;
const INTERNAL_ERROR = 1011;

export class PassthroughStream {
  readonly kind = 'passthrough';
  state = PassthroughState.AWAITING_UPGRADE;
  readonly requestId: string;
  readonly relay: MessageRelay;
  private res: HttpResponse | null;
  private ws: WebSocket<SocketData> | null = null;
  /** Bytes sent to the public socket under backpressure: their credit returns on drain. */
  private unacknowledged = 0;
  private readonly send = (frame: Buffer): void => this.session.send(frame);
  // For the access log and metrics (src/edge/observer.ts): what the upgrade was answered, and the traffic.
  readonly receivedAt = Date.now();
  readonly startedAt = performance.now();
  status = 0;
  error: string | null = null;
  bytesIn = 0;
  bytesOut = 0;

  constructor(
    readonly id: number,
    readonly session: StreamHost,
    readonly head: RequestHead,
    res: HttpResponse,
    private readonly context: us_socket_context_t,
    private readonly keys: UpgradeKeys,
    maxBuffered: number,
  ) {
    this.res = res;
    this.requestId = session.ring.next().id;
    this.relay = new MessageRelay(id, session.settings, maxBuffered, maxBuffered);
  }

  get closed(): boolean {
    return this.state === PassthroughState.CLOSED;
  }

  /** The stream is over: it leaves the session's table. */
  private end(): void {
    if (this.state === PassthroughState.CLOSED) return;
    this.state = PassthroughState.CLOSED;
    this.session.endStream(this);
  }

  start(): void {
    this.session.send(
      encode([FrameType.WS_OPEN, this.id, this.requestId, this.head.path, this.head.headers, this.head.clientAddress]),
    );
  }

  /** The public client left while the upgrade was pending. */
  upgradeAborted(): void {
    this.res = null;
    if (this.closed) return;
    this.status = 499;
    this.error = 'CLIENT_CLOSED';
    this.session.send(encode([FrameType.RESET, this.id, ResetCode.CANCEL, 'the public client went away']));
    this.end();
  }

  onFrame(frame: Frame): void {
    switch (frame[0]) {
      case FrameType.WS_RESPONSE:
        if (this.state !== PassthroughState.AWAITING_UPGRADE) this.refuse(`a second WS_RESPONSE on stream ${this.id}`);
        else this.onAnswer(frame[2], frame[3], frame[4]);
        return;
      case FrameType.WS_MESSAGE: {
        const data = frame[2];
        if (this.state === PassthroughState.AWAITING_UPGRADE) {
          this.session.consumedConnection(data.byteLength);
          this.refuse(`WS_MESSAGE before the upgrade on stream ${this.id}`);
          return;
        }
        this.bytesOut += data.byteLength;
        if (!this.relay.receiveWindow.receive(data.byteLength)) throw new ProtocolError(`the client exceeded the window of stream ${this.id}`);
        if (this.closed || this.ws === null) {
          this.session.consumedConnection(data.byteLength);
          return;
        }
        const message = this.relay.receive(data, frame[3], frame[4]);
        if (message === null) {
          this.returnCredit(data.byteLength);
          return;
        }
        const status = this.ws.send(message.data, message.binary, false);
        // 0: buffered under backpressure; credit waits for drain. 1: sent.
        if (status === 1) this.returnCredit(message.data.byteLength);
        else this.unacknowledged += message.data.byteLength;
        return;
      }
      case FrameType.WS_CLOSE:
        if (this.state === PassthroughState.AWAITING_UPGRADE) this.refuse(`WS_CLOSE before the upgrade on stream ${this.id}`);
        else this.closePublic(frame[2], frame[3]);
        return;
      default:
        throw new ProtocolError(`frame type ${frame[0]} on WebSocket stream ${this.id}`);
    }
  }

  private returnCredit(bytes: number): void {
    const grant = this.relay.receiveWindow.consume(bytes);
    if (grant > 0) this.session.send(encode([FrameType.WINDOW, this.id, grant]));
    this.session.consumedConnection(bytes);
  }

  onWindow(credit: number): void {
    this.relay.sendCredit.grant(credit);
    this.relay.flush(this.session.connectionSend, this.send);
  }

  /** More connection credit arrived. */
  drain(): void {
    if (this.ws !== null) this.relay.flush(this.session.connectionSend, this.send);
  }

  private onAnswer(status: number, protocol: string, headers: string[]): void {
    const res = this.res;
    if (res === null) return;
    this.status = status;
    if (status === 101) {
      const problem = checkSubprotocol(protocol, this.keys.protocol);
      if (problem !== null) {
        this.refuse(problem);
        return;
      }
      this.res = null;
      this.state = PassthroughState.OPEN;
      res.cork(() => {
        res.upgrade<SocketData>({ session: null, passthrough: this }, this.keys.key, protocol, '', this.context);
      });
      return;
    }
    // The local server refused the upgrade: its status and headers go to the public client.
    const checked = statusKind(status) === StatusKind.FINAL ? checkResponseHeaders(headers) : `the status ${status} is neither 101 nor a final HTTP status`;
    if (typeof checked === 'string') {
      this.refuse(checked);
      return;
    }
    this.res = null;
    this.end();
    const cleaned = checked.headers;
    res.cork(() => {
      res.writeStatus(statusLine(status));
      for (let i = 0; i < cleaned.length; i += 2) res.writeHeader(cleaned[i] as string, cleaned[i + 1]!);
      res.end();
    });
  }

  /**
   * A frame that does not fit the stream's state, or a head the edge cannot forward: the stream is
   * reset with PROTOCOL_ERROR; a pending upgrade gets 502 INVALID_RESPONSE, an open socket is closed
   * with 1011. The tunnel carries on.
   */
  private refuse(reason: string): void {
    if (this.closed) return;
    this.session.send(encode([FrameType.RESET, this.id, ResetCode.PROTOCOL_ERROR, reason]));
    const res = this.res;
    if (res !== null) {
      this.res = null;
      this.status = ERROR_CODES.INVALID_RESPONSE.status;
      this.error = 'INVALID_RESPONSE';
      this.end();
      res.cork(() => writeUpgradeError(res, 'INVALID_RESPONSE', `The tunnel client sent a response the edge cannot forward: ${reason}.`));
      return;
    }
    this.closePublic(INTERNAL_ERROR, 'the tunnel client broke the protocol');
  }

  onReset(code: number, message: string): void {
    if (this.res !== null) {
      const res = this.res;
      this.res = null;
      const errorCode = code === ResetCode.LOCAL_UNREACHABLE || code === ResetCode.LOCAL_ERROR ? 'LOCAL_UNREACHABLE' : 'TUNNEL_CLOSED';
      this.status = ERROR_CODES[errorCode].status;
      this.error = errorCode;
      res.cork(() => writeUpgradeError(res, errorCode, message === '' ? ERROR_CODES[errorCode].message : message));
      this.end();
      return;
    }
    this.closePublic(INTERNAL_ERROR, message);
  }

  /** The tunnel dropped. */
  tunnelClosed(): void {
    if (this.res !== null) this.onReset(ResetCode.CANCEL, ERROR_CODES.TUNNEL_CLOSED.message);
    else this.closePublic(INTERNAL_ERROR, 'tunnel closed');
  }

  // ---- the public WebSocket ---------------------------------------------------------------------

  onPublicOpen(ws: WebSocket<SocketData>): void {
    this.ws = ws;
    if (this.closed) ws.end(INTERNAL_ERROR, 'tunnel closed');
  }

  onPublicMessage(message: ArrayBuffer, isBinary: boolean): void {
    if (this.closed) return;
    this.bytesIn += message.byteLength;
    // A copy: uWS reuses the message's memory once this callback returns.
    const data = Buffer.copyBytesFrom(new Uint8Array(message));
    if (!this.relay.push(data, isBinary, this.session.connectionSend, this.send)) {
      this.closePublic(POLICY_VIOLATION, 'the tunnel cannot keep up with this WebSocket');
      this.session.send(encode([FrameType.WS_CLOSE, this.id, POLICY_VIOLATION, 'the tunnel cannot keep up']));
      return;
    }
    if (this.relay.waiting > 0 && this.session.connectionSend.available === 0) this.session.blocked.add(this);
  }

  onPublicDrain(): void {
    if (this.unacknowledged > 0 && this.ws !== null && this.ws.getBufferedAmount() === 0) {
      const bytes = this.unacknowledged;
      this.unacknowledged = 0;
      this.returnCredit(bytes);
    }
  }

  onPublicClose(code: number, message: ArrayBuffer): void {
    this.ws = null;
    if (this.closed) return;
    const reason = Buffer.from(message).toString('utf8');
    this.session.send(encode([FrameType.WS_CLOSE, this.id, code === ABNORMAL ? NO_STATUS : code, reason]));
    this.end();
  }

  private closePublic(code: number, reason: string): void {
    this.end();
    const ws = this.ws;
    if (ws === null) return;
    this.ws = null;
    try {
      if (code === NO_STATUS || code === ABNORMAL || code < 1000) ws.end(NORMAL_CLOSURE, closeReason(reason));
      else ws.end(code, closeReason(reason));
    } catch {
      // The socket closed meanwhile.
    }
  }
}

/** An edge error in answer to a pending upgrade (inside a cork). */
function writeUpgradeError(res: HttpResponse, code: ErrorCode, message: string): void {
  res
    .writeStatus(statusLine(ERROR_CODES[code].status))
    .writeHeader('Content-Type', 'application/json')
    .writeHeader(BURROW_ERROR_HEADER, code)
    .end(errorJson(code, message));
}
