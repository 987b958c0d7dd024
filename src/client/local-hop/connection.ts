/**
 * One connection to a local target: a socket (node:net, or node:tls for an https:// target) and one
 * llhttp parser in RESPONSE mode for its whole life (src/http1/parser.ts), carrying one exchange at a
 * time (no pipelining: a response is read whole before the next request is written).
 *
 * When a connection is used again (keep-alive): only after its previous response ended and its request
 * was written whole, when that response allows it (HTTP/1.1 without `Connection: close`, or HTTP/1.0
 * with `Connection: keep-alive`; a body not delimited by the close; no bytes after the response; not
 * an upgrade request), and before the idle deadline (pool.ts). Bytes arriving on an idle connection,
 * or its closing, retire it at once.
 *
 * The retry rule. A server may close an idle connection exactly when a request is written on it; the
 * request then fails without the server having seen it. Such a request is sent again, once, on a new
 * connection, only when all of this holds: the connection had carried a response before (a fresh one
 * that fails is the server's answer, not a race); not one byte of the response arrived; no part of the
 * body was streamed (no body, or only the body given with the request, which is kept); and the method
 * is idempotent (RFC 9110 section 9.2.2: GET, HEAD, OPTIONS, TRACE, PUT, DELETE; a proxy must not retry
 * others, so a POST that meets the race fails with LOCAL_ERROR). The pool keeps the race rare: it
 * retires idle connections a second before the server's announced `Keep-Alive: timeout`, and hands out
 * the most recently used one first.
 */
import { connect as connectTcp, type NetConnectOpts, type Socket } from 'node:net';
import { connect as connectTls, type ConnectionOptions, type TLSSocket } from 'node:tls';
import { SHARED_READ_BYTES, SharedReads } from '../../http1/shared-reads.js';
import { ALL, Http1ParseError, Http1Parser, MessageKind, type MessageHandler, type MessageHead } from '../../http1/parser.js';
import { dialOptions } from '../local-connector.js';
import { failed, unreachable } from './errors.js';
import { ResponseFraming, type LocalExchange, type ResponseFramingValue } from './exchange.js';
import { isIdempotent } from './request-head.js';
import type { TargetPool } from './pool.js';

/** Where every plain TCP local connection of the process reads (src/http1/shared-reads.ts). */
const SHARED_READ = Buffer.allocUnsafe(SHARED_READ_BYTES);

const TIMEOUT_PATTERN = /timeout\s*=\s*([0-9]+)/i;

export class LocalConnection implements MessageHandler {
  readonly socket: Socket;
  private readonly parser: Http1Parser;
  exchange: LocalExchange | null = null;
  /** Responses completed on this connection: one that carried a response before may meet the close race. */
  served = 0;
  /** When an idle connection is retired (Date.now() ms); set when it becomes idle. */
  idleDeadline = 0;
  /** The server's `Keep-Alive: timeout` less a second, in ms; -1 when it announced none. */
  private serverIdleMs = -1;
  private lastKeepAlive = '';
  private connected = false;
  closed = false;
  /** Inside parser.execute: the parser must not be freed, nor the connection handed to another exchange. */
  private executing = false;
  private settleAfterExecute = false;
  /** The status of the message being parsed (interim or final). */
  private status = 0;
  private upgradeHead: MessageHead | null = null;
  /** The current response lets the connection be used again (its framing and Connection say so). */
  private reusable = false;
  /** Reads into SHARED_READ, over TCP and TLS alike (after a 101 they reach the caller as copies). */
  private readonly reads: SharedReads;
  /**
   * Bytes of the current response's Content-Length body still to come, read here from the socket's
   * reads instead of through llhttp (`Http1Parser.takeBodyOutside`): Node's binding copies every body
   * piece into a fresh buffer, and the stream copies the bytes into its frame anyway (once, straight
   * from the read: `onBodyView`). 0 when llhttp has the bytes.
   */
  private bodyLeft = 0;
  /** The Content-Length of the head just parsed, when its body is read outside llhttp. */
  private outsideLength = 0;

