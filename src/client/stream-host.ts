/**
 * What a client stream needs from its tunnel: the settings the edge announced, the routes and local
 * pools, a way to send frames, and the connection's credit.
 */
import type { DeliveredEvents } from './delivered-events.js';
import type { Settings } from '../protocol/constants.js';
import type { SendCredit } from '../protocol/flow.js';
import type { Exchange } from './exchange.js';
import type { HostHeader } from './host-header.js';
import type { TargetPool } from './local-hop/pool.js';
import type { LocalTarget, RouteTable } from './routes.js';

export interface FlushableStream {
  readonly id: number;
  closed: boolean;
  flush(): void;
}

/** A stream that holds what arrived during a loop turn and frames it when the turn ends. */
export interface TurnEndStream {
  turnEnded(): void;
}

/** A stream in the client's table: an HTTP exchange (ClientHttpStream) or a raw connection (ClientRawStream). */
export interface ClientStream extends FlushableStream {
  readonly host: StreamHost;
  onRequestData(chunk: Uint8Array | null, end: boolean): void;
  onRequestTrailers(fields: string[]): void;
  onWindow(credit: number): void;
  onReset(code?: number, message?: string): void;
  tunnelClosed(): void;
}

export interface StreamHost {
  readonly settings: Settings;
  readonly routes: RouteTable;
  /** The Host local servers see (`--host-header`). */
  readonly hostHeader: HostHeader;
  /** Bytes of each body recorded for the inspector; 0 when nobody records. */
  readonly recordLimit: number;
  readonly connectionSend: SendCredit;
  /** Streams waiting for connection credit. */
  readonly blocked: Set<FlushableStream>;
  /** The local hop's pool of one of the route table's targets; throws for any other. */
  pool(target: LocalTarget): TargetPool;
  send(frame: Buffer): void;
  /** Calls `stream.turnEnded()` at the end of this loop turn, before the turn's frames are written. */
  atTurnEnd(stream: TurnEndStream): void;
  /** Body bytes that left the client's hands: return connection credit to the edge. */
  consumedConnection(bytes: number): void;
  endStream(stream: FlushableStream): void;
  /** Counts a finished exchange (always). */
  count(requestBytes: number, responseBytes: number, failed: boolean): void;
  /** Whether anyone listens for exchanges: when not, none is built. */
  readonly observed: boolean;
  record(exchange: Exchange): void;
  /** Whether anyone listens for WebSocket connections (the inspector, `burrow http`'s log lines). */
  readonly observesWebSockets?: boolean;
  /**
   * A WebSocket connection opened or closed (the same object both times; its messages are counted
   * meanwhile, and their first bytes kept when `recordLimit` is above 0, for the inspector).
   */
  recordWebSocket?(exchange: Exchange): void;
  protocolError(message: string): void;
  /** A tunnel on several edges of a cluster: held webhooks delivered lately, so a repeat is answered here (src/client/delivered-events.ts). */
  readonly deliveredEvents?: DeliveredEvents | null;
}
