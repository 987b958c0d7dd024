/**
 * A public WebSocket forwarded to the edge that holds its tunnel (docs/cluster.md, "The internal hop"):
 * a `ws` client to the owner carries the upgrade with the original Host, path, subprotocols and headers
 * and the cluster's headers; the public upgrade completes only when the owner (so the local server)
 * accepted, and a refusal passes through as the owner answered it. Then messages are relayed both ways
 * as they are (text or binary, close codes and reasons). Pings are each connection's own: uWS pings the
 * public client, `ws` answers the owner's.
 *
 * Flow control: the owner's messages go to the public socket, and while uWS holds more than a high-water
 * mark for it, the hop's socket stops being read (ws pause), so the owner's own flow control holds the
 * tunnel back. uWS cannot stop reading a public WebSocket: its messages queue in the hop's socket up to
 * a bound (the edge's largest message, twice), past which the public socket is closed with 1008, as
 * the edge does for a tunnel that cannot keep up (src/edge/passthrough.ts).
 */
import { STATUS_CODES } from 'node:http';
import WebSocket from 'ws';
import type { ErrorCode } from '../../errors.js';
import { closeReason } from '../../protocol/close-reason.js';
import type { HttpResponse, us_socket_context_t, WebSocket as PublicWebSocket } from '../../uws.js';
import { statusLine, writePublicError } from '../responses.js';
import type { PublicSocket, SocketData } from '../stream-host.js';
import { CLIENT_HEADER, CLUSTER_HEADER_PREFIX, NOT_OWNER_HEADER, PROTO_HEADER, SECRET_HEADER } from './secret.js';
import { connectionRefused } from './peer-link.js';
import type { ClusterDirectory } from './types.js';

export interface ForwardedUpgrade {
  subdomain: string;
  /** Path and query as received. */
  path: string;
  /** readPublicRequestHead's headers. */
  headers: string[];
  key: string;
  protocol: string;
  clientAddress: string;
  proto: string;
  /** The 404's message when no edge holds the tunnel. */
  notFound: string;
}

/** Headers the `ws` client writes itself (a fresh handshake on the hop). */
const HANDSHAKE_HEADERS = new Set(['sec-websocket-key', 'sec-websocket-version', 'sec-websocket-extensions', 'sec-websocket-protocol']);
const REFUSAL_FRAMING = new Set(['date', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'uwebsockets']);
/** Largest body of a refused upgrade passed on (an error page). */
const REFUSAL_BODY_LIMIT = 64 * 1024;
const NORMAL_CLOSURE = 1000;
const NO_STATUS = 1005;
const ABNORMAL = 1006;
const POLICY_VIOLATION = 1008;

export class ForwardedWebSocket implements PublicSocket {
  private res: HttpResponse | null;
  private hop: WebSocket | null = null;
  private publicSocket: PublicWebSocket<SocketData> | null = null;
  private closed = false;
  private readonly highWater: number;

  constructor(
    res: HttpResponse,
    private readonly context: us_socket_context_t,
    private readonly upgrade: ForwardedUpgrade,
    private readonly directory: ClusterDirectory,
    private readonly secret: string,
    private readonly maxMessage: number,
    private readonly refused: (code: ErrorCode) => void,
  ) {
    this.res = res;
    this.highWater = Math.max(64 * 1024, maxMessage);
  }

  /** Inside the uWS upgrade handler. */
  start(): void {
    this.res!.onAborted(() => {
      this.res = null;
      this.close();
    });
    this.directory.ownerOf(this.upgrade.subdomain).then(
      (owner) => {
        if (this.res === null) return;
        if (owner === null || owner.nodeId === this.directory.self.nodeId) this.fail('TUNNEL_NOT_FOUND', this.upgrade.notFound);
        else this.connect(owner.advertise);
      },
      () => this.fail('STORE_UNAVAILABLE', undefined, [['retry-after', '1']]),
    );
  }

  private connect(advertise: string): void {
    const upgrade = this.upgrade;
    const headers: Record<string, string | string[]> = {};
    for (let i = 0; i < upgrade.headers.length; i += 2) {
      const name = upgrade.headers[i]!;
      if (HANDSHAKE_HEADERS.has(name)) continue;
      const value = upgrade.headers[i + 1]!;
      const previous = headers[name];
      headers[name] = previous === undefined ? value : Array.isArray(previous) ? [...previous, value] : [previous, value];
    }
    headers[SECRET_HEADER] = this.secret;
    headers[CLIENT_HEADER] = upgrade.clientAddress;
    headers[PROTO_HEADER] = upgrade.proto;
    const protocols = upgrade.protocol === '' ? [] : upgrade.protocol.split(',').map((each) => each.trim()).filter((each) => each !== '');
    const url = `${advertise.replace(/^http/, 'ws')}${upgrade.path}`;
    const hop = new WebSocket(url, protocols, {
      headers,
      perMessageDeflate: false,
      maxPayload: this.maxMessage,
      handshakeTimeout: 10_000,
      followRedirects: false,
    });
    this.hop = hop;
    hop.on('open', () => this.onOwnerAccepted(hop));
    hop.on('unexpected-response', (_request, response) => this.onOwnerRefused(response));
    hop.on('error', (error) => this.onHopError(error));
    hop.on('message', (data, isBinary) => this.onOwnerMessage(data as Buffer, isBinary));
    hop.on('close', (code, reason) => this.onOwnerClose(code, reason));
  }

