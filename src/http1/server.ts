/**
 * The server side of HTTP/1.x on a raw socket (DESIGN.md section 1): a `ServerConnection` per accepted
 * socket feeds what it reads to an Http1Parser and keeps the requests it parsed in an in-order queue of
 * `ServerExchange`s. Each exchange is a request (head, body chunks, trailers) and the writer of its
 * response; only the exchange at the front of the queue writes to the socket, the others keep what they
 * are given until their turn, so pipelined requests are answered strictly in order and never
 * interleaved, while all of them are being worked on at once.
 *
 * Bounded: at most `maxPipelined` requests are queued per connection (the parser stops after the head
 * that fills the queue and the socket is not read until one leaves it); a request body is read only as
 * fast as its consumer takes it (`pauseBody`); an exchange that is not at the front buffers at most what
 * its producer sends before `write` returns false (the tunnel's credit bounds that).
 *
 * Framing is the writer's: `Content-Length` for a known length, `Transfer-Encoding: chunked` otherwise on
 * HTTP/1.1, the end of the connection on HTTP/1.0; `Connection: close` when the connection ends after
 * this answer, `Connection: keep-alive` for an HTTP/1.0 client that asked to keep it. Nothing else is
 * added: the fields given are written as they are (names as given, values as bytes).
 *
 * Timeouts run off one coarse timer per `ServerConnections` (STYLE.md: no timer per request): a new head
 * must arrive within `headTimeoutMs` of the connection going idle (slowloris), an idle keep-alive
 * connection closes after `idleTimeoutMs`, a request body that makes no progress while its consumer
 * reads it for `bodyTimeoutMs` ends the connection, and so does a reader that takes nothing for
 * `sendTimeoutMs`.
 */
import { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import { chunkSizeLine, fieldValue, httpDate, lastChunk, listHasToken, responseHead, standardReason } from './head.js';
import { KeyTable } from '../key-table.js';
import { SHARED_READ_BYTES, SharedReads } from './shared-reads.js';
import { ALL, DEFAULT_HEAD_LIMITS, Http1ParseError, Http1Parser, MessageHead, MessageKind, type HeadLimits, type MessageHandler } from './parser.js';

export interface ServerSettings extends HeadLimits {
  /** Requests queued on one connection (the one being answered included) before reading stops. */
  maxPipelined: number;
  /** A request head must be complete this long after the connection went idle. */
  headTimeoutMs: number;
  /** An idle keep-alive connection (no byte of a next request) is closed after this. */
  idleTimeoutMs: number;
  /** A request body that brings no byte for this long while its consumer reads ends the connection. */
  bodyTimeoutMs: number;
  /** A response the client reads nothing of for this long ends the connection. */
  sendTimeoutMs: number;
  /** After the last answer of a closing connection: read and drop at most this much, this long. */
  lingerMs: number;
  lingerBytes: number;
}

export const DEFAULT_SERVER_SETTINGS: Readonly<ServerSettings> = Object.freeze({
  ...DEFAULT_HEAD_LIMITS,
  maxPipelined: 16,
  headTimeoutMs: 10_000,
  idleTimeoutMs: 10_000,
  bodyTimeoutMs: 30_000,
  sendTimeoutMs: 60_000,
  lingerMs: 5_000,
  lingerBytes: 32 * 1024 * 1024,
});

/** What a consumer of a request implements (one object per exchange, no closures on the hot path). */
export interface ExchangeSink {
  /**
   * Request body bytes (null only with `last`); `last` ends the body. The chunk is the sink's to keep,
   * unless the sink `takesViews`.
   */
  onRequestBody(chunk: Buffer | null, last: boolean): void;
  /**
   * The sink copies whatever body bytes it keeps past `onRequestBody` (it frames them, say): chunks may
   * then be views of the listener's shared read buffer, valid only during the call, and no copy is made
   * for it. Other sinks get chunks of their own.
   */
  readonly takesViews?: boolean;
  /** Trailer fields after a chunked request body, before its `last` call. */
  onRequestTrailers?(fields: string[]): void;
  /** The connection ended before the response did (the client left, a timeout, a broken request). */
  onAborted(): void;
  /** A `write` that returned false may go on: the bytes it took have left. */
  onWritable?(): void;
  /** After `switchProtocols`: the connection's socket is the sink's now, `head` the bytes read past the request. */
  onSwitched?(socket: Socket, head: Buffer): void;
}

/** The answer a connection writes itself when a request cannot be parsed (then it closes). */
export interface Refusal {
  status: number;
  fields: string[];
  body: string;
}

/**
 * Reads what comes before HTTP on a connection (a PROXY protocol header): given every byte so far,
 * returns how many to drop before HTTP begins, PREFACE_MORE to wait for more, or PREFACE_REFUSED to
 * close the connection.
 */
export type Preface = (connection: ServerConnection, bytes: Buffer) => number;
export const PREFACE_MORE = -1;
export const PREFACE_REFUSED = -2;

export interface ConnectionHandler {
  /** A request head arrived: set `exchange.sink` now to take its body (bytes wait until then). */
  onRequest(exchange: ServerExchange): void;
  /** The answer to bytes that are not a request (400), or over a limit (431), or not HTTP/1.x (505). */
  refusal(error: Http1ParseError): Refusal;
  /** A bug in `onRequest` (it threw): the connection is closed, and this is told why. */
  onInternalError?(error: Error): void;
}

const enum Pause {
  /** The queue of pipelined requests is full. */
  QUEUE = 1,
  /** The consumer of the request body being read asked (no credit). */
  BODY = 2,
  /** Parsing stopped at an upgrade, or for good (a closing connection, a parse error). */
  STOPPED = 4,
}

const enum Framing {
  NONE,
  LENGTH,
  CHUNKED,
  /** HTTP/1.0 without a length: the body ends with the connection. */
  CLOSE,
}

const enum ResponseState {
  IDLE,
  HEAD_WRITTEN,
  ENDED,
  /** The connection is gone, or the exchange was cut. */
  DEAD,
}

const EMPTY = Buffer.alloc(0);
/** An answer's head and body up to this size leave as one joined buffer (`writeWhole`). */
export const WHOLE_ANSWER_LIMIT = 16 * 1024;
const CRLF = '\r\n';

export class ServerExchange {
  sink: ExchangeSink | null = null;
  /** The whole request body was read (or there was none). */
  requestEnded = false;
  private earlyBody: (Buffer | null)[] | null = null;
  private earlyTrailers: string[] | null = null;
  /** The consumer paused reading of this request's body. */
  bodyPaused = false;

  private state = ResponseState.IDLE;
  private framing = Framing.NONE;
  private declared = -1;
  private written = 0;
  /** The connection ends after this answer (set by the writer or the caller). */
  closeAfter = false;
  /** Output kept while an earlier exchange is being answered. */
  private pending: (string | Buffer)[] | null = null;
  private pendingBytes = 0;
  /** A write returned false: the sink is told when it may go on. */
  private wantsWritable = false;
  /** The answer is 101 and the socket goes to the sink once it is written. */
  private switching = false;
  private corked = false;

  constructor(
    readonly connection: ServerConnection,
    readonly head: MessageHead,
    /** The request switches protocols if answered 101 (an upgrade llhttp took, and not declined). */
    readonly upgrade: boolean,
    /** The head announces a body (Content-Length above 0, or Transfer-Encoding). */
    readonly hasBody: boolean,
  ) {}

  /** The request's method was HEAD: the answer has no body. */
  get isHead(): boolean {
    return this.head.method === 'HEAD';
  }

  get responseStarted(): boolean {
    return this.state !== ResponseState.IDLE;
  }

  get responseEnded(): boolean {
    return this.state >= ResponseState.ENDED;
  }

  /** The connection is gone: writes are dropped. */
  get dead(): boolean {
    return this.state === ResponseState.DEAD;
  }

  /** Gives the exchange its consumer; body bytes that came before go to it now. */
  attach(sink: ExchangeSink): void {
    this.sink = sink;
    const early = this.earlyBody;
    if (early === null && this.earlyTrailers === null) return;
    this.earlyBody = null;
    if (early !== null) {
      for (let i = 0; i < early.length - 1; i++) sink.onRequestBody(early[i]!, false);
    }
    if (this.earlyTrailers !== null) {
      sink.onRequestTrailers?.(this.earlyTrailers);
      this.earlyTrailers = null;
    }
    if (early !== null && early.length > 0) sink.onRequestBody(early[early.length - 1]!, this.requestEnded);
    else if (this.requestEnded) sink.onRequestBody(null, true);
  }

  // ---- the request (called by the connection) ------------------------------------------------------

  /** @internal */
  takeBody(chunk: Buffer | null, last: boolean): void {
    if (last) this.requestEnded = true;
    if (this.state >= ResponseState.ENDED) return;
    const sink = this.sink;
    if (sink !== null) {
      if (chunk !== null && sink.takesViews !== true) chunk = this.connection.keep(chunk);
      if (chunk !== null || last) sink.onRequestBody(chunk, last);
      return;
    }
    if (chunk === null && !last) return;
    (this.earlyBody ??= []).push(chunk === null ? EMPTY : this.connection.keep(chunk));
  }

  /** @internal */
  takeTrailers(fields: string[]): void {
    if (this.state >= ResponseState.ENDED) return;
    if (this.sink === null) this.earlyTrailers = fields;
    else this.sink.onRequestTrailers?.(fields);
  }

  /**
   * Reads and drops the rest of this request's body, then calls `then` (which answers): when the body
   * ended, or after `lingerBytes` or `lingerMs`, whichever comes first. A refusal written this way (413)
   * reaches a client that sends its whole body before it reads, instead of a connection closed under its
   * writes; the bounds keep a client from holding the connection with an endless body.
   */
  discardBody(then: () => void): void {
    const discard = new DiscardedBody(this, then, this.connection.settings);
    this.sink = discard;
    if (this.bodyPaused) this.resumeBody();
    if (this.requestEnded) discard.finish();
  }

  /**
   * Puts a body read whole back in front of the next `attach` (with its trailers), as if it had just
   * arrived: a consumer that had to read it first (a webhook signature checked before forwarding) hands
   * the request on unchanged. Only after the body was read to its end.
   */
  restoreBody(body: Buffer | null, trailers: string[] | null): void {
    if (!this.requestEnded) throw new Error('restoreBody: the request body was not read to its end');
    this.sink = null;
    this.earlyBody = body === null || body.byteLength === 0 ? null : [body];
    this.earlyTrailers = trailers;
  }

  /** Stop reading this request's body until `resumeBody` (no more bytes than one socket read arrive meanwhile). */
  pauseBody(): void {
    if (this.bodyPaused || this.requestEnded) return;
    this.bodyPaused = true;
    this.connection.pauseFor(Pause.BODY);
  }

  resumeBody(): void {
    if (!this.bodyPaused) return;
    this.bodyPaused = false;
    this.connection.resumeFrom(Pause.BODY);
  }

  // ---- the response ----------------------------------------------------------------------------------

  /** An interim answer (100, 102, 103): written in order, never to an HTTP/1.0 client (RFC 9110 15.2). */
  writeInterim(status: number, reason: string, fields: readonly string[]): void {
    if (this.state !== ResponseState.IDLE || this.head.versionMinor === 0) return;
    this.out(responseHead(status, reason, fields, ''));
  }

  /**
   * The final head. `contentLength` is the body's length, or -1 when unknown (then chunked, or until the
   * connection ends for HTTP/1.0); for HEAD, 204 and 304 it is only announced (no body follows; 204
   * announces none). 101 to an upgrade request: the fields go out as given and the socket is handed to
   * the sink (`onSwitched`) once written. `lengthInFields`: `fields` already hold one `Content-Length`
   * equal to `contentLength`, where the answer's author put it (a tunnel's answer keeps its field order);
   * else the writer adds the line after the fields.
   */
  writeHead(status: number, reason: string, fields: readonly string[], contentLength: number, lengthInFields = false): void {
    if (this.state !== ResponseState.IDLE) return;
    if (status === 101) {
      this.switching = true;
      this.out(responseHead(status, reason, fields, ''));
      this.state = ResponseState.ENDED;
      this.connection.answered(this);
      return;
    }
    this.out(this.finalHead(status, reason, fields, contentLength, lengthInFields));
  }

  /**
   * `writeHead` and `write` of the whole body (`chunks`, `length` bytes in all) of a content-length
   * answer, small enough (WHOLE_ANSWER_LIMIT) to leave as one buffer in one write: Node's stream takes that for
   * less CPU than a corked writev of the head and each chunk. Returns as `write`.
   */
  writeWhole(status: number, reason: string, fields: readonly string[], chunks: readonly Uint8Array[], length: number, lengthInFields = false): boolean {
    if (this.state !== ResponseState.IDLE) return this.state !== ResponseState.DEAD;
    if (status === 101 || length > WHOLE_ANSWER_LIMIT || length === 0 || this.isHead || status === 204 || status === 304) {
      const corked = this.corked;
      this.cork();
      this.writeHead(status, reason, fields, length, lengthInFields);
      let ok = true;
      for (const chunk of chunks) ok = this.write(chunk);
      if (!corked) this.uncork();
      return ok;
    }
    const head = this.finalHead(status, reason, fields, length, lengthInFields);
    const whole = Buffer.allocUnsafe(head.length + length);
    let at = whole.write(head, 0, 'latin1');
    for (const chunk of chunks) {
      whole.set(chunk, at);
      at += chunk.byteLength;
    }
    this.written = length;
    const ok = this.out(whole);
    if (!ok) this.wantsWritable = true;
    return ok;
  }

  /** The head of a final answer other than 101, its framing chosen (the state moves to HEAD_WRITTEN). */
  private finalHead(status: number, reason: string, fields: readonly string[], contentLength: number, lengthInFields: boolean): string {
    this.state = ResponseState.HEAD_WRITTEN;
    const request = this.head;
    let framingLines = '';
    if (this.isHead || status === 204 || status === 304) {
      this.framing = Framing.NONE;
      // A 204 announces no length at all (RFC 9110 section 8.6).
      if (status === 204 && lengthInFields) fields = withoutContentLength(fields);
      else if (contentLength >= 0 && status !== 204 && !lengthInFields) framingLines = `Content-Length: ${contentLength}${CRLF}`;
    } else if (contentLength >= 0) {
      this.framing = Framing.LENGTH;
      this.declared = contentLength;
      if (!lengthInFields) framingLines = `Content-Length: ${contentLength}${CRLF}`;
    } else if (request.versionMinor >= 1) {
      this.framing = Framing.CHUNKED;
      framingLines = `Transfer-Encoding: chunked${CRLF}`;
    } else {
      this.framing = Framing.CLOSE;
      this.closeAfter = true;
    }
    // Answered before the request's body was read: nothing tells where the next request would start
    // (the client may never send the body, as after a refused Expect: 100-continue), so this is the
    // connection's last answer; what is still sent is read and dropped within the linger bounds.
    if ((this.hasBody && !this.requestEnded) || this.upgrade || !request.keepAlive) this.closeAfter = true;
    if (this.closeAfter) framingLines += `Connection: close${CRLF}`;
    else if (request.versionMinor === 0) framingLines += `Connection: keep-alive${CRLF}`;
    return responseHead(status, reason, fields, framingLines);
  }

  /**
   * Body bytes (after writeHead). Always taken; returns false when they wait (the socket is full, or an
   * earlier answer is still going out): then `sink.onWritable` says when they have left.
   */
  write(chunk: Uint8Array): boolean {
    if (this.state !== ResponseState.HEAD_WRITTEN || chunk.byteLength === 0) return this.state !== ResponseState.DEAD;
    const framing = this.framing;
    if (framing === Framing.NONE) return true;
    this.written += chunk.byteLength;
    let ok: boolean;
    if (framing === Framing.CHUNKED) {
      this.out(chunkSizeLine(chunk.byteLength));
      this.out(chunk as Buffer);
      ok = this.out(CRLF);
    } else {
      ok = this.out(chunk as Buffer);
    }
    if (!ok) this.wantsWritable = true;
    return ok;
  }

  /**
   * The body is complete (trailers only after a chunked body, else dropped). A Content-Length body
   * that fell short cannot end cleanly: the connection is cut so the client sees the truncation.
   */
  end(trailers: readonly string[] | null = null): void {
    if (this.state !== ResponseState.HEAD_WRITTEN) return;
    const framing = this.framing;
    if (framing === Framing.LENGTH && this.written !== this.declared) {
      this.destroy();
      return;
    }
    if (framing === Framing.CHUNKED) this.out(lastChunk(trailers ?? []));
    if (framing === Framing.CLOSE) this.closeAfter = true;
    this.state = ResponseState.ENDED;
    this.connection.answered(this);
  }

  /** A whole answer at once (the edge's own errors, the API): head, body and end. */
  respond(status: number, reason: string, fields: readonly string[], body: string | Buffer | null): void {
    const bytes = body === null ? null : typeof body === 'string' ? Buffer.from(body) : body;
    this.writeHead(status, reason, fields, bytes === null ? 0 : bytes.byteLength);
    if (bytes !== null && bytes.byteLength > 0 && !this.isHead) this.write(bytes);
    this.end();
  }

  /** Cuts the connection (a broken response: never let it look whole). */
  destroy(): void {
    if (this.state === ResponseState.DEAD) return;
    this.state = ResponseState.DEAD;
    this.connection.destroy();
  }

  /** Corks the socket while this exchange may write (one syscall for a head and its body). */
  cork(): void {
    if (this.corked || this.connection.front !== this) return;
    this.corked = true;
    this.connection.socket.cork();
  }

  /** Uncorks what `cork` corked (even when the answer ended meanwhile and the next one is at the front). */
  uncork(): void {
    if (!this.corked) return;
    this.corked = false;
    this.connection.socket.uncork();
  }

  /** Bytes handed to `write` and waiting (at the front: in the socket's buffer; else kept here). */
  get buffered(): number {
    return this.connection.front === this ? this.connection.socket.writableLength : this.pendingBytes;
  }

  // ---- (the connection) ------------------------------------------------------------------------------

  private out(data: string | Buffer): boolean {
    if (this.state === ResponseState.DEAD) return false;
    const connection = this.connection;
    if (connection.front === this) return connection.write(data);
    (this.pending ??= []).push(data);
    this.pendingBytes += typeof data === 'string' ? data.length : data.byteLength;
    return false;
  }

  /** @internal It is this exchange's turn: what it kept goes out. Returns true once the socket took it all. */
  flushPending(): boolean {
    const pending = this.pending;
    let ok = true;
    if (pending !== null) {
      this.pending = null;
      this.pendingBytes = 0;
      const socket = this.connection.socket;
      socket.cork();
      for (const data of pending) ok = this.connection.write(data);
      socket.uncork();
    }
    if (ok && this.wantsWritable) this.writable();
    return ok;
  }

  /** @internal The bytes a false `write` took have left. */
  writable(): void {
    if (!this.wantsWritable || this.state === ResponseState.DEAD) return;
    this.wantsWritable = false;
    this.sink?.onWritable?.();
  }

  /** @internal The 101 went out: the socket is the sink's. */
  get switchesProtocols(): boolean {
    return this.switching;
  }

  /** @internal The connection ended before this answer did. */
  abort(): void {
    const was = this.state;
    this.state = ResponseState.DEAD;
    if (was < ResponseState.ENDED) this.sink?.onAborted();
  }
}

/** The sink of a body being read and dropped before its refusal (`ServerExchange.discardBody`). */
class DiscardedBody implements ExchangeSink {
  /** Bytes are only counted. */
  readonly takesViews = true;
  private read = 0;
  private done = false;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly exchange: ServerExchange,
    private readonly then: () => void,
    private readonly settings: ServerSettings,
  ) {
    this.timer = setTimeout(() => this.finish(), settings.lingerMs);
    this.timer.unref();
  }

  onRequestBody(chunk: Buffer | null, last: boolean): void {
    this.read += chunk?.byteLength ?? 0;
    if (last || this.read > this.settings.lingerBytes) this.finish();
  }

  onAborted(): void {
    this.done = true;
    clearTimeout(this.timer);
  }

  finish(): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.timer);
    if (!this.exchange.dead) this.then();
  }
}

