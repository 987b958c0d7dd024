/**
 * The client's local hop (docs/protocol.md section 6): HTTP/1.1 on raw sockets to the tunnel's local
 * targets, standing on src/http1 (llhttp in RESPONSE mode, the head writer). One `TargetPool` per
 * target: keep-alive connections, bounded in number; a request takes the most recently used idle
 * connection, else a new one while under the bound, else waits in line (first come, first served).
 *
 * Idle connections are retired at the pool's idle timeout, or a second before the server's announced
 * `Keep-Alive: timeout` when that is shorter, checked when one is taken and by one coarse timer per pool
 * (no timer per request). A connection the server closes while idle is retired when its FIN arrives.
 * The rule for the race where the server closes just as a request is written is in connection.ts.
 */
import type { HeadLimits } from '../../http1/parser.js';
import type { LocalTarget } from '../routes.js';
import { LocalConnection } from './connection.js';
import { LocalExchange, type LocalRequest, type LocalResponseHandler } from './exchange.js';

export interface LocalHopOptions {
  /** `--local-insecure`: an https:// target's certificate is not checked. */
  insecure: boolean;
  /** Connections per target, open or opening (128). */
  connectionsPerTarget: number;
  /** How long an unused connection is kept (4 s; the server's `Keep-Alive: timeout` less 1 s if shorter). */
  idleTimeoutMs: number;
  /** Connecting (TCP and TLS handshake) gives up after this long (10 s): LOCAL_UNREACHABLE. */
  connectTimeoutMs: number;
  /** A body held for `100 Continue` is sent anyway after this long (1 s, as curl does). */
  continueTimeoutMs: number;
  /** What a response head may hold (32 KiB, 500 field lines); beyond it the exchange fails. */
  headLimits: HeadLimits;
}

export const DEFAULT_LOCAL_HOP_OPTIONS: Readonly<LocalHopOptions> = Object.freeze({
  insecure: false,
  connectionsPerTarget: 128,
  idleTimeoutMs: 4_000,
  connectTimeoutMs: 10_000,
  continueTimeoutMs: 1_000,
  headLimits: Object.freeze({ maxHeadBytes: 32 * 1024, maxFieldLines: 500 }),
});

/** How often the idle sweep looks for connections past their deadline. */
const SWEEP_MS = 1_000;

export class TargetPool {
  /** Idle connections, the most recently used last. */
  private readonly idle: LocalConnection[] = [];
  /** Exchanges waiting for a connection, in arrival order (`queueHead` skips taken ones without shifting). */
  private queue: (LocalExchange | null)[] = [];
  private queueHead = 0;
  /** Connections open or opening (upgraded ones are the caller's and not kept). */
  private readonly connections = new Set<LocalConnection>();
  /** Connections ever opened: what a test counts to see reuse. */
  connectionsOpened = 0;
  private sweep: NodeJS.Timeout | null = null;
  private closed = false;
  /** The last TLS session of an https:// target, offered to the next handshake. */
  tlsSession: Buffer | undefined = undefined;

  constructor(
    readonly target: LocalTarget,
    readonly options: Readonly<LocalHopOptions>,
  ) {}

  /**
   * Starts a request. `body` is the body given with it (the pool keeps the reference until the exchange
   * ends); `end` says it is all of it, else write() and end() follow on the returned exchange. Throws
   * a LocalHopError (LOCAL_ERROR) when the request cannot be written as given.
   */
  request(request: LocalRequest, body: Buffer | null, end: boolean, handler: LocalResponseHandler): LocalExchange {
    if (this.closed) throw new Error(`the local hop to ${this.target.origin} is closed`);
    const exchange = new LocalExchange(this, request, handler);
    const problem = exchange.prepare(request, body, end);
    if (problem !== null) throw problem;
    this.dispatch(exchange, false);
    return exchange;
  }

  /** Gives `exchange` a connection, or queues it. `fresh` (a retry) skips the idle ones. */
  dispatch(exchange: LocalExchange, fresh: boolean): void {
    if (this.closed) {
      exchange.abort();
      return;
    }
    if (!fresh) {
      const idle = this.takeIdle();
      if (idle !== null) {
        idle.assign(exchange);
        return;
      }
    }
    if (this.connections.size < this.options.connectionsPerTarget) {
      this.openFor(exchange);
      return;
    }
    // A retry goes to the front: it was first in line once already.
    if (fresh && this.queueHead > 0) this.queue[--this.queueHead] = exchange;
    else if (fresh) this.queue.unshift(exchange);
    else this.queue.push(exchange);
  }

