/**
 * An exchange as the client saw it: what the inspector shows and the terminal prints. Built only when
 * someone records (the inspector is on, or a listener asked), and bodies are kept up to a cap.
 */
import type { KeptBody } from '../capture-buffer.js';
import { ResetCode } from '../protocol/constants.js';

/**
 * A kept body: one buffer, or the frames it crossed the tunnel in, joined only when read (`wholeBody`).
 * The inspector's ring copies one of 4 KiB or more into its arena, as one buffer (src/inspector/ring.ts).
 */
export type ExchangeBody = KeptBody<Buffer>;

export interface Exchange {
  /** The edge's request id (`req_...`), the same the API and the inspector use. */
  readonly id: string;
  /** Read-only, as the id: the inspector's ring keeps these three packed (src/inspector/kept-exchange.ts). */
  readonly method: string;
  readonly path: string;
  /** The local port it went to. */
  port: number;
  requestHeaders: string[];
  requestBody: ExchangeBody | null;
  requestBodySize: number;
  requestTruncated: boolean;
  status: number;
  responseHeaders: string[];
  responseBody: ExchangeBody | null;
  responseBodySize: number;
  responseTruncated: boolean;
  /** When the client received the request (ms since the epoch). */
  startedAt: number;
  /** Round trip to the local handler and back, in milliseconds (fractional). */
  latencyMs: number;
  /** Why the local exchange failed, if it did. */
  error: string | null;
  /** Set on exchanges the inspector replayed: the id they replayed. */
  replayOf: string | null;
  /** The public client's address, as the edge saw it (OPEN). */
  clientAddress?: string;
  /** Set on WebSocket connections: their life and their last messages. */
  websocket?: WebSocketLog;
  /**
   * Set on a TCP or TLS passthrough connection's record (docs/tcp.md): method `TCP`/`TLS`, path the
   * client's `address:port`, status 0, the body sizes the bytes from and to the client (none kept),
   * latencyMs its duration and error how it ended.
   */
  connection?: 'tcp' | 'tls';
  /** 'edge' for an exchange loaded from the edge's capture history rather than seen live. */
  source?: 'live' | 'edge';
  /** The held webhook (docs/offline.md) this exchange delivered, when known (from the edge's capture). */
  eventId?: string | null;
  /** The named tunnel of `burrow start` it came through (set by the inspector; absent under `burrow http`). */
  tunnel?: string;
}

/** Messages kept per WebSocket connection (the newest), and bytes kept of each. */
export const WS_MESSAGES_KEPT = 100;
export const WS_MESSAGE_BYTES_KEPT = 4096;

export interface WebSocketMessage {
  /** ms since the epoch. */
  at: number;
  /** 'in': public client → local server; 'out': local server → public client. */
  direction: 'in' | 'out';
  binary: boolean;
  size: number;
  /** The first WS_MESSAGE_BYTES_KEPT bytes. */
  data: Buffer;
  /** Set when the message is shown otherwise than the application saw it (compressed, not inflated), saying why. */
  note?: string;
}

export interface WebSocketLog {
  openedAt: number;
  closedAt: number | null;
  closeCode: number | null;
  closeReason: string;
  /** Messages seen each way, all of them, and the newest WS_MESSAGES_KEPT kept. */
  messagesIn: number;
  messagesOut: number;
  messages: WebSocketMessage[];
}

/**
 * Records one message of a WebSocket connection: counted, and (`keep`) its first 4 KiB copied, O(1)
 * amortised. Without an inspector nothing shows the bytes, so only the counts are kept. `size` is the
 * whole message's (the data may be only its first bytes).
 */
export function logWebSocketMessage(log: WebSocketLog, direction: 'in' | 'out', data: Uint8Array, binary: boolean, size = data.byteLength, note = '', keep = true): void {
  if (direction === 'in') log.messagesIn++;
  else log.messagesOut++;
  if (!keep) return;
  const kept = Buffer.copyBytesFrom(data, 0, Math.min(data.byteLength, WS_MESSAGE_BYTES_KEPT));
  if (log.messages.length >= WS_MESSAGES_KEPT) log.messages.splice(0, log.messages.length - WS_MESSAGES_KEPT + 1);
  log.messages.push(note === '' ? { at: Date.now(), direction, binary, size, data: kept } : { at: Date.now(), direction, binary, size, data: kept, note });
}

/**
 * What a RESET from the edge means for the exchange, in words. The edge sends CANCEL both when the
 * public client left and when its own timer gave up (504 LOCAL_TIMEOUT); only its message tells them
 * apart (the protocol has no separate code), so the known messages are matched here.
 */
export function edgeResetText(code: number | undefined, message: string | undefined): string {
  const reason = message ?? '';
  if (code === ResetCode.CANCEL || code === undefined) {
    if (/did not answer within/i.test(reason)) return `timed out at the edge (504 LOCAL_TIMEOUT): ${reason}`;
    if (/public client (closed|went away)/i.test(reason)) return `the public client left before the response (${reason})`;
    return reason === '' ? 'cancelled by the edge' : `cancelled by the edge: ${reason}`;
  }
  return reason === '' ? `reset by the edge (code ${code})` : `reset by the edge (code ${code}): ${reason}`;
}

/**
 * A WebSocket connection as an exchange: status 101 (or the local server's refusal), then its messages.
 * Its id is `ws_` with the number of the edge's `req_` id for it: the edge keeps no capture of WebSocket
 * connections, so that id is unknown to its API, `burrow requests show` and the dashboard, and must not
 * read as a request id (the number still matches the edge's access log `request_id`).
 */
export function webSocketExchange(
  requestId: string,
  method: string,
  path: string,
  port: number,
  requestHeaders: string[],
  clientAddress: string,
  status: number,
  responseHeaders: string[],
  error: string | null,
): Exchange {
  const now = Date.now();
  return {
    id: requestId.startsWith('req_') ? `ws_${requestId.slice(4)}` : requestId,
    method,
    path,
    port,
    requestHeaders,
    requestBody: null,
    requestBodySize: 0,
    requestTruncated: false,
    status,
    responseHeaders,
    responseBody: null,
    responseBodySize: 0,
    responseTruncated: false,
    startedAt: now,
    latencyMs: 0,
    error,
    replayOf: null,
    clientAddress,
    websocket: { openedAt: now, closedAt: status === 101 ? null : now, closeCode: null, closeReason: '', messagesIn: 0, messagesOut: 0, messages: [] },
  };
}