/**
 * One accepted socket: the parser, the queue, the pauses, the timers. Created by `ServerConnections`,
 * which also runs the coarse timer over them all.
 */
export class ServerConnection implements MessageHandler {
  /** Its key in the listener's table (`ServerConnections`). */
  registryKey = -1;
  private readonly parser: Http1Parser;
  private readonly queue: ServerExchange[] = [];
  /** The exchange whose request is being parsed (head seen, message not complete). */
  private parsing: ServerExchange | null = null;
  private pauses = 0;
  /** Bytes read and not yet parsed (after a pause or an upgrade). */
  private stash: Buffer | null = null;
  /**
   * Bytes of the current request's Content-Length body still to come, read here from the socket's
   * reads instead of through llhttp (`Http1Parser.takeBodyOutside`): 0 when llhttp has the bytes.
   */
  private bodyLeft = 0;
  /** The Content-Length of the head just parsed, when its body is read outside llhttp. */
  private outsideLength = 0;
  private inParser = false;
  /** The parser is no longer needed (switched, destroyed); freed once llhttp returns. */
  private parserDone = false;
  /** No further request is read: the last one asked to close, or an upgrade or an error stopped the parser. */
  closing = false;
  /** The socket is ending: only the lingering read of leftovers remains. */
  private lingering = false;
  private lingered = 0;
  private lingerUntil = 0;
  private destroyed = false;
  private readEnded = false;
  /** The socket went to an upgraded protocol's owner. */
  private switched = false;

