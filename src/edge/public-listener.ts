/**
 * The edge's public listener (DESIGN.md section 1): a `node:net` server, with `node:tls` on it for
 * HTTPS, whose connections speak HTTP/1.x through src/http1 (llhttp and our own response writer). Every
 * host on the edge's port is served here: tunnel hosts, the API host and the dashboard.
 *
 * TLS handshakes are bounded per client address (docs/security.md, "TLS handshakes"): at most
 * `perAddress` in progress at once and `queuedPerAddress` more waiting (their bytes stay in the kernel
 * until their turn); past that a new connection from the address is closed at once, and a handshake
 * that takes longer than `timeoutMs` is cut. One address looping handshakes therefore costs the edge a
 * bounded share of its CPU instead of every other client's latency.
 *
 * A PROXY protocol v2 header at the start of a plain-HTTP connection is read and taken off
 * (src/edge/proxy-protocol.ts); whether its address is believed is `--trust-proxy`'s business.
 *
 * TLS passthrough (docs/tcp.md): on HTTPS, a connection's ClientHello is read before anything terminates
 * it (client-hello.ts), within its handshake slot and timeout. When its server name is a passthrough
 * tunnel's, the router takes the socket and the bytes read; otherwise the bytes go back into the socket
 * (`unshift`) and the edge's own TLS server reads them as if nothing had looked.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import { MAX_HELLO_INPUT, readClientHello } from './client-hello.js';
import { PREFACE_MORE, PREFACE_REFUSED, type ServerConnection, type ServerConnections } from '../http1/server.js';
import { peerAddress } from './client-address.js';
import { readProxyHeader } from './proxy-protocol.js';
import type { PublicTls } from './tls.js';

export interface HandshakeLimits {
  /** Handshakes in progress at once per client address. */
  perAddress: number;
  /** Connections from one address waiting for a handshake slot; more are closed at once. */
  queuedPerAddress: number;
  /** A handshake not done by then is cut. */
  timeoutMs: number;
}

export const DEFAULT_HANDSHAKE_LIMITS: Readonly<HandshakeLimits> = Object.freeze({ perAddress: 8, queuedPerAddress: 32, timeoutMs: 10_000 });

/** Takes TLS connections whose server name is a passthrough tunnel's (server.ts). */
export interface PassthroughRouter {
  /**
   * A ClientHello naming `serverName` arrived on `socket` (paused; `hello` is every byte read from it):
   * true when a passthrough tunnel took the socket (or closed it: a passthrough name that is offline),
   * false for the edge's own TLS server to terminate it.
   */
  route(serverName: string, socket: Socket, hello: Buffer, client: string): boolean;
  /** Whether any passthrough tunnel is live: without one, no ClientHello is read before the TLS server. */
  active(): boolean;
}

interface AddressHandshakes {
  active: number;
  waiting: Socket[];
}

/** A PROXY v2 header, read once per plain connection before its HTTP. */
function proxyPreface(connection: ServerConnection, bytes: Buffer): number {
  const header = readProxyHeader(bytes);
  switch (header.kind) {
    case 'more':
      return PREFACE_MORE;
    case 'none':
      return 0;
    case 'invalid':
      return PREFACE_REFUSED;
    case 'header':
      connection.proxiedAddress = header.source;
      return header.length;
  }
}

export class PublicListener {
  private readonly server: Server;
  private readonly handshakes = new Map<string, AddressHandshakes>();
  port = 0;

  constructor(
    private readonly connections: ServerConnections,
    private readonly tls: PublicTls | null,
    private readonly limits: HandshakeLimits = DEFAULT_HANDSHAKE_LIMITS,
    private readonly passthrough: PassthroughRouter | null = null,
  ) {
    this.server = createServer({ allowHalfOpen: true, noDelay: true, highWaterMark: 64 * 1024 }, (socket) => this.onConnection(socket));
    this.server.on('error', () => undefined);
  }

