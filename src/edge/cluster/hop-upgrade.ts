/**
 * A public upgrade (a WebSocket, or any other protocol) forwarded to the edge that holds its tunnel
 * (docs/cluster.md, "The internal hop"): the request head goes to the owner over a connection of its own
 * (src/http1's head writer, with the cluster's headers), the owner's answer is read with llhttp and
 * passed on as it came; after a 101 the two sockets are piped into each other, bytes untouched, with
 * the backpressure of `pipe` both ways. A refusal (any other final status) reaches the public client
 * with its body, and the connection closes after it (src/http1/server.ts).
 */
import { connect as connectTcp, type Socket } from 'node:net';
import { connect as connectTls } from 'node:tls';
import type { ErrorCode } from '../../errors.js';
import { requestHead } from '../../http1/head.js';
import { Http1Parser, MessageKind, type MessageHead } from '../../http1/parser.js';
import type { ExchangeSink, ServerExchange } from '../../http1/server.js';
import { writePublicError } from '../responses.js';
import { CLIENT_HEADER, CLUSTER_HEADER_PREFIX, NOT_OWNER_HEADER, PROTO_HEADER, SECRET_HEADER } from './secret.js';
import { HOP_CONNECT_TRIES } from './hop-http.js';
import { connectionRefused } from './peer-link.js';
import type { ClusterDirectory } from './types.js';

export interface ForwardedUpgrade {
  subdomain: string;
  method: string;
  /** The request target as sent to the local server (origin-form). */
  path: string;
  /** readPublicRequestHead's headers (Connection and Upgrade kept). */
  headers: string[];
  clientAddress: string;
  proto: string;
  /** The 404's message when no edge holds the tunnel. */
  notFound: string;
}

/** Response fields that are the public writer's to write (framing). */
const FRAMING = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive']);

export class ForwardedUpgradeExchange implements ExchangeSink {
  private hop: Socket | null = null;
  private parser: Http1Parser | null = null;
  private answered = false;
  private switched = false;
  private ended = false;
  /** Bytes the owner sent after its 101, before the public socket was handed over. */
  private early: Buffer | null = null;
  /** The owner's 101, written once llhttp has returned (the switch frees the parser). */
  private switching: { reason: string; fields: string[] } | null = null;
  /** The edge asked now, and how many were asked (HOP_CONNECT_TRIES). */
  private ownerNode = '';
  private tries = 0;

  constructor(
    private readonly exchange: ServerExchange,
    private readonly upgrade: ForwardedUpgrade,
    private readonly directory: ClusterDirectory,
    private readonly secret: string,
    private readonly refused: (code: ErrorCode) => void,
  ) {}

  start(): void {
    this.exchange.attach(this);
    this.route();
  }

  /** Asks who holds the tunnel and connects there. */
  private route(): void {
    this.directory.ownerOf(this.upgrade.subdomain).then(
      (owner) => {
        if (this.ended) return;
        if (owner === null || owner.nodeId === this.directory.self.nodeId) this.fail('TUNNEL_NOT_FOUND', this.upgrade.notFound);
        else {
          this.ownerNode = owner.nodeId;
          this.tries++;
          this.connect(owner.advertise);
        }
      },
      () => this.fail('STORE_UNAVAILABLE', undefined, [['retry-after', '1']]),
    );
  }