  // Timers (checked by ServerConnections' coarse tick).
  private idleSince: number;
  private headStarted = false;
  private lastReadAt = 0;
  /** When the socket's buffer went over its mark and has not drained since (0: it has). */
  private blockedSince = 0;

  /** The client's address (the TCP peer unless `proxied` says otherwise), as text. */
  readonly remoteAddress: string;
  /** A trusted PROXY protocol header's source address, or ''. */
  proxiedAddress = '';
  /** Free for the owner: whatever it keeps per connection (the TLS server name, say). */
  tag: unknown = null;

  /** Bytes of a preface read so far (while `preface` is set). */
  private prefaceBytes: Buffer | null = null;
  /** The connection's socket (for a plain TCP connection not the accepted object: `withSharedReads`). */
  readonly socket: Socket;
  /** Reads into the listener's shared buffer, for plain TCP and TLS connections alike ('data' events when `withSharedReads` cannot). */
  private readonly reads: SharedReads;

  constructor(
    accepted: Socket,
    private readonly handler: ConnectionHandler,
    readonly settings: ServerSettings,
    private readonly registry: ServerConnections,
    remoteAddress: string,
    /** What is read off the connection before HTTP (a PROXY header), or null. */
    private preface: Preface | null = null,
    /** Where reads of a plain TCP socket land (null: each read in a buffer of its own, 'data' events). */
    readBuffer: Buffer | null = null,
  ) {
    this.remoteAddress = remoteAddress;
    this.parser = new Http1Parser(MessageKind.REQUEST, this, settings);
    this.idleSince = Date.now();
    this.reads = new SharedReads(this.onData);
    const shared = readBuffer === null ? null : withSharedReads(accepted, readBuffer, this.reads.callback);
    this.reads.socket = shared;
    const socket = shared ?? accepted;
    this.socket = socket;
    if (shared === null) socket.on('data', this.onData);
    socket.setNoDelay(true);
    socket.on('end', this.onEnd);
    socket.on('close', this.onClose);
    socket.on('error', this.onError);
    socket.on('drain', this.onDrain);
  }