  /** A connection whose exchange ended and that may be used again. */
  release(connection: LocalConnection): void {
    const next = this.nextQueued();
    if (next !== null) {
      connection.assign(next);
      return;
    }
    const now = Date.now();
    connection.idleFrom(now, this.options.idleTimeoutMs);
    this.idle.push(connection);
    this.sweep ??= setInterval(this.sweepIdle, SWEEP_MS).unref();
  }

  /** A connection closed or was handed over: its place goes to whoever waits. */
  forget(connection: LocalConnection): void {
    this.connections.delete(connection);
    const at = this.idle.lastIndexOf(connection);
    if (at !== -1) this.idle.splice(at, 1);
    if (this.closed) return;
    const next = this.nextQueued();
    if (next !== null) this.openFor(next);
  }

  /** Takes a queued exchange out of line (it was aborted or failed before it had a connection). */
  unqueue(exchange: LocalExchange): void {
    const at = this.queue.indexOf(exchange, this.queueHead);
    if (at !== -1) this.queue[at] = null;
  }

  /** Connections open or opening, idle ones, and exchanges waiting: for tests and metrics. */
  get stats(): { open: number; idle: number; queued: number; opened: number } {
    let queued = 0;
    for (let i = this.queueHead; i < this.queue.length; i++) if (this.queue[i] !== null) queued++;
    return { open: this.connections.size, idle: this.idle.length, queued, opened: this.connectionsOpened };
  }

  /** Closes every connection and ends every exchange, waiting or in flight, without a word to its handler. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.sweep !== null) clearInterval(this.sweep);
    this.sweep = null;
    for (let i = this.queueHead; i < this.queue.length; i++) this.queue[i]?.abort();
    this.queue = [];
    this.queueHead = 0;
    for (const connection of [...this.connections]) {
      if (connection.exchange !== null) connection.exchange.abort();
      else connection.destroy();
    }
  }

  readonly keepTlsSession = (session: Buffer): void => {
    this.tlsSession = session;
  };

  private openFor(exchange: LocalExchange): void {
    const connection = new LocalConnection(this);
    this.connections.add(connection);
    this.connectionsOpened++;
    connection.assign(exchange);
  }

  private takeIdle(): LocalConnection | null {
    const idle = this.idle;
    if (idle.length === 0) return null;
    const now = Date.now();
    while (idle.length > 0) {
      const connection = idle.pop()!;
      if (connection.usableAt(now)) return connection;
      connection.destroy();
    }
    return null;
  }

  private nextQueued(): LocalExchange | null {
    const queue = this.queue;
    while (this.queueHead < queue.length) {
      const exchange = queue[this.queueHead]!;
      queue[this.queueHead++] = null;
      if (exchange !== null && !exchange.finished) {
        if (this.queueHead === queue.length) this.compactQueue();
        return exchange;
      }
    }
    this.compactQueue();
    return null;
  }

  private compactQueue(): void {
    this.queue.length = 0;
    this.queueHead = 0;
  }

  private readonly sweepIdle = (): void => {
    const now = Date.now();
    // Oldest first: the front of the list has been idle longest.
    while (this.idle.length > 0 && !this.idle[0]!.usableAt(now)) this.idle[0]!.destroy();
    if (this.idle.length === 0 && this.sweep !== null) {
      clearInterval(this.sweep);
      this.sweep = null;
    }
  };
}

/** The pools of a tunnel's targets, one per origin; no other target can be dialled. */
export class LocalHop {
  private readonly pools = new Map<string, TargetPool>();
  readonly options: Readonly<LocalHopOptions>;

  constructor(targets: readonly LocalTarget[], options: Partial<LocalHopOptions> = {}) {
    this.options = Object.freeze({ ...DEFAULT_LOCAL_HOP_OPTIONS, ...options });
    for (const target of targets) if (!this.pools.has(target.origin)) this.pools.set(target.origin, new TargetPool(target, this.options));
  }

  /** The pool of one of the targets given; throws for any other. */
  pool(target: LocalTarget): TargetPool {
    const pool = this.pools.get(target.origin);
    if (pool === undefined) throw new Error(`${target.origin} is not one of this tunnel's local targets`);
    return pool;
  }

  /** Closes every pool: every connection, every exchange (their handlers hear nothing more). */
  close(): void {
    for (const pool of this.pools.values()) pool.close();
  }
}
