/**
 * HTTP/1.x messages parsed by llhttp, the parser inside Node's own `http` (DESIGN.md section 1): bytes in,
 * heads as (name, value) pairs, body chunks, trailers and message ends out. Shared by the edge's public
 * listener (requests) and the client's local hop (responses); it knows nothing of tunnels or sockets.
 *
 * Why Node's binding and not undici's WebAssembly build of the same llhttp: both measured alike for a
 * whole server (16.5 vs 15.4 µs of CPU per 1 KiB POST, issue 24), and the binding hands over field names
 * and values as one-byte strings without a copy into WebAssembly memory first. It is reached through
 * `node:_http_common`, which Node's own http modules use; `test/http1/parser.test.ts` pins the behaviour
 * Burrow relies on (strict framing, one-byte strings, pausing at the end of a head, the error codes), and
 * `test/http1/issue-24-body-one-copy.test.ts` the stop at a head whose body the caller reads
 * (`takeBodyOutside`), so a Node upgrade that changes any of it fails the tests instead of the traffic.
 *
 * Field names keep their case and values their bytes: each character of a name or value is one byte
 * (U+0000 to U+00FF, "latin1"), so `café` sent as UTF-8 arrives as the four characters `cafÃ©` and goes
 * out again as the same five bytes. llhttp strips the optional white space around a value.
 *
 * Strict: no lenient flags. Bad chunk sizes, missing CRLF after chunk data, data longer than its size,
 * Content-Length with Transfer-Encoding, duplicate or malformed Content-Length, bare LF, obsolete line
 * folding are errors (`Http1ParseError`), after which the connection must be closed: nothing after a
 * framing error can be trusted to be where the parser thinks it is.
 */
import { createRequire } from 'node:module';

interface NativeParser {
  initialize(type: number, resource: object, maxHeaderSize: number, lenientFlags: number): void;
  execute(data: Buffer): number | NativeParseError;
  finish(): undefined | NativeParseError;
  resume(): void;
  close(): void;
  free(): void;
  [slot: number]: unknown;
}
interface NativeParseError extends Error {
  code: string;
  reason: string;
  bytesParsed: number;
}
interface NativeParserClass {
  new (): NativeParser;
  REQUEST: number;
  RESPONSE: number;
  kOnHeaders: number;
  kOnHeadersComplete: number;
  kOnBody: number;
  kOnMessageComplete: number;
}

const require = createRequire(import.meta.url);
const { HTTPParser } = require('_http_common') as { HTTPParser: NativeParserClass };

/**
 * llhttp's `llhttp_method_t`, in enum order: the head callback gives the method as an index into it.
 * (Node keeps the same table as `allMethods` in a binding that is deprecated to reach; llhttp only ever
 * appends to the enum, and test/http1/parser.test.ts checks this copy against Node's.) The RTSP methods
 * are in the enum but llhttp refuses them in an HTTP request line.
 */
export const HTTP_METHODS: readonly string[] = Object.freeze([
  'DELETE', 'GET', 'HEAD', 'POST', 'PUT', 'CONNECT', 'OPTIONS', 'TRACE', 'COPY', 'LOCK', 'MKCOL', 'MOVE',
  'PROPFIND', 'PROPPATCH', 'SEARCH', 'UNLOCK', 'BIND', 'REBIND', 'UNBIND', 'ACL', 'REPORT', 'MKACTIVITY',
  'CHECKOUT', 'MERGE', 'M-SEARCH', 'NOTIFY', 'SUBSCRIBE', 'UNSUBSCRIBE', 'PATCH', 'PURGE', 'MKCALENDAR',
  'LINK', 'UNLINK', 'SOURCE', 'PRI', 'DESCRIBE', 'ANNOUNCE', 'SETUP', 'PLAY', 'PAUSE', 'TEARDOWN',
  'GET_PARAMETER', 'SET_PARAMETER', 'REDIRECT', 'RECORD', 'FLUSH', 'QUERY',
]);