  /** The exchange whose answer is being written. */
  get front(): ServerExchange | undefined {
    return this.queue[0];
  }

  get requests(): number {
    return this.queue.length;
  }

  // ---- reading --------------------------------------------------------------------------------------

  private readonly onData = (data: Buffer): void => {
    let chunk = data;
    if (this.lingering) {
      this.lingered += chunk.byteLength;
      if (this.lingered > this.settings.lingerBytes) this.destroy();
      return;
    }
    if (this.destroyed || this.switched) return;
    if (this.preface !== null) {
      const bytes = this.prefaceBytes === null ? chunk : Buffer.concat([this.prefaceBytes, chunk]);
      const taken = this.preface(this, bytes);
      if (taken === PREFACE_MORE) {
        this.prefaceBytes = this.reads.owned(bytes);
        return;
      }
      this.preface = null;
      this.prefaceBytes = null;
      if (taken === PREFACE_REFUSED) {
        this.destroy();
        return;
      }
      if (taken >= bytes.byteLength) return;
      chunk = bytes.subarray(taken);
    }
    const now = Date.now();
    this.lastReadAt = now;
    if (this.queue.length === 0 && this.parsing === null) this.headStarted = true;
    if (this.pauses !== 0 || this.stash !== null) {
      // Read before the pause took hold (or while the stash waits): kept in order.
      this.stash = this.stash === null ? this.reads.owned(chunk) : Buffer.concat([this.stash, chunk]);
      return;
    }
    this.feed(chunk);
  };

  private feed(chunk: Buffer): void {
    let at = 0;
    for (;;) {
      if (this.bodyLeft > 0) {
        at = this.readBody(chunk, at);
        if (this.bodyLeft > 0 || at === chunk.byteLength) return;
        if (this.destroyed || this.switched || this.lingering) return;
        if (this.pauses !== 0) {
          // The body ended with a pause in place that is not the body's: the rest waits, in order.
          this.stash = this.reads.owned(chunk.subarray(at));
          return;
        }
      }
      this.inParser = true;
      const result = this.parser.execute(at === 0 ? chunk : chunk.subarray(at));
      this.inParser = false;
      if (this.parserDone) {
        // Closed from inside one of its callbacks: freed now that llhttp has returned.
        this.parser.close();
        return;
      }
      if (result === ALL) return;
      if (result instanceof Http1ParseError) {
        this.parseFailed(result);
        return;
      }
      if (this.parser.bodyOutside) {
        at += result;
        this.bodyLeft = this.outsideLength;
        continue;
      }
      this.parked(chunk, at + result);
      return;
    }
  }

  /**
   * Hands the current request the body bytes of `chunk` from `at` on (at most what its Content-Length
   * still wants), as one view: the sink frames it or gets its own copy (`ServerExchange.takeBody`).
   * Returns where the body's bytes in the chunk end. Marked as inside the parser meanwhile: a sink
   * that resumes reading from its callback must not feed the stash under this call.
   */
  private readBody(chunk: Buffer, at: number): number {
    const size = Math.min(chunk.byteLength - at, this.bodyLeft);
    if (size === 0) return at;
    this.bodyLeft -= size;
    const piece = at === 0 && size === chunk.byteLength ? chunk : chunk.subarray(at, at + size);
    this.inParser = true;
    if (this.bodyLeft > 0) this.onBody(piece);
    else this.complete(piece);
    this.inParser = false;
    if (this.parserDone) this.parser.close();
    return at + size;
  }

  /** `execute` stopped at `end` of `chunk` (a pause at a head, or an upgrade). */
  private parked(chunk: Buffer, end: number): void {
    const rest = this.reads.owned(chunk.subarray(end));
    if (this.parser.isPaused) {
      this.stash = rest.byteLength > 0 ? rest : null;
      this.pauseFor(0);
      if (this.pauses === 0) this.resumeSoon();
      return;
    }
    // An upgrade: what follows belongs to the new protocol (or, if it is refused, to nobody).
    this.stash = rest.byteLength > 0 ? rest : null;
    this.closing = true;
    this.pauseFor(Pause.STOPPED);
  }

