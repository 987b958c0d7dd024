/**
 * An upgrade request on the client's side (OPEN with `upgrade`, docs/protocol.md section 13): a raw
 * connection of its own to the route's local target, the request head written from the OPEN (Host per
 * `--host-header`, Connection and Upgrade as the public client sent them), the answer read with llhttp.
 * 1xx go back as INFO; a 101 goes back as RESPONSE 101 with the local server's fields as they came
 * (the extensions and subprotocol it chose), and from then on the connection's bytes pass both ways as
 * DATA, untouched, within credit: the local socket is not read while the edge has granted none, and
 * credit for the edge's bytes goes back once the local socket took them. Each direction's FIN is DATA
 * `end`. Any other answer is an ordinary response, body and all, and the stream ends with it.
 *
 * For the inspector, a WebSocket's frames are read as they pass (src/client/websocket-reader.ts), never
 * changed.
 */
import { connect as connectTcp, type Socket } from 'node:net';
import { connect as connectTls } from 'node:tls';
import { requestHead } from '../http1/head.js';
import { Http1Parser, MessageKind, type MessageHead } from '../http1/parser.js';
import { encode } from '../protocol/codec.js';
import { FrameType, ResetCode } from '../protocol/constants.js';
import { ReceiveWindow, SendCredit, takeFrameCredit } from '../protocol/flow.js';
import { dropHopByHop, isName } from '../protocol/headers.js';
import { edgeResetText, logWebSocketMessage, webSocketExchange, type Exchange } from './exchange.js';
import { localRequestHeaders } from './host-header.js';
import { plainError, type OpenRequest } from './http-stream.js';
import { dialOptions } from './local-connector.js';
import type { LocalTarget } from './routes.js';
import type { StreamHost } from './stream-host.js';
import { WebSocketFrameReader } from './websocket-reader.js';

/** Past this many bytes from the local server waiting for credit, its socket is not read. */
export const UPGRADE_PAUSE_BYTES = 256 * 1024;
const PAUSE_BYTES = UPGRADE_PAUSE_BYTES;
/** Response fields that are each hop's own framing (the edge writes its own). */
const FRAMING = ['content-length', 'transfer-encoding'];

export class ClientUpgradeStream {
  readonly kind = 'upgrade';
  closed = false;
  readonly port: number;
  readonly target: LocalTarget;
  private socket: Socket | null = null;
  private parser: Http1Parser | null = null;
  private readonly requestWindow: ReceiveWindow;
  private readonly sendCredit: SendCredit;
  private status = 0;
  /** The local server answered 101: bytes pass raw. */
  private switched = false;
  /** An ordinary (refused) answer is on its way: its body goes as DATA. */
  private answering = false;
  private headSent = false;
  /** Bytes from the local server waiting for credit, and whether its FIN (or the answer's end) follows. */
  private queue: Buffer[] = [];
  private queued = 0;
  private endPending = false;
  private sentEnd = false;
  private edgeEnded = false;
  private localPaused = false;
  /** Bytes the edge sent that the local socket has not taken yet (their credit waits). */
  private unwritten = 0;
  private log: Exchange | null = null;
  private inbound: WebSocketFrameReader | null = null;
  private outbound: WebSocketFrameReader | null = null;

  constructor(
    readonly id: number,
    private readonly host: StreamHost,
    private readonly request: OpenRequest,
  ) {
    this.target = host.routes.targetFor(request.path);
    this.port = this.target.port;
    this.requestWindow = new ReceiveWindow(host.settings.streamWindow);
    this.sendCredit = new SendCredit(host.settings.streamWindow);
  }

  start(): void {
    const problem = fieldProblem(this.request.headers);
    if (problem !== null) {
      // Never written: a character above \xFF has no byte to stand for (docs/protocol.md 12).
      this.fail(ResetCode.LOCAL_ERROR, `local server at ${this.target.origin}: ${problem}`);
      return;
    }
    const target = this.target;
    const options = dialOptions(target, this.host.localInsecure);
    const socket =
      target.scheme === 'https'
        ? connectTls({ ...options, host: target.host, port: target.port, servername: /^[0-9.]+$|:/.test(target.host) ? '' : target.host })
        : connectTcp({ ...options, host: target.host, port: target.port });
    this.socket = socket;
    socket.setNoDelay(true);
    const headers = localRequestHeaders(this.request.headers, target, this.host.hostHeader);
    socket.write(requestHead(this.request.method, this.request.path, headers), 'latin1');
    this.parser = new Http1Parser(MessageKind.RESPONSE, {
      onHead: (head) => this.onHead(head),
      onBody: (chunk) => this.fromLocal(chunk),
      onTrailers: () => undefined,
      onComplete: () => {
        if (this.answering) this.endFromLocal();
      },
    });
    socket.on('data', (chunk: Buffer) => this.onLocalData(chunk));
    socket.on('end', () => this.onLocalEnd());
    socket.on('error', (error: Error) => this.onLocalError(error));
    socket.on('close', () => this.onLocalClose());
  }

  // ---- local server → edge ------------------------------------------------------------------------

