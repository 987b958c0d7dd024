/**
 * What an edge stream needs from its tunnel session, as an interface (the client's streams do the same,
 * src/client/stream-host.ts): the streams never import the session, so their state machines can be
 * driven alone (test/edge/stream-states.test.ts) and src/edge has no import cycle.
 */
import type { ErrorCode } from '../errors.js';
import type { Settings } from '../protocol/constants.js';
import type { ReceiveWindow, SendCredit } from '../protocol/flow.js';
import type { RingHandle } from '../store/captures.js';
import type { WebSocket } from '../uws.js';
import type { Captured, Writable } from './turn.js';

/** A stream as its host keeps it: in the table by id, in `blocked` while it waits for connection credit. */
export interface HostedStream {
  readonly id: number;
  /** The stream left its session's table: frames for it are ignored from now on. */
  readonly closed: boolean;
  /** More connection credit arrived. */
  drain(): void;
}

/**
 * A stream as its connection's table keeps it: an HTTP exchange (EdgeHttpStream) or a raw TCP connection
 * (EdgeRawStream, a tcp or tls tunnel's). Frames from the client are dispatched to it by stream id; a frame
 * its kind does not take resets it (docs/protocol.md section 5).
 */
export interface EdgeStream extends HostedStream {
  readonly kind: 'http' | 'raw';
  /** The tunnel it belongs to. */
  readonly session: StreamHost;
  /** When the edge gives up waiting for the client (epoch ms); a raw stream never does. */
  readonly deadline: number;
  /** The client's credit on this stream, checked as its body bytes arrive. */
  readonly receiveWindow: ReceiveWindow;
  /** Public bytes held while they wait for credit. */
  readonly bufferedRequestBytes: number;
  onResponse(status: number, reason: string, headers: string[], body: Uint8Array | null, end: boolean, frame: Uint8Array): void;
  onData(chunk: Uint8Array | null, end: boolean): void;
  onInfo(status: number, reason: string, headers: string[]): void;
  onTrailers(headers: string[]): void;
  onWindow(credit: number): void;
  onReset(code: number, message: string): void;
  /** The tunnel closed (or the edge gave up): the stream ends with this error. */
  fail(code: ErrorCode, message?: string): void;
  checkDeadline(now: number): void;
}

export interface StreamHost {
  readonly settings: Settings;
  /** The tunnel's id on its connection: every OPEN and ACCEPT names it. */
  readonly tunnelId: number;
  readonly subdomain: string;
  readonly accountId: string;
  readonly tokenId: string;
  readonly ring: RingHandle;
  /** The edge's timeout for a local response (504 LOCAL_TIMEOUT). */
  readonly requestTimeoutMs: number;
  /** Body bytes kept in each capture; 0 when capture is off. */
  readonly captureLimit: number;
  /** Streams note when OPEN left and RESPONSE came (the tunnel-hop histogram): only when metrics are served. */
  readonly timesHops: boolean;
  /** The tunnel's policy, whose response header rules edit each response head on its way out (docs/policies.md). */
  readonly policy?: { responseFields(fields: readonly string[]): readonly string[] } | null;
  /** The connection's credit for bytes to the client. */
  readonly connectionSend: SendCredit;
  /** Streams whose outgoing bytes wait for connection credit. */
  readonly blocked: Set<HostedStream>;
  send(frame: Buffer): void;
  /** Response body bytes passed on (or dropped): connection credit goes back to the client. */
  consumedConnection(bytes: number): void;
  /** The stream is over: it leaves the table (call once, after setting its state). */
  endStream(stream: HostedStream): void;
  /** A public response has bytes to write: it is written at the end of this loop turn, corked. */
  deferWrite(stream: Writable): void;
  /** An upgraded stream ended (both directions, or cut): its access-log line and metrics. */
  upgradeEnded(stream: HostedStream): void;
  /**
   * Counts a finished exchange, then commits its capture this turn (or finishes it at once when capture
   * is off, or `store` is false: an upgrade request, which the edge never captures).
   */
  capture(exchange: Captured, requestBytes: number, responseBytes: number, store: boolean): void;
}

/** What uWS keeps on each WebSocket of the agent listener: its tunnel session. */
export interface SocketData {
  session: TunnelSocket | null;
}

/** The tunnel side of a WebSocket (TunnelSession). */
export interface TunnelSocket {
  attach(ws: WebSocket<SocketData>): void;
  onMessage(message: ArrayBuffer, isBinary: boolean): void;
  onDrain(): void;
  onClose(code: number, message?: string): void;
}
