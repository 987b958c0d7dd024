/**
 * WebSocket passthrough on the client: WS_OPEN becomes a WebSocket to the route's local target (same
 * path, subprotocols and headers such as Host, Origin and Cookie; Host per `--host-header`, the public
 * one by default, as for plain HTTP); its answer goes back as WS_RESPONSE, then messages flow both ways
 * within credit and close codes are kept. Dev servers' hot reload works.
 */
import WebSocket from 'ws';
import { closeReason } from '../protocol/close-reason.js';
import { encode, type Frame } from '../protocol/codec.js';
import { FrameType, ResetCode } from '../protocol/constants.js';
import { dropHopByHop } from '../protocol/headers.js';
import { MessageRelay } from '../protocol/ws-relay.js';
import { logWebSocketMessage, webSocketExchange, type Exchange } from './exchange.js';
import { localRequestHeaders } from './host-header.js';
import { plainError } from './http-stream.js';
import { dialOptions } from './local-connector.js';
import type { LocalTarget } from './routes.js';
import type { StreamHost } from './stream-host.js';

/** Headers the local WebSocket handshake makes itself. */
const HANDSHAKE_HEADERS = new Set(['sec-websocket-key', 'sec-websocket-version', 'sec-websocket-extensions', 'sec-websocket-protocol']);

export const MAX_WS_MESSAGE = 4 * 1024 * 1024;

/**
 * Messages from the local app waiting for credit: past this many bytes the local socket is paused, so
 * a slow public reader slows the local app down (its own send buffer grows) instead of the tunnel
 * client holding the difference. Reading resumes when the queue is below a quarter of it.
 */
export const WS_PAUSE_BYTES = 1024 * 1024;
/**
 * The hard bound on that queue. `ws` still emits what it had already read when paused (up to one
 * socket read, and one message of at most MAX_WS_MESSAGE), so it is reached only if pausing fails;
 * then the local socket is closed with 1008, never the client's memory.
 */
const MAX_WS_QUEUED = WS_PAUSE_BYTES + MAX_WS_MESSAGE;

export class ClientWsStream {
  readonly kind = 'passthrough';
  closed = false;
  readonly port: number;
  readonly target: LocalTarget;
  /** The path the local server gets (the route's prefix stripped when it says so). */
  private readonly localPath: string;
  private socket: WebSocket | null = null;
  private readonly relay: MessageRelay;
  private readonly send = (frame: Buffer): void => this.host.send(frame);
  /** The connection as the inspector sees it, when something records (host.recordWebSocket). */
  private log: Exchange | null = null;
  /** The local socket's reading is paused until the relay's queue drains (WS_PAUSE_BYTES). */
  private localPaused = false;

  constructor(
    readonly id: number,
    private readonly host: StreamHost,
    private readonly path: string,
    private readonly headers: string[],
    private readonly requestId = '',
    private readonly clientAddress = '',
  ) {
    const resolved = host.routes.resolve(path);
    this.target = resolved.target;
    this.localPath = resolved.path;
    this.port = this.target.port;
    this.relay = new MessageRelay(id, host.settings, MAX_WS_QUEUED, MAX_WS_MESSAGE);
  }

