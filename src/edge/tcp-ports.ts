/**
 * The edge's TCP tunnels' public ports (`burrow edge --tcp-ports 20000-20999`, docs/tcp.md): a range the
 * edge may listen on, one port per TCP tunnel, listened on while a tunnel is live on it (so a port without
 * a tunnel refuses connections, as a closed port does). A port is a name like a subdomain, `tcp:PORT`:
 * reserved per account (`burrow reserve --tcp`), held for its owner for the grace period after a drop,
 * asked for again on a reconnect.
 *
 * Each accepted connection is checked (the tunnel's `--allow-cidr`/`--deny-cidr` on the client address
 * the edge believes: the peer, or a trusted proxy's PROXY v2 header) and becomes a raw stream
 * (raw-stream.ts) on the tunnel's connection; a pool's member is chosen per connection.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { BurrowError } from '../errors.js';
import type { Awaitable, ReservationRecord } from '../store/account-store.js';
import { peerAddress, type TrustedProxies } from './client-address.js';
import { readProxyHeader } from './proxy-protocol.js';
import { EdgeRawStream } from './raw-stream.js';
import type { EdgeRegistry } from './registry.js';

export interface PortRange {
  first: number;
  last: number;
}

/** `20000-20999` (or one port, `20000`): the ports, or why not. */
export function parsePortRange(text: string): PortRange | string {
  const match = /^([0-9]{1,5})(?:-([0-9]{1,5}))?$/.exec(text.trim());
  if (match === null) return `"${text}" is not a port range like 20000-20999`;
  const first = Number(match[1]);
  const last = Number(match[2] ?? match[1]);
  if (first < 1 || last > 65535 || first > last) return `"${text}" is not a port range within 1-65535, low to high`;
  return { first, last };
}

/** A TCP tunnel's name: `tcp:PORT`. */
export function tcpName(port: number): string {
  return `tcp:${port}`;
}

/** A trusted proxy gets this long to send its PROXY header before the connection is taken as the client's own. */
const PROXY_WAIT_MS = 2_000;
/** A PROXY v2 header with its TLVs is at most this long (src/edge/proxy-protocol.ts). */
const PROXY_MAX_BYTES = 16 + 4096;

export interface TcpPortsOptions {
  /** The address the ports are bound on (the edge's --host). */
  host: string;
  range: PortRange;
  /** The host name printed in `tcp://HOST:PORT` (the edge's domain by default). */
  publicHost: string;
  proxies: TrustedProxies | null;
  registry: EdgeRegistry;
  /** Who holds a reservation of a name (the account store). */
  reservation(name: string): Awaitable<ReservationRecord | undefined>;
  log(line: string): void;
}

export class TcpPorts {
  private readonly listeners = new Map<number, Server>();
  private closed = false;

  constructor(private readonly options: TcpPortsOptions) {}

  get range(): PortRange {
    return this.options.range;
  }

  publicUrl(port: number): string {
    return `tcp://${this.options.publicHost}:${port}`;
  }

  contains(port: number): boolean {
    return port >= this.options.range.first && port <= this.options.range.last;
  }

  /**
   * A port for a new TCP tunnel of `accountId`, listened on: `wanted` (in the range; the admission decides
   * whether this account may have it), or with 0 a free one (no tunnel live or held on it, reserved by
   * nobody, bindable), tried from a random place in the range. The caller admits the name and gives the
   * port back (`release`) when the admission fails.
   */
  async open(wanted: number): Promise<number> {
    if (this.closed) throw new BurrowError('INVALID_REQUEST', 'The edge is shutting down.');
    const { first, last } = this.options.range;
    if (wanted !== 0) {
      if (!this.contains(wanted)) throw new BurrowError('INVALID_REQUEST', `The port ${wanted} is not one of this edge's TCP ports (${first}-${last}).`);
      await this.listen(wanted);
      return wanted;
    }
    const size = last - first + 1;
    const start = Math.floor(Math.random() * size);
    let tried = 0;
    for (let i = 0; i < size && tried < 64; i++) {
      const port = first + ((start + i) % size);
      const name = tcpName(port);
      if (this.listeners.has(port) || this.options.registry.holderOf(name) !== undefined) continue;
      if ((await this.options.reservation(name)) !== undefined) continue;
      tried++;
      try {
        await this.listen(port);
        return port;
      } catch {
        // Taken by something else on this host: the next one.
      }
    }
    throw new BurrowError('TUNNEL_LIMIT_REACHED', `Every TCP port of this edge (${first}-${last}) is in use or reserved.`);
  }