/**
 * llhttp's on_headers_complete answers: go on, the message has no body, the message has no body and
 * the connection changes protocol after it (llhttp stops right after the head, and Node's binding
 * returns that offset as a number and lets parsing go on with the next message: `takeBodyOutside`),
 * stop here (HPE_PAUSED).
 */
const GO_ON = 0;
const NO_BODY = 1;
const ENDS_AT_HEAD = 2;
const STOP = 21;

export const MessageKind = { REQUEST: 0, RESPONSE: 1 } as const;
export type MessageKindValue = (typeof MessageKind)[keyof typeof MessageKind];

/** What a parsed head may hold at most; past it the message is refused (431 for a request). */
export interface HeadLimits {
  /** Bytes of the request line or status line plus every field line (llhttp counts them as it reads). */
  maxHeadBytes: number;
  /** Field lines in a head, and likewise in trailers. */
  maxFieldLines: number;
}

export const DEFAULT_HEAD_LIMITS: Readonly<HeadLimits> = Object.freeze({ maxHeadBytes: 32 * 1024, maxFieldLines: 100 });

/** A request line or status line with its fields, as received. One shape for both kinds. */
export class MessageHead {
  /** The request method token, or '' in a response. */
  method = '';
  /** The request target as received (origin-form, absolute-form, `*`, or authority-form), or ''. */
  target = '';
  /** The status code, or 0 in a request. */
  status = 0;
  /** The reason phrase as received (may be empty), or '' in a request. */
  reason = '';
  versionMajor = 1;
  versionMinor = 1;
  /** Flat `[name0, value0, name1, value1, ...]`: names as sent, one byte per character. */
  fields: string[] = [];
  /** llhttp's verdict on the connection after this message (HTTP version and `Connection`). */
  keepAlive = false;
  /**
   * The connection changes protocol after this head: a request with `Connection: upgrade` and
   * `Upgrade` (or CONNECT), or a 101 response. Bytes after the head belong to the new protocol.
   */
  upgrade = false;
}

/** Why a message could not be parsed: llhttp's code, its reason, and the HTTP status to refuse with. */
export class Http1ParseError extends Error {
  constructor(
    /** llhttp's error name (`HPE_INVALID_CHUNK_SIZE`) or Burrow's (`TOO_MANY_FIELDS`). */
    readonly code: string,
    readonly reason: string,
    /** 400, or 431 for a head over the limits, or 505 for an HTTP version other than 1.x. */
    readonly status: number,
  ) {
    super(`${code}: ${reason}`);
    this.name = 'Http1ParseError';
  }
}

export interface MessageHandler {
  /**
   * A head arrived. Return true when the message has no body whatever its fields say (the response to
   * a HEAD request). A 1xx response other than 101 is a whole message: its onComplete follows at once.
   */
  onHead(head: MessageHead): boolean;
  /** Body bytes, after chunked framing is removed. The chunk is the handler's to keep. */
  onBody(chunk: Buffer): void;
  /** Trailer fields after a chunked body, flat like `MessageHead.fields`; only when there are some. */
  onTrailers(fields: string[]): void;
  /** The message ended; the next bytes (if any) start the next message, or the upgraded protocol. */
  onComplete(): void;
}

/** `execute` consumed every byte it was given. */
export const ALL = -1;

/**
 * One parser per connection. `execute` takes each chunk read from the socket; messages follow one
 * another (pipelining, keep-alive) until an upgrade or an error. Not re-entrant: a handler must not
 * call `execute` from inside a callback.
 */