  start(): void {
    const headers: Record<string, string> = {};
    let protocols: string[] = [];
    const list = localRequestHeaders(dropHopByHop(this.headers), this.target, this.host.hostHeader);
    for (let i = 0; i < list.length; i += 2) {
      const name = list[i]!;
      const value = list[i + 1]!;
      if (name === 'sec-websocket-protocol') protocols = value.split(',').map((p) => p.trim()).filter((p) => p.length > 0);
      else if (!HANDSHAKE_HEADERS.has(name)) headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
    }
    const scheme = this.target.scheme === 'https' ? 'wss' : 'ws';
    let socket: WebSocket;
    try {
      socket = new WebSocket(`${scheme}://${this.target.authority}${this.localPath}`, protocols, {
        ...dialOptions(this.target, this.host.localInsecure),
        headers,
        perMessageDeflate: false,
        maxPayload: MAX_WS_MESSAGE,
        handshakeTimeout: 30_000,
      });
    } catch (error) {
      // Node refuses some header bytes (a char above 0xFF, a control character) at once: that one
      // stream fails, never the tunnel.
      const message = `local WebSocket at ${scheme}://${this.target.authority}: ${(error as Error).message}`;
      this.host.send(encode([FrameType.RESET, this.id, ResetCode.LOCAL_ERROR, message]));
      this.recordOpen(0, [], message);
      this.finish();
      return;
    }
    this.socket = socket;
    socket.on('open', () => {
      if (this.closed) return;
      this.host.send(encode([FrameType.WS_RESPONSE, this.id, 101, socket.protocol, []]));
      this.recordOpen(101, [], null);
    });
    socket.on('unexpected-response', (_request, response) => {
      const flat: string[] = [];
      for (let i = 0; i + 1 < response.rawHeaders.length; i += 2) flat.push(response.rawHeaders[i]!.toLowerCase(), response.rawHeaders[i + 1]!);
      this.host.send(encode([FrameType.WS_RESPONSE, this.id, response.statusCode ?? 502, '', dropHopByHop(flat)]));
      this.recordOpen(response.statusCode ?? 502, dropHopByHop(flat), null);
      response.resume();
      this.finish();
      socket.terminate();
    });
    socket.on('message', (data: Buffer, isBinary: boolean) => {
      if (this.closed) return;
      if (!this.relay.push(data, isBinary, this.host.connectionSend, this.send)) {
        socket.close(1008, 'the tunnel cannot keep up');
        return;
      }
      if (this.log !== null) logWebSocketMessage(this.log.websocket!, 'out', data, isBinary, this.host.recordLimit > 0);
      const waiting = this.relay.waiting;
      if (waiting > 0 && this.host.connectionSend.available === 0) this.host.blocked.add(this);
      if (waiting >= WS_PAUSE_BYTES && !this.localPaused) {
        this.localPaused = true;
        socket.pause();
      }
    });
    socket.on('close', (code: number, reason: Buffer) => {
      if (this.closed) return;
      this.host.send(encode([FrameType.WS_CLOSE, this.id, code === 1006 ? 1005 : code, reason.toString('utf8')]));
      this.finish(code, reason.toString('utf8'));
    });
    socket.on('error', (error: Error) => {
      if (this.closed) return;
      if (socket.readyState === WebSocket.CONNECTING || socket.readyState === WebSocket.CLOSED) {
        const message = `local WebSocket at ${scheme}://${this.target.authority}: ${plainError(error).message}`;
        this.host.send(encode([FrameType.RESET, this.id, ResetCode.LOCAL_UNREACHABLE, message]));
        this.recordOpen(0, [], message);
        this.finish();
      }
    });
  }

  onFrame(frame: Frame): void {
    if (frame[0] === FrameType.WS_MESSAGE) {
      const data = frame[2];
      if (!this.relay.receiveWindow.receive(data.byteLength)) {
        this.host.protocolError(`the edge exceeded the window of stream ${this.id}`);
        return;
      }
      const message = this.relay.receive(data, frame[3], frame[4]);
      if (message === null || this.socket === null || this.socket.readyState !== WebSocket.OPEN) {
        this.returnCredit(data.byteLength);
        return;
      }
      if (this.log !== null) logWebSocketMessage(this.log.websocket!, 'in', message.data, message.binary, this.host.recordLimit > 0);
      const size = message.data.byteLength;
      this.socket.send(message.data, { binary: message.binary }, () => this.returnCredit(size));
    } else if (frame[0] === FrameType.WS_CLOSE) {
      this.finish(frame[2], frame[3]);
      const code = frame[2];
      const valid = code >= 1000 && code <= 4999 && code !== 1004 && code !== 1005 && code !== 1006 && code !== 1015;
      this.socket?.close(valid ? code : 1000, closeReason(frame[3]));
    }
  }

  private returnCredit(bytes: number): void {
    if (!this.closed) {
      const grant = this.relay.receiveWindow.consume(bytes);
      if (grant > 0) this.host.send(encode([FrameType.WINDOW, this.id, grant]));
    }
    this.host.consumedConnection(bytes);
  }

  onWindow(credit: number): void {
    this.relay.sendCredit.grant(credit);
    this.flush();
  }

  flush(): void {
    if (this.closed) return;
    this.relay.flush(this.host.connectionSend, this.send);
    if (this.localPaused && this.relay.waiting < WS_PAUSE_BYTES / 4) {
      this.localPaused = false;
      this.socket?.resume();
    }
  }

  /** Bytes from the local app waiting for credit (bounded by WS_PAUSE_BYTES plus what one read brings). */
  get queuedBytes(): number {
    return this.relay.waiting;
  }

  onReset(): void {
    this.finish();
    this.socket?.terminate();
  }

  tunnelClosed(): void {
    this.finish();
    this.socket?.close(1001, 'tunnel closed');
  }

  private recordOpen(status: number, responseHeaders: string[], error: string | null): void {
    if (this.log !== null || this.host.observesWebSockets !== true || this.host.recordWebSocket === undefined) return;
    this.log = webSocketExchange(this.requestId, this.path, this.port, this.headers, this.clientAddress, status, responseHeaders, error);
    this.host.recordWebSocket(this.log);
  }

  private finish(code: number | null = null, reason = ''): void {
    if (this.closed) return;
    this.closed = true;
    // A paused socket would not read the local app's close frame: the close handshake needs reading.
    if (this.localPaused) {
      this.localPaused = false;
      this.socket?.resume();
    }
    this.host.endStream(this);
    const log = this.log?.websocket;
    if (log !== undefined && log.closedAt === null) {
      log.closedAt = Date.now();
      log.closeCode = code;
      log.closeReason = reason;
      this.host.recordWebSocket!(this.log!);
    }
  }
}