  /** Stops listening on `port` unless a tunnel is live on it again. */
  release(port: number): void {
    if (this.options.registry.tunnel(tcpName(port)) !== undefined) return;
    const server = this.listeners.get(port);
    if (server === undefined) return;
    this.listeners.delete(port);
    server.close();
  }

  closeAll(): void {
    this.closed = true;
    for (const server of this.listeners.values()) server.close();
    this.listeners.clear();
  }

  private listen(port: number): Promise<void> {
    if (this.listeners.has(port)) return Promise.resolve();
    const server = createServer({ allowHalfOpen: true, pauseOnConnect: true, noDelay: true }, (socket) => this.onConnection(port, socket));
    return new Promise((resolve, reject) => {
      server.once('error', (error: NodeJS.ErrnoException) =>
        reject(new BurrowError('INVALID_REQUEST', `The edge cannot listen on TCP port ${port} (${error.code === 'EADDRINUSE' ? 'another program on the edge holds it' : (error.code ?? error.message)}).`)),
      );
      server.listen({ host: this.options.host, port, exclusive: true }, () => {
        server.removeAllListeners('error');
        server.on('error', (error) => this.options.log(`tcp port ${port}: ${error.message}`));
        if (this.closed || this.listeners.has(port)) {
          server.close();
          if (this.closed) reject(new BurrowError('INVALID_REQUEST', 'The edge is shutting down.'));
          else resolve();
          return;
        }
        this.listeners.set(port, server);
        resolve();
      });
    });
  }

  private onConnection(port: number, socket: Socket): void {
    socket.on('error', () => undefined);
    const peer = peerAddress(socket.remoteAddress);
    const peerPort = socket.remotePort ?? 0;
    const proxies = this.options.proxies;
    if (proxies === null || !proxies.trusts(peer)) {
      this.serve(port, socket, peer, peerPort, null);
      return;
    }
    // A trusted proxy (an L4 balancer) says who the client is in a PROXY v2 header before its bytes.
    let read: Buffer = Buffer.alloc(0);
    const done = (address: string, clientPort: number, rest: Buffer | null): void => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.pause();
      this.serve(port, socket, address, clientPort, rest);
    };
    const timer = setTimeout(() => done(peer, peerPort, read.byteLength > 0 ? read : null), PROXY_WAIT_MS);
    const onData = (chunk: Buffer): void => {
      read = read.byteLength === 0 ? chunk : Buffer.concat([read, chunk]);
      const header = readProxyHeader(read);
      if (header.kind === 'more' && read.byteLength < PROXY_MAX_BYTES) return;
      if (header.kind === 'invalid' || header.kind === 'more') {
        clearTimeout(timer);
        socket.destroy();
        return;
      }
      if (header.kind === 'none') done(peer, peerPort, read);
      else done(header.source === '' ? peer : header.source, header.source === '' ? peerPort : header.sourcePort, read.subarray(header.length));
    };
    socket.on('data', onData);
    socket.once('close', () => clearTimeout(timer));
    socket.resume();
  }

  /** The connection, its client known: a raw stream on the tunnel live on the port, or nothing. */
  private serve(port: number, socket: Socket, client: string, clientPort: number, early: Buffer | null): void {
    if (socket.destroyed) return;
    const session = this.options.registry.tunnel(tcpName(port));
    if (session === undefined) {
      socket.destroy();
      return;
    }
    const stream = new EdgeRawStream(session.connection.allocateStreamId(), session, socket, 'TCP', client, clientPort, peerAddress(socket.localAddress), port, session);
    if (session.addressRule !== null && !session.addressRule.allows(client)) {
      stream.cut('ADDRESS_FORBIDDEN');
      return;
    }
    if (!session.hasRoom()) {
      stream.cut('TUNNEL_BUSY');
      return;
    }
    session.adopt(stream);
    stream.start(early);
  }
}