export class Http1Parser {
  private readonly native: NativeParser;
  /** Fields llhttp flushed early (more than 32 in a head, or trailers): joined at the head's end. */
  private flushed: string[] | null = null;
  private flushedTarget = '';
  private headComplete = false;
  /** Set inside a callback, reported when `execute` returns (llhttp was told to stop). */
  private failure: Http1ParseError | null = null;
  /** The head asked to change protocol; it takes effect when that message (and any body) ends. */
  private upgradeAsked = false;
  private upgraded = false;
  /** The handler declined the head's upgrade: the message is an ordinary one, HTTP goes on after it. */
  private upgradeDeclined = false;
  /** The handler asked to stop right after the head it was given (`pauseAfterHead`). */
  private pauseAsked = false;
  /** The handler asked to read the head's body itself (`takeBodyOutside`). */
  private outsideAsked = false;
  /** The message being parsed ends at its head for llhttp: its body is the caller's to read. */
  private bodyOutsideHere = false;
  /** The last `execute` stopped at a head whose body the caller reads (`bodyOutside`). */
  private stoppedForBody = false;
  /**
   * llhttp ended a message as an upgrade (a body read outside, a declined upgrade): its `upgrade` flag
   * stays set until a message begins, and while it is set Node's binding reports an error as a short
   * count instead. The next `execute` starts on a fresh llhttp (between messages nothing carries over),
   * so bytes that are not HTTP after such a message are the error they are, not swallowed.
   */
  private freshBeforeNext = false;
  private paused = false;
  private closed = false;
  /** Inside llhttp (execute or finish): `close` then frees the native parser only once it returns. */
  private running = false;

  constructor(
    private readonly kind: MessageKindValue,
    private readonly handler: MessageHandler,
    private readonly limits: HeadLimits = DEFAULT_HEAD_LIMITS,
  ) {
    this.native = new HTTPParser();
    this.native[HTTPParser.kOnHeaders] = this.onFlushedFields;
    this.native[HTTPParser.kOnHeadersComplete] = this.onHeadersComplete;
    this.native[HTTPParser.kOnBody] = this.onBody;
    this.native[HTTPParser.kOnMessageComplete] = this.onMessageComplete;
    this.reset();
  }

  /** True once a message that asked to upgrade has ended: later bytes are the new protocol's, not HTTP. */
  get isUpgraded(): boolean {
    return this.upgraded;
  }

  /** True after `execute` stopped at a head because the handler asked (`pauseAfterHead`), until `resume`. */
  get isPaused(): boolean {
    return this.paused;
  }

  /**
   * Called from `onHead`: `execute` stops right after this head and returns the offset of the next
   * byte; nothing more is parsed until `resume` and another `execute` with the rest. (A server whose
   * queue of pipelined requests is full stops reading here.)
   */
  pauseAfterHead(): void {
    this.pauseAsked = true;
  }

  /**
   * True after `execute` stopped at the end of a head because the handler took its body
   * (`takeBodyOutside`): the returned offset is where the body begins. The caller reads the body's
   * bytes itself and gives the next `execute` only what follows them; llhttp has ended the message.
   */
  get bodyOutside(): boolean {
    return this.stoppedForBody;
  }

  /**
   * Called from `onHead` of a keep-alive request with a valid Content-Length body and no upgrade:
   * `execute` stops right after this head and returns the offset of the body's first byte, no onBody
   * and no onComplete follow, and the next `execute` starts the next message. Why: Node's binding
   * copies every body piece into a fresh Buffer before JavaScript sees it; a caller reading the body
   * straight from its own read buffer copies once, into the frame it sends (bench/RESULTS.md, "Issue
   * 24: the edge's CPU floor"). llhttp has checked the framing (one valid Content-Length, no
   * Transfer-Encoding) by the time the head arrives; counting the length down is the caller's.
   * Ignored when `pauseAfterHead` is asked for the same head (the body then goes through llhttp).
   */
  takeBodyOutside(): void {
    this.outsideAsked = true;
  }