  /** Feeds what the stash holds, unless paused again. Never from inside the parser's callbacks. */
  private resumeSoon(): void {
    if (this.inParser) {
      queueMicrotask(() => this.resumeSoon());
      return;
    }
    if (this.destroyed || this.switched || this.lingering) return;
    if (this.pauses !== 0) return;
    const parserPaused = this.parser.isPaused;
    this.parser.resume();
    const stash = this.stash;
    this.stash = null;
    this.socket.resume();
    // A parser stopped at a head needs a call to go on, even with no bytes (a GET's end comes then).
    if (stash !== null || parserPaused) this.feed(stash ?? EMPTY);
    if (this.readEnded && this.pauses === 0 && this.stash === null) this.finishRead();
  }

  pauseFor(reason: number): void {
    this.pauses |= reason;
    if (!this.socket.isPaused()) this.socket.pause();
  }

  resumeFrom(reason: number): void {
    if ((this.pauses & reason) === 0) return;
    this.pauses &= ~reason;
    if (this.pauses === 0) this.resumeSoon();
  }

  private readonly onEnd = (): void => {
    this.readEnded = true;
    if (this.lingering) return;
    if (this.pauses === 0 && this.stash === null) this.finishRead();
  };

  /**
   * The client sent its FIN. With requests still unanswered it went away (a FIN is how clients give up
   * on a request; nginx and Node's http server read it so too): they are aborted and the connection cut.
   * An idle connection ends cleanly.
   */
  private finishRead(): void {
    if (this.destroyed || this.switched) return;
    const failure = this.parser.finish();
    if (this.parsing !== null || failure !== null || this.queue.length > 0) {
      this.destroy();
      return;
    }
    this.closing = true;
    this.endSocket();
  }

  // ---- the parser's callbacks -------------------------------------------------------------------------

  onHead(head: MessageHead): boolean {
    if (this.closing) {
      // A request after one that asked to close: never read.
      this.parser.pauseAfterHead();
      this.pauses |= Pause.STOPPED;
      return false;
    }
    let upgrade = head.upgrade;
    const length = bodyLength(head.fields);
    const body = length !== 0;
    if (upgrade && head.method !== 'CONNECT' && body) {
      // Switching protocols after a body is not supported: an ordinary request, Upgrade left to the
      // consumer to drop (it is hop-by-hop), and HTTP goes on after it.
      this.parser.declineUpgrade();
      upgrade = false;
    }
    const exchange = new ServerExchange(this, head, upgrade, body);
    this.queue.push(exchange);
    this.parsing = exchange;
    this.headStarted = false;
    this.lastReadAt = Date.now();
    if (!head.keepAlive) this.closing = true;
    else if (length > 0 && !head.upgrade) {
      this.outsideLength = length;
      this.parser.takeBodyOutside();
    }
    if (this.queue.length >= this.settings.maxPipelined) {
      this.parser.pauseAfterHead();
      this.pauses |= Pause.QUEUE;
    }
    try {
      this.handler.onRequest(exchange);
    } catch (error) {
      // Never out through llhttp's native frame: this connection ends, the server goes on.
      this.handler.onInternalError?.(error as Error);
      queueMicrotask(() => this.destroy());
    }
    return false;
  }

  onBody(chunk: Buffer): void {
    this.parsing?.takeBody(chunk, false);
  }

  onTrailers(fields: string[]): void {
    this.parsing?.takeTrailers(fields);
  }

  onComplete(): void {
    this.complete(null);
  }

  /** The request's body ended, `lastChunk` its last bytes (read outside llhttp) or null. */
  private complete(lastChunk: Buffer | null): void {
    const exchange = this.parsing;
    if (exchange === null) return;
    this.parsing = null;
    if (exchange.bodyPaused) {
      // The body ended while its consumer had paused reading: the pause was the body's, the next
      // request (or the end of the connection) is read again.
      exchange.bodyPaused = false;
      this.resumeFrom(Pause.BODY);
    }
    exchange.takeBody(lastChunk, true);
  }

  private parseFailed(error: Http1ParseError): void {
    this.closing = true;
    this.pauses |= Pause.STOPPED;
    if (!this.socket.isPaused()) this.socket.pause();
    this.stash = null;
    const refusal = this.handler.refusal(error);
    let exchange = this.parsing;
    this.parsing = null;
    if (exchange !== null && exchange.responseStarted) {
      // The answer to the broken request has begun: it cannot be finished cleanly.
      this.destroy();
      return;
    }
    if (exchange !== null) {
      // The request's consumer learns it will get nothing more; the refusal is its answer.
      const sink = exchange.sink;
      exchange.sink = null;
      sink?.onAborted();
    } else {
      exchange = new ServerExchange(this, new MessageHead(), false, false);
      this.queue.push(exchange);
    }
    exchange.requestEnded = true;
    exchange.closeAfter = true;
    exchange.respond(refusal.status, standardReason(refusal.status), [...refusal.fields, 'Date', httpDate()], refusal.body);
  }

  // ---- writing --------------------------------------------------------------------------------------

  /** @internal `bytes` to keep past the current read: a copy when they are in the shared read buffer. */
  keep(bytes: Buffer): Buffer {
    return this.reads.owned(bytes);
  }

  /** @internal */
  write(data: string | Buffer): boolean {
    if (this.destroyed) return false;
    return typeof data === 'string' ? this.socket.write(data, 'latin1') : this.socket.write(data);
  }

