/**
 * An edge by hand for client tests that look at frames: a `ws` server that accepts the real client,
 * says READY, sends OPEN / WS_OPEN frames and collects what the client answers on each stream. It
 * grants credit for response bytes one event-loop turn late, like a public reader a little slower
 * than the local server, so the client's flow control (undici paused) is exercised.
 */
import { EventEmitter, once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { RouteTable, type LocalTarget } from '../../src/client/routes.js';
import { TunnelClient, type TunnelClientOptions } from '../../src/client/tunnel-client.js';
import { decode, encode, type Frame } from '../../src/protocol/codec.js';
import { DEFAULT_SETTINGS, FrameType } from '../../src/protocol/constants.js';

export interface StreamResult {
  status: number;
  headers: string[];
  body: Buffer;
  /** How the stream ended: the last DATA/RESPONSE had end=true, or a RESET came. */
  ending: 'end' | 'reset';
  resetCode: number;
  resetMessage: string;
}

/** One response frame as it arrived: its type, its end flag and the body bytes it carried. */
export interface FrameRecord {
  type: 'RESPONSE' | 'DATA';
  end: boolean;
  bytes: number;
}

interface Pending {
  status: number;
  headers: string[];
  chunks: Buffer[];
  resolve: (result: StreamResult) => void;
}

export class FrameEdge extends EventEmitter {
  private socket: WebSocket | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  /** The stream window the edge announces: a small one makes the client pause undici on most chunks. */
  streamWindow = DEFAULT_SETTINGS.streamWindow;
  /** How late credit is granted: 0 is one event-loop turn, more is a slower public reader. */
  creditDelayMs = 0;
  /** READY says the edge is one of this many in a cluster (`clusterEdges`); 0: a lone edge. */
  clusterEdges = 0;
  /** Every RESPONSE and DATA frame (each one WebSocket message) per stream, in order. */
  readonly frames = new Map<number, FrameRecord[]>();
  /** RESETs on streams nobody waits for: stream → [code, message]. */
  readonly resets = new Map<number, [number, string]>();
  /** Answers to upgrades (`openUpgrade`): stream → status, reason and fields of the RESPONSE. */
  readonly upgrades = new Map<number, { status: number; reason: string; headers: string[] }>();
  /** Raw bytes the client sent on upgraded streams after their 101. */
  readonly raw = new Map<number, Buffer[]>();

  private constructor(
    private readonly http: Server,
    private readonly server: WebSocketServer,
  ) {
    super();
    // What a client asks first: where tunnel clients connect (here, on the same port).
    http.on('request', (_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ build: 'frame-edge', region: 'test', server_time: new Date().toISOString(), agent_url: `ws://127.0.0.1:${this.port}/api/v1/connect` }));
    });
    server.on('headers', (headers) => headers.push('burrow-protocol: 2'));
    server.on('connection', (socket: WebSocket) => {
      this.socket = socket;
      socket.on('message', (data: Buffer) => this.onFrame(decode(data)));
      const cluster = this.clusterEdges > 0 ? { clusterEdges: this.clusterEdges } : {};
      socket.send(encode([FrameType.READY, 0, 'frames', 'http://frames.localhost', { ...DEFAULT_SETTINGS, streamWindow: this.streamWindow, ...cluster }]));
      this.emit('connected');
    });
  }

  static async start(): Promise<FrameEdge> {
    const http = createServer();
    const server = new WebSocketServer({ server: http });
    http.listen(0, '127.0.0.1');
    await once(http, 'listening');
    return new FrameEdge(http, server);
  }

  private get port(): number {
    return (this.http.address() as AddressInfo).port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The real client, connected to this edge. */
  async client(target: number | LocalTarget, options: Partial<TunnelClientOptions> = {}): Promise<TunnelClient> {
    const client = new TunnelClient({ edge: this.url, token: 'svc_pat_00000000_000000000000000000000000000000000000', routes: new RouteTable(target), ...options });
    await client.start();
    return client;
  }

  /** One request; resolves with the client's answer however the stream ends. */
  request(method: string, path: string, headers: string[], body: Buffer | null = null): Promise<StreamResult> {
    return this.requestWithId(method, path, headers, body).result;
  }

  /** The id the next request gets. */
  get nextStreamId(): number {
    return this.nextId;
  }

  /** One request, with its stream id (for `frames`). */
  requestWithId(method: string, path: string, headers: string[], body: Buffer | null = null): { id: number; result: Promise<StreamResult> } {
    const id = this.nextId++;
    this.frames.set(id, []);
    const result = new Promise<StreamResult>((resolve) => {
      this.pending.set(id, { status: 0, headers: [], chunks: [], resolve });
      this.socket!.send(encode([FrameType.OPEN, id, `req_${id}`, method, path, headers, '203.0.113.7', body, true, false]));
    });
    return { id, result };
  }

  /** Opens an upgrade stream (OPEN with `upgrade`); its answer lands in `upgrades`, later bytes in `raw`. */
  openUpgrade(path: string, headers: string[]): number {
    const id = this.nextId++;
    this.frames.set(id, []);
    this.socket!.send(encode([FrameType.OPEN, id, `req_${id}`, 'GET', path, headers, '203.0.113.7', null, true, true]));
    return id;
  }

  /** Raw bytes (or the FIN) toward the local server on an upgraded stream. */
  sendRaw(id: number, data: Buffer | null, end = false): void {
    this.socket!.send(encode([FrameType.DATA, id, data, end]));
    if (data !== null) this.socket!.send(encode([FrameType.WINDOW, 0, data.byteLength]));
  }

  private onFrame(frame: Frame): void {
    if (this.upgrades.has(frame[1] as number) && frame[0] === FrameType.DATA) {
      const chunk = frame[2];
      if (chunk !== null) {
        const list = this.raw.get(frame[1]) ?? [];
        list.push(Buffer.from(chunk));
        this.raw.set(frame[1], list);
        this.socket?.send(encode([FrameType.WINDOW, frame[1], chunk.byteLength]));
        this.socket?.send(encode([FrameType.WINDOW, 0, chunk.byteLength]));
      }
      return;
    }
    switch (frame[0]) {
      case FrameType.RESPONSE: {
        if (!this.pending.has(frame[1]) && !this.upgrades.has(frame[1])) {
          this.upgrades.set(frame[1], { status: frame[2], reason: frame[3], headers: frame[4] });
          return;
        }
        this.frames.get(frame[1])?.push({ type: 'RESPONSE', end: frame[6], bytes: frame[5]?.byteLength ?? 0 });
        const pending = this.pending.get(frame[1]);
        if (pending === undefined) return;
        pending.status = frame[2];
        pending.headers = frame[4];
        this.body(frame[1], pending, frame[5], frame[6]);
        return;
      }
      case FrameType.TRAILERS: {
        const pending = this.pending.get(frame[1]);
        if (pending !== undefined) this.body(frame[1], pending, null, true);
        return;
      }
      case FrameType.DATA: {
        this.frames.get(frame[1])?.push({ type: 'DATA', end: frame[3], bytes: frame[2]?.byteLength ?? 0 });
        const pending = this.pending.get(frame[1]);
        if (pending !== undefined) this.body(frame[1], pending, frame[2], frame[3]);
        return;
      }
      case FrameType.RESET: {
        const pending = this.pending.get(frame[1]);
        if (pending === undefined) {
          this.resets.set(frame[1], [frame[2], frame[3]]);
          return;
        }
        this.pending.delete(frame[1]);
        pending.resolve({ status: pending.status, headers: pending.headers, body: Buffer.concat(pending.chunks), ending: 'reset', resetCode: frame[2], resetMessage: frame[3] });
        return;
      }
      default:
    }
  }

  private body(id: number, pending: Pending, chunk: Uint8Array | null, end: boolean): void {
    if (chunk !== null && chunk.byteLength > 0) {
      pending.chunks.push(Buffer.from(chunk));
      const size = chunk.byteLength;
      // Credit late: the client runs out of it and pauses the local response now and then.
      const grant = (): void => {
        if (!end) this.socket?.send(encode([FrameType.WINDOW, id, size]));
        this.socket?.send(encode([FrameType.WINDOW, 0, size]));
      };
      if (this.creditDelayMs > 0) setTimeout(grant, this.creditDelayMs);
      else setImmediate(grant);
    }
    if (end) {
      this.pending.delete(id);
      pending.resolve({ status: pending.status, headers: pending.headers, body: Buffer.concat(pending.chunks), ending: 'end', resetCode: 0, resetMessage: '' });
    }
  }

  /** Cuts the client's connection at once, as a killed edge does; pending requests stay unanswered. */
  drop(): void {
    this.socket?.terminate();
    this.socket = null;
    this.pending.clear();
  }

  async close(): Promise<void> {
    for (const client of this.server.clients) client.terminate();
    await new Promise((resolve) => this.server.close(resolve));
    this.http.closeAllConnections();
    await new Promise((resolve) => this.http.close(resolve));
  }
}

/** Header value of `name` (any case) in a flat list (first one). */
export function header(headers: string[], name: string): string | undefined {
  for (let i = 0; i < headers.length; i += 2) if (headers[i]!.toLowerCase() === name) return headers[i + 1];
  return undefined;
}