  /** Parsing may go on after a pause: give `execute` the bytes after the returned offset. */
  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.native.resume();
  }

  /**
   * Called from `onHead` of a message that asked to upgrade: it is taken as an ordinary message
   * instead, and HTTP goes on after it (a server that will not switch protocols for this request).
   */
  declineUpgrade(): void {
    this.upgradeAsked = false;
    this.upgradeDeclined = true;
  }

  /** Ready for a fresh connection's first message, or to go on after a refused upgrade. */
  reset(): void {
    this.initializeNative();
    this.freshBeforeNext = false;
    this.flushed = null;
    this.flushedTarget = '';
    this.headComplete = false;
    this.failure = null;
    this.upgradeAsked = false;
    this.upgraded = false;
    this.upgradeDeclined = false;
    this.pauseAsked = false;
    this.paused = false;
    this.outsideAsked = false;
    this.bodyOutsideHere = false;
    this.stoppedForBody = false;
  }

  private initializeNative(): void {
    this.native.initialize(this.kind === MessageKind.REQUEST ? HTTPParser.REQUEST : HTTPParser.RESPONSE, {}, this.limits.maxHeadBytes, 0);
  }

  /**
   * Parses `chunk`. Returns ALL when every byte was taken, or an offset: where an upgraded protocol's
   * bytes begin (`isUpgraded`; the rest of the chunk is not HTTP), or where parsing stopped after a
   * head the handler paused at (`isPaused`). Throws nothing: a malformed message returns an
   * Http1ParseError, after which the parser is unusable until `reset` (close the connection instead).
   */
  execute(chunk: Buffer): number | Http1ParseError {
    if (this.closed) return new Http1ParseError('CLOSED', 'the parser was closed', 400);
    if (this.upgraded || this.paused) return 0;
    if (this.freshBeforeNext) {
      this.freshBeforeNext = false;
      this.initializeNative();
    }
    this.stoppedForBody = false;
    let offset = 0;
    for (;;) {
      const input = offset === 0 ? chunk : chunk.subarray(offset);
      this.running = true;
      const result = this.native.execute(input);
      this.running = false;
      if (this.closed) {
        // Closed by a handler inside its callback: freed now that llhttp has returned.
        this.native.close();
        return this.failure ?? ALL;
      }
      if (this.paused) {
        // Our own stop after a head (not an error): llhttp says how far it got.
        this.failure = null;
        return offset + (typeof result === 'number' ? result : result.bytesParsed);
      }
      if (this.failure !== null) return this.failure;
      if (typeof result !== 'number') return toParseError(result);
      if (this.stoppedForBody) {
        this.freshBeforeNext = true;
        return offset + result;
      }
      if (this.upgraded) return offset + result;
      // A declined upgrade: llhttp stopped after that message as for an upgrade; HTTP goes on.
      if (this.upgradeDeclined && result < input.length) {
        this.upgradeDeclined = false;
        offset += result;
        this.initializeNative();
        continue;
      }
      return ALL;
    }
  }

  /**
   * The peer closed its side. Completes a response whose body runs to the end of the connection;
   * returns an error when a message was cut short (inside a head, a chunked body or before its
   * Content-Length was reached), else null.
   */
  finish(): Http1ParseError | null {
    if (this.closed || this.upgraded) return null;
    this.running = true;
    const result = this.native.finish();
    this.running = false;
    if (this.closed) {
      this.native.close();
      return this.failure;
    }
    if (this.failure !== null) return this.failure;
    return result === undefined ? null : toParseError(result);
  }

  /**
   * Frees the native parser; the instance is dead afterwards. Safe from inside a handler's callback:
   * the native parser is then freed when llhttp returns (freeing it under llhttp would crash the process).
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (!this.running) this.native.close();
  }

  // ---- llhttp's callbacks (arrow properties: llhttp calls them with the native parser as `this`) ----------

  private readonly onFlushedFields = (fields: string[], target: string | undefined): void => {
    if (this.closed) return;
    if (this.flushed === null) this.flushed = fields;
    else for (let i = 0; i < fields.length; i++) this.flushed.push(fields[i]!);
    // Trailers come with the finished message's target again: only a head's flushes build the target.
    if (!this.headComplete && target !== undefined && target.length > 0) this.flushedTarget += target;
    if (this.flushed.length > this.limits.maxFieldLines * 2) this.fail(tooManyFields(this.limits, this.headComplete));
  };

  private readonly onHeadersComplete = (
    versionMajor: number,
    versionMinor: number,
    fields: string[] | undefined,
    method: number | undefined,
    target: string | undefined,
    status: number | undefined,
    reason: string | undefined,
    upgrade: boolean,
    keepAlive: boolean,
  ): number => {
    if (this.failure !== null || this.closed) return STOP;
    const head = new MessageHead();
    let all = fields ?? [];
    if (this.flushed !== null) {
      all = fields === undefined ? this.flushed : this.flushed.concat(fields);
      this.flushed = null;
    }
    head.fields = all;
    head.versionMajor = versionMajor;
    head.versionMinor = versionMinor;
    head.keepAlive = keepAlive;
    head.upgrade = upgrade;
    if (this.kind === MessageKind.REQUEST) {
      head.method = HTTP_METHODS[method ?? -1] ?? '';
      head.target = target !== undefined && target.length > 0 ? target : this.flushedTarget;
    } else {
      head.status = status ?? 0;
      head.reason = reason ?? '';
    }
    this.flushedTarget = '';
    if (versionMajor !== 1) return this.fail(new Http1ParseError('HTTP_VERSION', `HTTP/${versionMajor}.${versionMinor} is not HTTP/1.x`, 505));
    if (all.length > this.limits.maxFieldLines * 2) return this.fail(tooManyFields(this.limits, false));
    this.headComplete = true;
    this.upgradeAsked = upgrade;
    this.upgradeDeclined = false;
    const noBody = this.handler.onHead(head);
    const outside = this.outsideAsked;
    this.outsideAsked = false;
    if (this.pauseAsked) {
      this.pauseAsked = false;
      this.paused = true;
      return STOP;
    }
    if (outside && !noBody && !upgrade) {
      this.bodyOutsideHere = true;
      return ENDS_AT_HEAD;
    }
    return noBody ? NO_BODY : GO_ON;
  };

  private readonly onBody = (chunk: Buffer): void => {
    if (this.failure === null && !this.closed) this.handler.onBody(chunk);
  };

  private readonly onMessageComplete = (): void => {
    if (this.failure !== null || this.closed) return;
    if (this.bodyOutsideHere) {
      // The end llhttp sees right after the head (ENDS_AT_HEAD): the message ends when the caller has read its body.
      this.bodyOutsideHere = false;
      this.headComplete = false;
      this.stoppedForBody = true;
      return;
    }
    // Trailers arrive flushed just before this call, with no head of their own.
    const trailers = this.headComplete ? this.flushed : null;
    this.flushed = null;
    this.headComplete = false;
    if (trailers !== null && trailers.length > 0) this.handler.onTrailers(trailers);
    if (this.upgradeAsked) this.upgraded = true;
    if (this.failure === null) this.handler.onComplete();
  };

  private fail(error: Http1ParseError): number {
    if (this.failure === null) this.failure = error;
    return STOP;
  }
}

function tooManyFields(limits: HeadLimits, trailers: boolean): Http1ParseError {
  return new Http1ParseError('TOO_MANY_FIELDS', `more than ${limits.maxFieldLines} ${trailers ? 'trailer' : 'header'} lines`, 431);
}

function toParseError(error: NativeParseError): Http1ParseError {
  const code = typeof error.code === 'string' ? error.code : 'HPE_UNKNOWN';
  const reason = typeof error.reason === 'string' ? error.reason : String(error.message);
  let status = 400;
  if (code === 'HPE_HEADER_OVERFLOW') status = 431;
  else if ((code === 'HPE_INVALID_VERSION' && reason === 'Invalid HTTP version') || code === 'HPE_PAUSED_H2_UPGRADE') status = 505;
  return new Http1ParseError(code, reason, status);
}
