/**
 * How the inspector shows an exchange: the full detail (GET /api/requests, /api/requests/:id) in the
 * edge API's shape where the two overlap (headers as [name, value] pairs, bodies as UTF-8 text or base64
 * with `body_encoding`), and a short summary for the page's list and the live feed.
 * Serialised only when someone asks, never as traffic passes.
 */
import { bodyJson, headerPairs, type BodyJson } from '../exchange-json.js';
import type { Exchange } from '../client/exchange.js';
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
}

export interface ExchangeJson extends ExchangeSummaryJson {
  request: { headers: [string, string][] } & BodyJson;
  response: { status: number; headers: [string, string][] } & BodyJson;
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
  };
}

export function exchangeJson(exchange: Exchange): ExchangeJson {
  return {
    ...summaryJson(exchange),
    request: {
      headers: headerPairs(exchange.requestHeaders),
      ...bodyJson(exchange.requestBody, exchange.requestBodySize, exchange.requestTruncated),
    },
    response: {
      status: exchange.status,
      headers: headerPairs(exchange.responseHeaders),
      ...bodyJson(exchange.responseBody, exchange.responseBodySize, exchange.responseTruncated),
    },
  };
}

function roundMs(ms: number): number {
  return Math.round(ms * 100) / 100;
}