  private readonly onDrain = (): void => {
    this.blockedSince = 0;
    this.queue[0]?.writable();
  };

  /** @internal An exchange's answer is complete (or it switched protocols). */
  answered(exchange: ServerExchange): void {
    if (this.queue[0] !== exchange) return;
    this.advance();
  }

  /** The front exchange is done: the next ones get their turn, as far as they are done too. */
  private advance(): void {
    for (;;) {
      const done = this.queue[0];
      if (done === undefined || !done.responseEnded) return;
      this.queue.shift();
      if (done.switchesProtocols) {
        this.switchTo(done);
        return;
      }
      if (done.closeAfter) {
        this.closing = true;
        this.abortQueued();
        // Leftovers (a body the request was answered before, requests behind it) are read and dropped.
        this.parsing = null;
        this.stash = null;
        this.endSocket();
        return;
      }
      if ((this.pauses & Pause.QUEUE) !== 0 && this.queue.length < this.settings.maxPipelined) this.resumeFrom(Pause.QUEUE);
      const next = this.queue[0];
      if (next === undefined) {
        this.idleSince = Date.now();
        if (this.closing && this.parsing === null) this.endSocket();
        return;
      }
      next.flushPending();
    }
  }

  /** Requests queued behind a closing answer are never answered. */
  private abortQueued(): void {
    const queued = this.queue.splice(0);
    for (const exchange of queued) exchange.abort();
  }

  private switchTo(exchange: ServerExchange): void {
    if (this.inParser) {
      // Answered inside the parser's callback: the bytes past the request are known once it returns.
      queueMicrotask(() => this.switchTo(exchange));
      return;
    }
    if (this.destroyed) return;
    this.switched = true;
    this.reads.handedOver = true;
    this.registry.forget(this);
    const socket = this.socket;
    socket.off('data', this.onData);
    socket.off('end', this.onEnd);
    socket.off('close', this.onClose);
    socket.off('error', this.onError);
    socket.off('drain', this.onDrain);
    this.closeParser();
    const head = this.stash ?? EMPTY;
    this.stash = null;
    const sink = exchange.sink;
    if (sink?.onSwitched === undefined) {
      socket.destroy();
      return;
    }
    sink.onSwitched(socket, head);
  }

  /** Our side is done: FIN after the queued bytes, then read and drop leftovers within the bounds. */
  private endSocket(): void {
    if (this.lingering || this.destroyed) return;
    this.lingering = true;
    this.lingerUntil = Date.now() + this.settings.lingerMs;
    this.pauses = 0;
    // After both FINs the socket closes by itself once our bytes are out.
    this.socket.end();
    if (!this.readEnded) this.socket.resume();
  }

  // ---- ending --------------------------------------------------------------------------------------

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.socket.destroy();
    this.cleanUp();
  }

  private readonly onClose = (): void => {
    if (this.destroyed) return;
    this.destroyed = true;
    this.cleanUp();
  };

  private readonly onError = (): void => {
    // 'close' follows.
  };

  /** Frees llhttp's parser, never from inside its own callbacks (that would free it under llhttp). */
  private closeParser(): void {
    this.parserDone = true;
    if (!this.inParser) this.parser.close();
  }

  private cleanUp(): void {
    this.registry.forget(this);
    this.closeParser();
    const queued = this.queue.splice(0);
    const parsing = this.parsing;
    this.parsing = null;
    for (const exchange of queued) exchange.abort();
    if (parsing !== null && !queued.includes(parsing)) parsing.abort();
  }

  /** The coarse timer's check (see the file's comment for the bounds). */
  checkTimeouts(now: number): void {
    if (this.destroyed || this.switched) return;
    const settings = this.settings;
    if (this.lingering) {
      if (now >= this.lingerUntil) this.destroy();
      return;
    }
    if (this.queue.length === 0 && this.parsing === null) {
      if (now - this.idleSince > (this.headStarted ? settings.headTimeoutMs : settings.idleTimeoutMs)) this.destroy();
      return;
    }
    const parsing = this.parsing;
    if (parsing !== null && !parsing.requestEnded && (this.pauses & Pause.BODY) === 0 && now - this.lastReadAt > settings.bodyTimeoutMs) {
      this.destroy();
      return;
    }
    if (this.socket.writableNeedDrain) {
      if (this.blockedSince === 0) this.blockedSince = now;
      else if (now - this.blockedSince > settings.sendTimeoutMs) this.destroy();
    }
  }
}

/** A listener's connections: accepts sockets, runs the coarse timer, closes them all on shutdown. */
export class ServerConnections {
  /** A KeyTable, not a Set: a connection per request is common (webhook senders), see src/key-table.ts. */
  private readonly connections = new KeyTable<number, ServerConnection>();
  private nextKey = 0;
  private timer: NodeJS.Timeout | null = null;
  readonly settings: ServerSettings;
  private readonly readBuffer = Buffer.allocUnsafe(SHARED_READ_BYTES);

  constructor(
    private readonly handler: ConnectionHandler,
    settings: Partial<ServerSettings> = {},
    private readonly tickMs = 1_000,
  ) {
    this.settings = { ...DEFAULT_SERVER_SETTINGS, ...settings };
  }

  get size(): number {
    return this.connections.size;
  }