  private onLocalData(chunk: Buffer): void {
    if (this.closed) return;
    const parser = this.parser;
    if (this.switched || parser === null) {
      this.fromLocal(chunk);
      return;
    }
    const result = parser.execute(chunk);
    if (typeof result !== 'number') {
      this.fail(ResetCode.LOCAL_ERROR, `local server at ${this.target.origin}: not an HTTP answer (${result.reason})`);
      return;
    }
    if (this.switched) {
      // The switched protocol's first bytes came with the 101.
      this.parser = null;
      parser.close();
      if (result >= 0 && result < chunk.byteLength) this.fromLocal(chunk.subarray(result));
    }
  }

  private onHead(head: MessageHead): boolean {
    const status = head.status;
    // A 101 keeps its fields whole (Connection and Upgrade switch the public connection); an ordinary
    // answer loses its hop-by-hop ones, Content-Length stays (the edge checks the body against it).
    const clean = status === 101 ? stripFraming(head.fields) : dropHopByHop(head.fields);
    if (status >= 100 && status < 200 && status !== 101) {
      this.host.send(encode([FrameType.INFO, this.id, status, head.reason, dropHopByHop(head.fields)]));
      return false;
    }
    this.status = status;
    this.headSent = true;
    this.host.send(encode([FrameType.RESPONSE, this.id, status, head.reason, clean, null, false]));
    if (status === 101) {
      this.switched = true;
      this.recordOpen(101, clean, null);
    } else {
      this.answering = true;
      this.recordOpen(status, clean, null);
    }
    return this.request.method === 'HEAD';
  }

  /** Bytes for the edge: a refused answer's body, or after a 101 the local server's raw bytes. */
  private fromLocal(chunk: Buffer): void {
    if (this.closed || chunk.byteLength === 0) return;
    this.outbound?.push(chunk);
    this.queue.push(chunk);
    this.queued += chunk.byteLength;
    this.flush();
  }

  private endFromLocal(): void {
    if (this.endPending) return;
    this.endPending = true;
    this.flush();
  }

  private onLocalEnd(): void {
    if (this.closed) return;
    if (this.switched) {
      this.endFromLocal();
      return;
    }
    const failure = this.parser?.finish() ?? null;
    if (failure !== null || !this.answering) this.fail(ResetCode.LOCAL_ERROR, `local server at ${this.target.origin} closed the connection before its answer ended`);
  }

  private onLocalError(error: Error): void {
    if (this.closed) return;
    const message = `local server at ${this.target.origin}: ${plainError(error).message}`;
    this.fail(this.headSent ? ResetCode.LOCAL_ERROR : ResetCode.LOCAL_UNREACHABLE, message);
  }

  private onLocalClose(): void {
    if (this.closed) return;
    // A close after both FINs is the end of a switched stream; anything else cut it short.
    if (this.switched && this.sentEnd && this.edgeEnded) this.complete(null);
    else if (!this.switched && this.answering && this.endPending) return;
    else this.fail(ResetCode.LOCAL_ERROR, `local server at ${this.target.origin} closed the connection`);
  }

  /** Sends what waits within credit; the local socket is read again once little waits. */
  flush(): void {
    if (this.closed) return;
    const maxFrame = this.host.settings.maxFrameBody;
    const connection = this.host.connectionSend;
    while (this.queue.length > 0) {
      const chunk = this.queue[0]!;
      const size = takeFrameCredit(chunk.byteLength, maxFrame, this.sendCredit, connection);
      if (size === 0) {
        if (connection.available === 0) this.host.blocked.add(this);
        break;
      }
      const last = this.endPending && this.queue.length === 1 && size === chunk.byteLength;
      this.host.send(encode([FrameType.DATA, this.id, size === chunk.byteLength ? chunk : chunk.subarray(0, size), last]));
      this.queued -= size;
      if (size === chunk.byteLength) this.queue.shift();
      else this.queue[0] = chunk.subarray(size);
      if (last) this.sentEnd = true;
    }
    if (this.queue.length === 0 && this.endPending && !this.sentEnd) {
      this.sentEnd = true;
      this.host.send(encode([FrameType.DATA, this.id, null, true]));
    }
    if (this.sentEnd && this.queue.length === 0) {
      // A refused upgrade's answer is complete; a switched stream waits for the edge's FIN too.
      if (!this.switched) {
        this.socket?.destroy();
        this.complete(null);
        return;
      }
      if (this.edgeEnded && this.unwritten === 0) this.socket?.end();
    }
    const socket = this.socket;
    if (socket === null) return;
    if (this.queued >= PAUSE_BYTES && !this.localPaused) {
      this.localPaused = true;
      socket.pause();
    } else if (this.queued < PAUSE_BYTES / 4 && this.localPaused) {
      this.localPaused = false;
      socket.resume();
    }
  }

  onWindow(credit: number): void {
    this.sendCredit.grant(credit);
    this.flush();
  }

  /** Bytes from the local server waiting for credit (bounded by UPGRADE_PAUSE_BYTES plus one socket read). */
  get queuedBytes(): number {
    return this.queued;
  }

  // ---- edge → local server ------------------------------------------------------------------------

