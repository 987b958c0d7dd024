/**
 * How the inspector shows an exchange: the full detail (GET /api/requests, /api/requests/:id) in the
 * edge API's shape where the two overlap (headers as [name, value] pairs, bodies as UTF-8 text or base64
 * with `body_encoding`), and a short summary for the page's list and the live feed.
 * Serialised only when someone asks, never as traffic passes.
 */
import { bodyJson, headerPairs, rejectionOf, type BodyJson } from '../exchange-json.js';
import { wholeBody } from '../capture-buffer.js';
import type { Exchange, WebSocketLog, WebSocketMessage } from '../client/exchange.js';
import { nowIso } from '../ids.js';

export interface ExchangeSummaryJson {
  id: string;
  method: string;
  path: string;
  port: number;
  /** The local handler's status; 0 when it never answered (see `error`). */
  status: number;
  latency_ms: number;
  received_at: string;
  error: string | null;
  replay_of: string | null;
  request_size: number;
  response_size: number;
  /** The public client's address, as the edge saw it; null when unknown. */
  client_address: string | null;
  /** 'websocket' for a passthrough WebSocket connection; 'tcp' or 'tls' for a TCP or TLS passthrough connection's record. */
  kind: 'http' | 'websocket' | 'tcp' | 'tls';
  /** 'edge' when loaded from the edge's capture history at start, not seen live by this client. */
  source: 'live' | 'edge';
  /**
   * "signature": the edge refused the request for its webhook signature (docs/policies.md); it never
   * reached this client, so it is shown only among the history loaded from the edge. Else null.
   */
  rejected: 'signature' | null;
  websocket: WebSocketSummaryJson | null;
  /** Set when the edge delivered a held webhook (docs/offline.md): read from its delivery headers. */
  delivery: DeliveryJson | null;
  /** The tunnel's name under `burrow start` (several tunnels, one inspector); null under `burrow http`. */
  tunnel: string | null;
}

export interface DeliveryJson {
  /** `Burrow-Delivery`: the attempt number of the held event, counting across redeliveries. */
  attempt: number;
  /** `Burrow-Received-At`: when the edge received the event, as sent (ISO 8601 UTC). */
  received_at: string | null;
  /**
   * The held event's id. The delivered request does not carry it (the edge sends only the two headers
   * above); it is known for exchanges loaded from the edge's history, whose capture names it.
   */
  event_id: string | null;
}

export interface WebSocketSummaryJson {
  opened_at: string;
  closed_at: string | null;
  close_code: number | null;
  close_reason: string;
  messages_in: number;
  messages_out: number;
}

export interface WebSocketMessageJson {
  at: string;
  direction: 'in' | 'out';
  binary: boolean;
  size: number;
  data: string;
  data_encoding: 'utf8' | 'base64';
  truncated: boolean;
  /** Present when the message is shown otherwise than the application saw it (a compressed message not inflated), saying why. */
  note?: string;
}

export interface ExchangeJson extends ExchangeSummaryJson {
  request: { headers: [string, string][] } & BodyJson;
  response: { status: number; headers: [string, string][] } & BodyJson;
  /** WebSocket connections: the newest messages kept (oldest first). */
  messages?: WebSocketMessageJson[];
}

export function summaryJson(exchange: Exchange): ExchangeSummaryJson {
  return {
    id: exchange.id,
    method: exchange.method,
    path: exchange.path,
    port: exchange.port,
    status: exchange.status,
    latency_ms: roundMs(exchange.latencyMs),
    received_at: nowIso(exchange.startedAt),
    error: exchange.error,
    replay_of: exchange.replayOf,
    request_size: exchange.requestBodySize,
    response_size: exchange.responseBodySize,
    client_address: exchange.clientAddress ?? null,
    kind: exchange.connection ?? (exchange.websocket === undefined ? 'http' : 'websocket'),
    source: exchange.source ?? 'live',
    rejected: rejectionOf(exchange.error),
    websocket: exchange.websocket === undefined ? null : webSocketSummary(exchange.websocket),
    delivery: deliveryOf(exchange),
    tunnel: exchange.tunnel ?? null,
  };
}

/** The held-webhook delivery this exchange is, from its `Burrow-Delivery` and `Burrow-Received-At` headers. */
export function deliveryOf(exchange: Exchange): DeliveryJson | null {
  let attempt: string | undefined;
  let receivedAt: string | null = null;
  const headers = exchange.requestHeaders;
  for (let i = 0; i + 1 < headers.length; i += 2) {
    const name = headers[i]!.toLowerCase();
    if (name === 'burrow-delivery') attempt ??= headers[i + 1]!;
    else if (name === 'burrow-received-at') receivedAt ??= headers[i + 1]!;
  }
  if (attempt === undefined || !/^[0-9]{1,9}$/.test(attempt)) return null;
  return { attempt: Number(attempt), received_at: receivedAt, event_id: exchange.eventId ?? null };
}

function webSocketSummary(log: WebSocketLog): WebSocketSummaryJson {
  return {
    opened_at: nowIso(log.openedAt),
    closed_at: log.closedAt === null ? null : nowIso(log.closedAt),
    close_code: log.closeCode,
    close_reason: log.closeReason,
    messages_in: log.messagesIn,
    messages_out: log.messagesOut,
  };
}

/** A message's data: text messages as text (when UTF-8), binary ones always base64, every byte kept. */
function messageJson(message: WebSocketMessage): WebSocketMessageJson {
  const truncated = message.size > message.data.byteLength;
  let json: WebSocketMessageJson;
  if (message.binary) {
    const data = Buffer.from(message.data.buffer, message.data.byteOffset, message.data.byteLength).toString('base64');
    json = { at: nowIso(message.at), direction: message.direction, binary: true, size: message.size, data, data_encoding: 'base64', truncated };
  } else {
    const body = bodyJson(message.data, message.size, truncated);
    json = { at: nowIso(message.at), direction: message.direction, binary: false, size: message.size, data: body.body, data_encoding: body.body_encoding, truncated: body.truncated };
  }
  if (message.note !== undefined) json.note = message.note;
  return json;
}

export function exchangeJson(exchange: Exchange): ExchangeJson {
  return {
    ...summaryJson(exchange),
    request: {
      headers: headerPairs(exchange.requestHeaders),
      ...bodyJson(wholeBody(exchange.requestBody), exchange.requestBodySize, exchange.requestTruncated),
    },
    response: {
      status: exchange.status,
      headers: headerPairs(exchange.responseHeaders),
      ...bodyJson(wholeBody(exchange.responseBody), exchange.responseBodySize, exchange.responseTruncated),
    },
    ...(exchange.websocket === undefined ? {} : { messages: exchange.websocket.messages.map(messageJson) }),
  };
}

function roundMs(ms: number): number {
  return Math.round(ms * 100) / 100;
}