  private connect(advertise: string): void {
    const url = new URL(advertise);
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const hop = url.protocol === 'https:' ? connectTls({ host, port, servername: host }) : connectTcp(port, host);
    this.hop = hop;
    const upgrade = this.upgrade;
    const fields = [...upgrade.headers, SECRET_HEADER, this.secret, CLIENT_HEADER, upgrade.clientAddress, PROTO_HEADER, upgrade.proto];
    hop.write(requestHead(upgrade.method, upgrade.path, fields), 'latin1');
    const parser = new Http1Parser(MessageKind.RESPONSE, {
      onHead: (head) => this.onHead(head),
      onBody: (chunk) => {
        if (!this.exchange.write(chunk)) hop.pause();
      },
      onTrailers: () => undefined,
      onComplete: () => {
        if (this.switched) return;
        if (this.answered) {
          this.ended = true;
          this.exchange.end();
          hop.destroy();
        }
      },
    });
    this.parser = parser;
    hop.on('data', (chunk: Buffer) => {
      if (this.switched && this.switching === null) return;
      const result = parser.execute(chunk);
      if (typeof result !== 'number') {
        this.broken();
        return;
      }
      const switching = this.switching;
      if (switching === null) return;
      this.switching = null;
      if (result >= 0 && result < chunk.byteLength) this.early = chunk.subarray(result);
      hop.pause();
      this.exchange.writeHead(101, switching.reason, switching.fields, -1);
    });
    hop.on('end', () => {
      if (this.switched) return;
      if (parser.finish() !== null || !this.answered) this.broken();
    });
    hop.on('error', (error: Error) => {
      if (this.switched || this.answered) {
        this.broken();
        return;
      }
      const refused = connectionRefused(error);
      if (refused) {
        // Nothing reached that edge: another edge the tunnel is attached to may take the upgrade.
        this.directory.unreachable?.(this.ownerNode);
        if (this.tries < HOP_CONNECT_TRIES && !this.ended) {
          hop.removeAllListeners();
          hop.on('error', () => undefined);
          hop.destroy();
          this.hop = null;
          this.parser = null;
          this.route();
          return;
        }
      }
      this.directory.forget(this.upgrade.subdomain);
      const why = refused ? 'refused the connection' : `failed (${(error as { code?: string }).code ?? error.message})`;
      this.fail('EDGE_UNREACHABLE', `The edge holding ${this.upgrade.subdomain} is unreachable: it ${why}.`);
    });
    hop.on('close', () => {
      if (!this.switched) this.broken();
    });
  }

  private onHead(head: MessageHead): boolean {
    const status = head.status;
    const fields: string[] = [];
    let contentLength = -1;
    for (let i = 0; i < head.fields.length; i += 2) {
      const name = head.fields[i]!;
      const lower = name.toLowerCase();
      if (lower.startsWith(CLUSTER_HEADER_PREFIX)) {
        if (lower === NOT_OWNER_HEADER) this.directory.forget(this.upgrade.subdomain);
        continue;
      }
      if (lower === 'content-length') contentLength = Number(head.fields[i + 1]);
      // The owner wrote one Content-Length where the local server had it: it stays there.
      if (status !== 101 && FRAMING.has(lower) && lower !== 'content-length') continue;
      fields.push(name, head.fields[i + 1]!);
    }
    if (status >= 100 && status < 200 && status !== 101) {
      this.exchange.writeInterim(status, head.reason, fields);
      return false;
    }
    this.answered = true;
    if (status === 101) {
      this.switched = true;
      this.switching = { reason: head.reason, fields };
      return false;
    }
    this.exchange.writeHead(status, head.reason, fields, contentLength, contentLength >= 0);
    return false;
  }

  // ---- the public side (ExchangeSink) ------------------------------------------------------------

  onRequestBody(): void {}

  onWritable(): void {
    if (!this.switched) this.hop?.resume();
  }

  onAborted(): void {
    this.ended = true;
    this.hop?.destroy();
  }

  /** The 101 went out: the public socket and the hop are piped into each other. */
  onSwitched(socket: Socket, head: Buffer): void {
    const hop = this.hop;
    this.parser?.close();
    this.parser = null;
    if (hop === null || hop.destroyed) {
      socket.destroy();
      return;
    }
    if (head.byteLength > 0) hop.write(head);
    if (this.early !== null) socket.write(this.early);
    this.early = null;
    socket.on('error', () => hop.destroy());
    hop.on('error', () => socket.destroy());
    socket.on('close', () => hop.destroy());
    hop.on('close', () => socket.destroy());
    socket.pipe(hop);
    hop.pipe(socket);
    socket.resume();
    hop.resume();
  }

  private broken(): void {
    if (this.ended) return;
    this.ended = true;
    this.hop?.destroy();
    this.parser?.close();
    this.parser = null;
    if (!this.answered) this.failNow('EDGE_UNREACHABLE', `The edge holding ${this.upgrade.subdomain} broke off the upgrade.`);
    else this.exchange.destroy();
  }

  private fail(code: ErrorCode, message?: string, extraHeaders?: [string, string][]): void {
    if (this.ended) return;
    this.ended = true;
    this.hop?.destroy();
    this.failNow(code, message, extraHeaders);
  }

  private failNow(code: ErrorCode, message?: string, extraHeaders?: [string, string][]): void {
    if (this.exchange.dead || this.exchange.responseStarted) return;
    this.refused(code);
    writePublicError(this.exchange, code, message, false, extraHeaders);
  }
}