  /** Raw bytes from the public client, after the 101 (a view of the frame, which we own). */
  onRequestData(chunk: Uint8Array | null, end: boolean): void {
    if (this.closed) return;
    const size = chunk === null ? 0 : chunk.byteLength;
    if (size > 0 && !this.requestWindow.receive(size)) {
      this.host.protocolError(`the edge exceeded the window of stream ${this.id}`);
      return;
    }
    const socket = this.socket;
    if (!this.switched || socket === null || this.edgeEnded) {
      // Nothing may come before the 101 (the upgrade's OPEN ended its request): dropped, credit returned.
      if (size > 0) this.host.consumedConnection(size);
      return;
    }
    if (size > 0) {
      const bytes = Buffer.from(chunk!.buffer, chunk!.byteOffset, size);
      this.inbound?.push(bytes);
      this.unwritten += size;
      socket.write(bytes, () => this.written(size));
    }
    if (end) {
      this.edgeEnded = true;
      if (this.unwritten === 0) socket.end();
      if (this.sentEnd && this.queue.length === 0 && this.unwritten === 0) socket.end();
    }
  }

  onRequestTrailers(): void {
    this.onRequestData(null, true);
  }

  /** The local socket took `bytes` of the edge's: their credit goes back. */
  private written(bytes: number): void {
    this.unwritten -= bytes;
    if (!this.closed) {
      const grant = this.requestWindow.consume(bytes);
      if (grant > 0) this.host.send(encode([FrameType.WINDOW, this.id, grant]));
    }
    this.host.consumedConnection(bytes);
    if (this.edgeEnded && this.unwritten === 0 && !this.closed) this.socket?.end();
  }

  // ---- ending --------------------------------------------------------------------------------------

  onReset(code?: number, message?: string): void {
    if (this.closed) return;
    this.complete(edgeResetText(code, message));
    this.socket?.destroy();
  }

  tunnelClosed(): void {
    this.onReset();
  }

  private fail(code: number, message: string): void {
    if (this.closed) return;
    this.host.send(encode([FrameType.RESET, this.id, code, message]));
    this.recordOpen(0, [], message);
    this.complete(message);
    this.socket?.destroy();
  }

  private complete(error: string | null): void {
    if (this.closed) return;
    this.closed = true;
    this.host.endStream(this);
    this.queue = [];
    this.queued = 0;
    this.parser?.close();
    this.parser = null;
    this.host.count(0, 0, error !== null || this.status >= 500);
    const log = this.log?.websocket;
    if (log !== undefined && log.closedAt === null) {
      log.closedAt = Date.now();
      this.host.recordWebSocket?.(this.log!);
    }
  }

  /** The inspector's view: the handshake's answer, then (for a WebSocket) its messages and close. */
  private recordOpen(status: number, responseHeaders: string[], error: string | null): void {
    if (this.log !== null || this.host.recordLimit === 0 || this.host.recordWebSocket === undefined) return;
    const request = this.request;
    this.log = webSocketExchange(request.requestId, request.method, request.path, this.port, request.headers, request.clientAddress, status, responseHeaders, error);
    this.host.recordWebSocket(this.log);
    const websocket = this.log.websocket!;
    if (status !== 101 || !isWebSocket(request.headers)) return;
    this.inbound = new WebSocketFrameReader({
      message: (kept, size, binary) => logWebSocketMessage(websocket, 'in', kept, binary, size),
      close: (code, reason) => {
        websocket.closeCode ??= code;
        if (websocket.closeReason === '') websocket.closeReason = reason;
      },
    });
    this.outbound = new WebSocketFrameReader({
      message: (kept, size, binary) => logWebSocketMessage(websocket, 'out', kept, binary, size),
      close: (code, reason) => {
        websocket.closeCode ??= code;
        if (websocket.closeReason === '') websocket.closeReason = reason;
      },
    });
  }
}

/** A 101's fields without body framing (a 101 has no body; the fields are otherwise the server's). */
function stripFraming(fields: string[]): string[] {
  if (!fields.some((name, i) => i % 2 === 0 && FRAMING.includes(name.toLowerCase()))) return fields;
  const result: string[] = [];
  for (let i = 0; i < fields.length; i += 2) if (!FRAMING.includes(fields[i]!.toLowerCase())) result.push(fields[i]!, fields[i + 1]!);
  return result;
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const NOT_A_BYTE = /[^\0-\xff]/;

/** Why a request head from the edge cannot be written to a socket as bytes, or null. */
function fieldProblem(headers: readonly string[]): string | null {
  for (let i = 0; i < headers.length; i += 2) {
    if (!TOKEN.test(headers[i]!)) return `the request field name ${JSON.stringify(headers[i])} is not an HTTP token`;
    if (NOT_A_BYTE.test(headers[i + 1]!)) return `the request field ${headers[i]} is not bytes (a character above \\xFF)`;
  }
  return null;
}

function isWebSocket(headers: readonly string[]): boolean {
  for (let i = 0; i < headers.length; i += 2) if (isName(headers[i]!, 'upgrade') && headers[i + 1]!.toLowerCase() === 'websocket') return true;
  return false;
}