  /** The connection's own socket may differ from `socket` (`ServerConnection.socket`). */
  accept(socket: Socket, remoteAddress: string, preface: Preface | null = null): ServerConnection {
    const connection = new ServerConnection(socket, this.handler, this.settings, this, remoteAddress, preface, this.readBuffer);
    let key = this.nextKey;
    // After 2^32 connections the keys wrap: one still open (a WebSocket, say) keeps its key.
    while (this.connections.has(key)) key = (key + 1) >>> 0;
    this.nextKey = (key + 1) >>> 0;
    connection.registryKey = key;
    this.connections.set(key, connection);
    if (this.timer === null) {
      this.timer = setInterval(() => this.tick(), this.tickMs);
      this.timer.unref();
    }
    return connection;
  }

  /** @internal */
  forget(connection: ServerConnection): void {
    this.connections.deleteIf(connection.registryKey, connection);
  }

  private tick(): void {
    const now = Date.now();
    for (const connection of this.connections.values()) connection.checkTimeouts(now);
    if (this.connections.size === 0 && this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  /** Cuts every connection (the end of a shutdown). */
  destroyAll(): void {
    for (const connection of this.connections.values()) connection.destroy();
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }
}

/**
 * A connection's socket reading into `buffer` (shared by every connection: each read is handled before
 * the next lands) and handing each read to `onRead`, instead of a fresh allocation per read pushed
 * through the socket's readable stream (bench/RESULTS.md, "Issue 24: the edge's CPU floor"). Returns
 * null when that cannot be done (a socket already read from keeps its way).
 *
 * A plain TCP connection: Node's server offers no `onread` for accepted sockets, so the handle moves (its
 * `_handle` field) to a socket made with `onread`; the accepted object, left without it, is destroyed
 * (its server's connection count goes with it).
 *
 * A TLS connection (`withSharedTlsReads`) keeps its socket: its TLS handle writes each decrypted read
 * into the buffer `useUserBuffer` gives it, and the socket hands it to `onRead` as an `onread` socket does.
 */
function withSharedReads(accepted: Socket, buffer: Buffer, onRead: (bytes: number, buffer: Buffer) => boolean): Socket | null {
  if (accepted instanceof TLSSocket) return withSharedTlsReads(accepted, buffer, onRead);
  const holder = accepted as unknown as { _handle: { reading: boolean; readStop(): number } | null };
  const handle = holder._handle;
  if (handle === null || accepted.readableLength > 0 || accepted.destroyed) return null;
  handle.reading = false;
  handle.readStop();
  holder._handle = null;
  const socket = new Socket({
    handle,
    allowHalfOpen: accepted.allowHalfOpen,
    readable: true,
    writable: true,
    writableHighWaterMark: accepted.writableHighWaterMark,
    onread: { buffer, callback: onRead },
  } as ConstructorParameters<typeof Socket>[0]);
  accepted.destroy();
  return socket;
}

/**
 * The fields by which Node's stream code hands a socket's reads to an `onread` callback (`kBuffer`,
 * `kBufferCb`, `kBufferGen`, internal symbols), found on a socket made with `onread`; null when this Node
 * has them under other names, and TLS connections then read through 'data' events as before. Node's
 * `TLSSocket` takes no `onread` when it wraps an accepted socket, so the edge sets them itself.
 * Measured: bench/RESULTS.md, issue 25's tuning log of 2026-11-29 07:06.
 */
const ONREAD_FIELDS = ((): { buffer: symbol; callback: symbol; next: symbol } | null => {
  const probe = new Socket({ onread: { buffer: Buffer.alloc(1), callback: () => true } } as ConstructorParameters<typeof Socket>[0]);
  const named = new Map(Object.getOwnPropertySymbols(probe).map((field) => [field.description, field]));
  const buffer = named.get('kBuffer');
  const callback = named.get('kBufferCb');
  const next = named.get('kBufferGen');
  return buffer === undefined || callback === undefined || next === undefined ? null : { buffer, callback, next };
})();

/** Whether TLS connections read into the listener's shared buffer (Node has the fields `ONREAD_FIELDS` looks for). */
export const TLS_SHARED_READS = ONREAD_FIELDS !== null;

function withSharedTlsReads(accepted: TLSSocket, buffer: Buffer, onRead: (bytes: number, buffer: Buffer) => boolean): Socket | null {
  const handle = (accepted as unknown as { _handle: { useUserBuffer?(buffer: Buffer): void } | null })._handle;
  if (ONREAD_FIELDS === null || handle === null || typeof handle.useUserBuffer !== 'function' || accepted.readableLength > 0 || accepted.destroyed) return null;
  const fields = accepted as unknown as Record<symbol, unknown>;
  fields[ONREAD_FIELDS.buffer] = buffer;
  fields[ONREAD_FIELDS.callback] = onRead;
  fields[ONREAD_FIELDS.next] = null;
  handle.useUserBuffer(buffer);
  return accepted;
}

function withoutContentLength(fields: readonly string[]): string[] {
  const kept: string[] = [];
  for (let i = 0; i < fields.length; i += 2) if (fields[i]!.toLowerCase() !== 'content-length') kept.push(fields[i]!, fields[i + 1]!);
  return kept;
}

/**
 * The body a request head announces: its Content-Length, -1 for Transfer-Encoding (or a length past
 * what a double counts exactly: llhttp then reads it), 0 for none. llhttp has refused any head with
 * both, or with a duplicate or malformed Content-Length, before it is given here.
 */
function bodyLength(fields: readonly string[]): number {
  let length = 0;
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    if (name.length === 17 && name.toLowerCase() === 'transfer-encoding') return -1;
    if (name.length === 14 && name.toLowerCase() === 'content-length') {
      length = Number(fields[i + 1]);
      if (!Number.isSafeInteger(length)) return -1;
    }
  }
  return length;
}

export { fieldValue, listHasToken };