  constructor(private readonly pool: TargetPool) {
    const target = pool.target;
    const options = pool.options;
    this.parser = new Http1Parser(MessageKind.RESPONSE, this, options.headLimits);
    this.reads = new SharedReads(this.onData);
    const dial = { host: target.host, port: target.port, noDelay: true, ...dialOptions(target, options.insecure) };
    // Both kinds read into the process's shared buffer (`tls.connect` takes `onread` as `net.connect` does
    // when it makes the socket itself).
    const onread = { buffer: SHARED_READ, callback: this.reads.callback };
    if (target.scheme === 'https') {
      const tls: TLSSocket = connectTls({
        ...dial,
        servername: isAddress(target.host) ? undefined : target.host,
        ALPNProtocols: ['http/1.1'],
        session: pool.tlsSession,
        onread,
      } as ConnectionOptions);
      tls.once('secureConnect', this.onConnect);
      tls.on('session', pool.keepTlsSession);
      this.socket = tls;
    } else {
      this.socket = connectTcp({ ...dial, onread } as NetConnectOpts);
      this.socket.once('connect', this.onConnect);
    }
    this.reads.socket = this.socket;
    this.socket.setTimeout(options.connectTimeoutMs);
    this.socket.once('timeout', this.onConnectTimeout);
    this.socket.on('end', this.onEnd);
    this.socket.on('error', this.onError);
    this.socket.on('close', this.onClose);
    this.socket.on('drain', this.onDrain);
  }

  /** The server may still take a request here: announced limits not reached, deadline not passed. */
  usableAt(now: number): boolean {
    return !this.closed && now < this.idleDeadline && this.socket.writable && !this.socket.readableEnded;
  }

  /** Idle from `now` until the pool's idle timeout, or the server's announced one if shorter. */
  idleFrom(now: number, idleTimeoutMs: number): void {
    this.socket.unref();
    // Reading goes on while idle: a FIN or stray bytes retire the connection at once.
    if (this.socket.isPaused()) this.socket.resume();
    this.idleDeadline = now + (this.serverIdleMs >= 0 && this.serverIdleMs < idleTimeoutMs ? this.serverIdleMs : idleTimeoutMs);
  }

  /** Starts `exchange` here: its head is written now (a connecting socket queues it). */
  assign(exchange: LocalExchange): void {
    this.exchange = exchange;
    this.status = 0;
    this.reusable = false;
    // An idle connection does not keep the process alive; one carrying a request does.
    this.socket.ref();
    if (exchange.paused) this.socket.pause();
    else if (this.socket.isPaused()) this.socket.resume();
    exchange.sendRequest(this);
  }

  /** Called by the exchange when its request is written whole, and after the response ended. */
  exchangeSettled(): void {
    if (this.executing) {
      this.settleAfterExecute = true;
      return;
    }
    const exchange = this.exchange;
    if (exchange === null || this.closed || !exchange.responseDone || !(exchange.requestDone || exchange.discardBody)) return;
    this.exchange = null;
    exchange.settled();
    this.served++;
    if (this.reusable && !exchange.discardBody) this.pool.release(this);
    else this.destroy();
  }

  /** Closes the connection for good; an exchange still on it that had not ended fails. */
  destroy(): void {
    if (this.closed) return;
    this.closed = true;
    this.socket.destroy();
    if (!this.executing) this.parser.close();
    this.pool.forget(this);
    const exchange = this.exchange;
    this.exchange = null;
    if (exchange === null || exchange.finished) return;
    if (exchange.responseDone) exchange.connectionLost();
    else exchange.fail(failed(this.pool.target, 'the connection closed before the response ended'));
  }

  // ---- socket events ------------------------------------------------------------------------------------

  private readonly onConnect = (): void => {
    this.connected = true;
    this.socket.setTimeout(0);
  };

  private readonly onConnectTimeout = (): void => {
    if (this.connected) return;
    const error = Object.assign(new Error(`connect timed out after ${this.pool.options.connectTimeoutMs} ms`), { code: 'ETIMEDOUT' });
    this.onError(error);
  };

  private readonly onData = (chunk: Buffer): void => {
    const exchange = this.exchange;
    if (exchange === null || exchange.responseDone) {
      // Bytes nobody asked for (after a whole response, or on an idle connection): out of step.
      this.destroy();
      return;
    }
    exchange.responseBytesSeen = true;
    let at = 0;
    for (;;) {
      if (this.bodyLeft > 0) {
        at = this.readBody(chunk, at);
        if (this.closed) return;
        if (this.bodyLeft > 0 || at === chunk.byteLength) {
          this.settleDeferred();
          return;
        }
      }
      this.executing = true;
      const result = this.parser.execute(at === 0 ? chunk : chunk.subarray(at));
      if (!this.parsed()) return;
      if (result instanceof Http1ParseError) {
        this.onParseError(result);
        return;
      }
      if (result === ALL) break;
      if (this.parser.bodyOutside) {
        at += result;
        this.bodyLeft = this.outsideLength;
        continue;
      }
      this.handOver(this.reads.owned(chunk.subarray(at + result)));
      return;
    }
    this.settleDeferred();
  };