  private onOwnerAccepted(hop: WebSocket): void {
    const res = this.res;
    if (res === null) {
      hop.terminate();
      return;
    }
    this.res = null;
    res.cork(() => res.upgrade<SocketData>({ session: null, passthrough: this }, this.upgrade.key, hop.protocol, '', this.context));
  }

  /** The owner answered the upgrade with an HTTP response: the public client gets it as it is. */
  private onOwnerRefused(response: import('node:http').IncomingMessage): void {
    const chunks: Buffer[] = [];
    let size = 0;
    response.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= REFUSAL_BODY_LIMIT) chunks.push(chunk);
    });
    response.on('error', () => undefined);
    response.on('end', () => {
      this.hop = null;
      const res = this.res;
      if (res === null) return;
      this.res = null;
      const status = response.statusCode ?? 502;
      const raw = response.rawHeaders;
      res.cork(() => {
        res.writeStatus(response.statusMessage !== undefined && response.statusMessage !== STATUS_CODES[status] ? `${status} ${response.statusMessage}` : statusLine(status));
        for (let i = 0; i < raw.length; i += 2) {
          const name = raw[i]!.toLowerCase();
          if (REFUSAL_FRAMING.has(name)) continue;
          if (name.startsWith(CLUSTER_HEADER_PREFIX)) {
            if (name === NOT_OWNER_HEADER) this.directory.forget(this.upgrade.subdomain);
            continue;
          }
          res.writeHeader(name, Buffer.from(raw[i + 1]!, 'latin1'));
        }
        res.end(Buffer.concat(chunks));
      });
    });
  }

  private onHopError(error: Error): void {
    if (this.res === null) {
      this.closePublic(ABNORMAL, 'the edge holding the tunnel went away');
      return;
    }
    this.hop = null;
    this.directory.forget(this.upgrade.subdomain);
    const why = connectionRefused(error) ? 'refused the connection' : `failed (${(error as { code?: string }).code ?? error.message})`;
    this.fail('EDGE_UNREACHABLE', `The edge holding ${this.upgrade.subdomain} is unreachable: it ${why}.`);
  }

  private fail(code: ErrorCode, message?: string, extraHeaders?: [string, string][]): void {
    const res = this.res;
    if (res === null) return;
    this.res = null;
    this.closed = true;
    this.refused(code);
    res.cork(() => writePublicError(res, code, message, false, extraHeaders));
  }

  // ---- messages ----------------------------------------------------------------------------------

  private onOwnerMessage(data: Buffer, isBinary: boolean): void {
    const socket = this.publicSocket;
    if (socket === null) return;
    socket.send(data, isBinary, false);
    // uWS took it (buffering if it must): past the mark, the owner waits until the public reader drains.
    if (socket.getBufferedAmount() > this.highWater) this.hop?.pause();
  }

  onPublicOpen(ws: PublicWebSocket<SocketData>): void {
    this.publicSocket = ws;
    if (this.closed || this.hop === null || this.hop.readyState !== WebSocket.OPEN) this.closePublic(ABNORMAL, 'the edge holding the tunnel went away');
  }

  onPublicMessage(message: ArrayBuffer, isBinary: boolean): void {
    const hop = this.hop;
    if (hop === null || hop.readyState !== WebSocket.OPEN) return;
    if (hop.bufferedAmount > 2 * this.highWater) {
      this.closePublic(POLICY_VIOLATION, 'the tunnel cannot keep up with this WebSocket');
      hop.close(POLICY_VIOLATION, 'the tunnel cannot keep up');
      return;
    }
    // A copy: uWS reuses the message's memory once this callback returns.
    hop.send(Buffer.copyBytesFrom(new Uint8Array(message)), { binary: isBinary });
  }

  onPublicDrain(): void {
    const socket = this.publicSocket;
    if (socket !== null && socket.getBufferedAmount() <= this.highWater / 2) this.hop?.resume();
  }

  onPublicClose(code: number, message: ArrayBuffer): void {
    this.publicSocket = null;
    this.closed = true;
    const hop = this.hop;
    this.hop = null;
    if (hop === null) return;
    if (hop.readyState === WebSocket.CONNECTING) {
      hop.terminate();
      return;
    }
    if (code === NO_STATUS || code === ABNORMAL || code < 1000 || code === 1015) hop.close();
    else hop.close(code, Buffer.from(message));
  }

  private onOwnerClose(code: number, reason: Buffer): void {
    this.hop = null;
    this.closePublic(code, reason.toString('utf8'));
  }

  private closePublic(code: number, reason: string): void {
    this.closed = true;
    const socket = this.publicSocket;
    if (socket === null) return;
    this.publicSocket = null;
    try {
      if (code === NO_STATUS || code === ABNORMAL || code < 1000 || code === 1015) socket.end(NORMAL_CLOSURE, closeReason(reason));
      else socket.end(code, closeReason(reason));
    } catch {
      // The socket closed meanwhile.
    }
  }

  /** The public client left before the upgrade completed. */
  private close(): void {
    this.closed = true;
    const hop = this.hop;
    this.hop = null;
    hop?.terminate();
  }
}