  /** Binds host:port (0 picks a free one); a port in use is an error naming it. */
  listen(host: string, port: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const failed = (error: NodeJS.ErrnoException): void => {
        reject(new Error(`cannot bind ${host}:${port} (${error.code === 'EADDRINUSE' ? 'in use' : error.code === 'EADDRNOTAVAIL' ? 'not an address of this machine' : (error.code ?? error.message)})`));
      };
      this.server.once('error', failed);
      this.server.listen({ host, port, exclusive: true }, () => {
        this.server.off('error', failed);
        const address = this.server.address();
        this.port = typeof address === 'object' && address !== null ? address.port : port;
        resolve();
      });
    });
  }

  /** Stops accepting; open connections go on until `destroyAll`. */
  close(): void {
    this.server.close();
  }

  /** Handshakes in progress (for tests and metrics). */
  get handshaking(): number {
    let count = 0;
    for (const entry of this.handshakes.values()) count += entry.active;
    return count;
  }

  private onConnection(socket: Socket): void {
    const remote = peerAddress(socket.remoteAddress);
    if (this.tls === null) {
      this.connections.accept(socket, remote, proxyPreface);
      return;
    }
    let entry = this.handshakes.get(remote);
    if (entry === undefined) {
      entry = { active: 0, waiting: [] };
      this.handshakes.set(remote, entry);
    }
    if (entry.active < this.limits.perAddress) {
      this.handshake(socket, remote, entry);
      return;
    }
    if (entry.waiting.length >= this.limits.queuedPerAddress) {
      socket.destroy();
      return;
    }
    // Nothing is read until its turn: the ClientHello waits in the kernel.
    socket.pause();
    socket.on('error', () => undefined);
    const waiting = entry.waiting;
    waiting.push(socket);
    socket.once('close', () => {
      const at = waiting.indexOf(socket);
      if (at !== -1) waiting.splice(at, 1);
    });
  }

  private handshake(socket: Socket, remote: string, entry: AddressHandshakes): void {
    entry.active++;
    let done = false;
    let current: Socket = socket;
    let onSecure: (() => void) | null = null;
    const finish = (): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (onSecure !== null) current.off('secure', onSecure);
      entry.active--;
      this.next(remote, entry);
    };
    const timer = setTimeout(() => {
      finish();
      current.destroy();
    }, this.limits.timeoutMs);
    timer.unref();
    const terminate = (): void => {
      const tls = this.tls!;
      const secure = new TLSSocket(socket, { isServer: true, secureContext: tls.defaultContext, SNICallback: tls.sni, ALPNProtocols: ['http/1.1'] });
      current = secure;
      onSecure = (): void => {
        finish();
        this.connections.accept(secure, remote);
      };
      secure.once('secure', onSecure);
      secure.once('close', finish);
      secure.on('error', () => {
        finish();
        secure.destroy();
      });
    };
    if (this.passthrough === null || !this.passthrough.active()) {
      terminate();
      return;
    }
    this.peek(socket, remote, terminate, finish);
  }

  /**
   * Reads the ClientHello, then routes: a passthrough tunnel takes the socket, or the bytes go back and
   * `terminate` hands it to the TLS server. Anything that is not a ClientHello goes to the TLS server too
   * (which answers it as it always did).
   */
  private peek(socket: Socket, remote: string, terminate: () => void, finish: () => void): void {
    let read: Buffer | null = null;
    const onClose = (): void => finish();
    const onData = (chunk: Buffer): void => {
      read = read === null ? chunk : Buffer.concat([read, chunk]);
      const hello = readClientHello(read);
      if (hello.kind === 'more' && read.byteLength < MAX_HELLO_INPUT) return;
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.pause();
      if (hello.kind === 'hello' && hello.serverName !== null && this.passthrough!.route(hello.serverName, socket, read, remote)) {
        finish();
        return;
      }
      socket.unshift(read);
      terminate();
    };
    socket.on('error', () => socket.destroy());
    socket.on('close', onClose);
    socket.on('data', onData);
  }

  /** A handshake slot of `remote` is free: the oldest waiting connection takes it. */
  private next(remote: string, entry: AddressHandshakes): void {
    while (entry.waiting.length > 0 && entry.active < this.limits.perAddress) {
      const socket = entry.waiting.shift()!;
      if (socket.destroyed) continue;
      this.handshake(socket, remote, entry);
      socket.resume();
    }
    if (entry.active === 0 && entry.waiting.length === 0) this.handshakes.delete(remote);
  }
}