  /**
   * Hands the exchange the body bytes of `chunk` from `at` on (at most what its Content-Length still
   * wants), as a view of the read, and ends the response with the last of them. Returns where the
   * body's bytes in the chunk end.
   */
  private readBody(chunk: Buffer, at: number): number {
    const size = Math.min(chunk.byteLength - at, this.bodyLeft);
    this.bodyLeft -= size;
    const exchange = this.exchange;
    if (exchange === null || exchange.responseDone || exchange.finished) return at + size;
    this.executing = true;
    const handler = exchange.handler;
    const piece = at === 0 && size === chunk.byteLength ? chunk : chunk.subarray(at, at + size);
    // A handler that keeps what it is given gets its own copy (the read's memory is the next read's).
    if (handler.onBodyView !== undefined) handler.onBodyView(piece);
    else handler.onBody(Buffer.from(piece));
    if (this.bodyLeft === 0 && !this.closed) this.onComplete();
    this.executing = false;
    if (this.closed) this.parser.close();
    return at + size;
  }

  /** After execute or finish: frees a parser that was closed meanwhile; false when the connection is gone. */
  private parsed(): boolean {
    this.executing = false;
    if (!this.closed) return true;
    this.parser.close();
    return false;
  }

  private settleDeferred(): void {
    if (!this.settleAfterExecute) return;
    this.settleAfterExecute = false;
    this.exchangeSettled();
  }

  /** The server closed its side (FIN). */
  private readonly onEnd = (): void => {
    const exchange = this.exchange;
    if (exchange !== null && !exchange.finished && !exchange.responseDone) {
      if (!exchange.responseBytesSeen && this.mayRetry(exchange)) {
        this.retry(exchange);
        return;
      }
      this.reusable = false;
      this.executing = true;
      // llhttp saw the head's end only (the body was read here): a body short of its length is its error.
      const cut = this.bodyLeft > 0 ? new Http1ParseError('HPE_INVALID_EOF_STATE', 'Invalid EOF state', 400) : this.parser.finish();
      if (!this.parsed()) return;
      this.settleDeferred();
      if (!exchange.responseDone && !exchange.finished) {
        exchange.fail(failed(this.pool.target, endedEarly(exchange.responseBytesSeen, this.status, cut), cut?.code ?? 'EOF'));
      }
    }
    this.destroy();
  };

  private readonly onError = (error: Error): void => {
    if (this.closed) return;
    const exchange = this.exchange;
    if (!this.connected) {
      this.exchange = null;
      this.destroy();
      if (exchange !== null) exchange.fail(unreachable(this.pool.target, error));
      return;
    }
    if (exchange !== null && !exchange.finished && !exchange.responseDone) {
      if (!exchange.responseBytesSeen && this.mayRetry(exchange)) {
        this.retry(exchange);
        return;
      }
      const code = (error as { code?: unknown }).code;
      const what = code === 'ECONNRESET' ? 'the connection was reset before the response ended' : `the connection failed before the response ended: ${error.message}`;
      exchange.fail(failed(this.pool.target, what, typeof code === 'string' ? code : ''));
    }
    this.destroy();
  };

  private readonly onClose = (): void => {
    this.destroy();
  };

  private readonly onDrain = (): void => {
    this.exchange?.drained();
  };

  // ---- the parser's callbacks ---------------------------------------------------------------------------

  onHead(head: MessageHead): boolean {
    const exchange = this.exchange;
    this.status = head.status;
    if (exchange === null || this.closed || exchange.responseDone || exchange.finished) {
      // A second response to one request: whatever follows is out of step.
      this.reusable = false;
      this.upgradeHead = null;
      return true;
    }
    const status = head.status;
    if (status < 200) {
      if (status === 101) {
        if (exchange.upgrade && head.upgrade) this.upgradeHead = head;
        else exchange.fail(failed(this.pool.target, exchange.upgrade ? 'answered 101 without an Upgrade field' : 'answered 101 Switching Protocols to a request that did not ask to upgrade'));
        return true;
      }
      if (status === 100) {
        if (!exchange.expectContinue) {
          exchange.fail(failed(this.pool.target, 'sent a 100 Continue the request did not ask for (it had no Expect: 100-continue)'));
          return true;
        }
        exchange.continued();
        if (exchange.finished) return true;
      }
      exchange.handler.onInterim(head);
      return true;
    }
    let framing: ResponseFramingValue = ResponseFraming.CLOSE;
    let length = -1;
    const noBody = exchange.method === 'HEAD' || status === 204 || status === 304;
    const fields = head.fields;
    for (let i = 0; i < fields.length; i += 2) {
      const name = fields[i]!;
      if (name.length === 14 && sameName(name, 'content-length')) {
        length = Number(fields[i + 1]!);
        framing = ResponseFraming.LENGTH;
      } else if (name.length === 17 && sameName(name, 'transfer-encoding')) {
        if (fields[i + 1]!.trim().toLowerCase().endsWith('chunked')) framing = ResponseFraming.CHUNKED;
      } else if (name.length === 10 && sameName(name, 'keep-alive')) {
        this.readKeepAlive(fields[i + 1]!);
      }
    }
    if (framing === ResponseFraming.CHUNKED) length = -1;
    if (noBody) {
      framing = ResponseFraming.NONE;
      length = -1;
    }
    this.reusable = head.keepAlive && framing !== ResponseFraming.CLOSE && !exchange.upgrade;
    // A body of a known length is read outside llhttp (readBody); an answer to an upgrade request is
    // left to llhttp whatever it is (a 101 hands the socket over at its head).
    if (framing === ResponseFraming.LENGTH && length > 0 && !exchange.upgrade && !head.upgrade) {
      this.outsideLength = length;
      this.parser.takeBodyOutside();
    }
    exchange.finalHead();
    // The handler may have ended the exchange from onRequestDrain.
    if (!exchange.finished) exchange.handler.onHead(head, framing, length);
    return noBody;
  }

  onBody(chunk: Buffer): void {
    const exchange = this.exchange;
    if (exchange !== null && !exchange.responseDone && !exchange.finished && this.status >= 200) exchange.handler.onBody(chunk);
  }

  onTrailers(fields: string[]): void {
    const exchange = this.exchange;
    if (exchange !== null && !exchange.responseDone && !exchange.finished && this.status >= 200) exchange.handler.onTrailers(fields);
  }

  onComplete(): void {
    const exchange = this.exchange;
    if (exchange === null || exchange.responseDone || exchange.finished || this.status < 200) return;
    exchange.responseEnded();
    this.exchangeSettled();
  }

  // ---- the rest -----------------------------------------------------------------------------------------

  private onParseError(error: Http1ParseError): void {
    const exchange = this.exchange;
    if (exchange !== null && !exchange.responseDone && !exchange.finished) {
      const what = error.code === 'HPE_HEADER_OVERFLOW' || error.code === 'TOO_MANY_FIELDS' ? `sent a response head over the limit (${error.reason})` : `sent bytes that are not an HTTP response (${error.code}: ${error.reason})`;
      exchange.fail(failed(this.pool.target, what, error.code));
    }
    // After a whole response: the extra bytes are discarded with the connection, as a direct client does.
    this.destroy();
  }

  /** A 101 ended the head: the socket and the bytes read past the head are the caller's now. */
  private handOver(leftover: Buffer): void {
    const exchange = this.exchange;
    const head = this.upgradeHead;
    const socket = this.socket;
    this.upgradeHead = null;
    if (exchange === null || head === null || exchange.finished) {
      this.destroy();
      return;
    }
    socket.pause();
    socket.setTimeout(0);
    socket.removeListener('timeout', this.onConnectTimeout);
    socket.removeListener('data', this.onData);
    socket.removeListener('end', this.onEnd);
    socket.removeListener('error', this.onError);
    socket.removeListener('close', this.onClose);
    socket.removeListener('drain', this.onDrain);
    socket.removeListener('session', this.pool.keepTlsSession);
    this.exchange = null;
    this.closed = true;
    this.reads.handedOver = true;
    this.parser.close();
    this.pool.forget(this);
    exchange.settled();
    exchange.handler.onUpgrade(head, socket, leftover);
  }

  private mayRetry(exchange: LocalExchange): boolean {
    return this.served > 0 && exchange.replayable && isIdempotent(exchange.method);
  }

  private retry(exchange: LocalExchange): void {
    this.exchange = null;
    exchange.rewind();
    this.destroy();
    this.pool.dispatch(exchange, true);
  }

  private readKeepAlive(value: string): void {
    if (value === this.lastKeepAlive) return;
    this.lastKeepAlive = value;
    const timeout = TIMEOUT_PATTERN.exec(value);
    if (timeout !== null) this.serverIdleMs = Math.max(0, Number(timeout[1]) * 1000 - 1000);
  }
}

function sameName(name: string, lowerCase: string): boolean {
  return name === lowerCase || name.toLowerCase() === lowerCase;
}

function isAddress(host: string): boolean {
  return host.includes(':') || /^[0-9.]+$/.test(host);
}

/** What a close before the response's end cut, in words. */
function endedEarly(anyBytes: boolean, status: number, cut: Http1ParseError | null): string {
  if (!anyBytes) return 'the connection closed before any response';
  if (status === 0) return 'the connection closed inside the response head';
  return `the connection closed before the body's end${cut === null ? '' : ` (${cut.reason})`}`;
}
