/**
 * How the inspector shows an exchange: the full detail (GET /api/requests, /api/requests/:id) in the
 * edge API's shape where the two overlap (headers as [name, value] pairs, bodies as UTF-8 text or base64
 * with `body_encoding`), and a short summary for the page's list and the live feed.
 * Serialised only when someone asks, never as traffic passes.
 */
import { isUtf8 } from 'node:buffer';
import type { Exchange } from '../client/exchange.js';
import { nowIso } from '../ids.js';

export interface BodyJson {
  body: string;
  body_encoding: 'utf8' | 'base64';
  /** The body's full size; `body` holds the first bytes of it when `truncated`. */
  body_size: number;
  truncated: boolean;
}

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
      headers: pairs(exchange.requestHeaders),
      ...bodyJson(exchange.requestBody, exchange.requestBodySize, exchange.requestTruncated),
    },
    response: {
      status: exchange.status,
      headers: pairs(exchange.responseHeaders),
      ...bodyJson(exchange.responseBody, exchange.responseBodySize, exchange.responseTruncated),
    },
  };
}

export function pairs(flat: readonly string[]): [string, string][] {
  const list: [string, string][] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) list.push([flat[i]!, flat[i + 1]!]);
  return list;
}

export function bodyJson(body: Buffer | null, size: number, truncated: boolean): BodyJson {
  if (body === null || body.byteLength === 0) return { body: '', body_encoding: 'utf8', body_size: size, truncated: truncated || size > 0 };
  // A truncated body may end inside a UTF-8 sequence: check it without its last incomplete character.
  const text = truncated ? trimPartialUtf8(body) : body;
  if (isUtf8(text)) return { body: text.toString('utf8'), body_encoding: 'utf8', body_size: size, truncated };
  return { body: body.toString('base64'), body_encoding: 'base64', body_size: size, truncated };
}

/** Drops up to 3 trailing bytes that start a multi-byte UTF-8 character cut short. */
function trimPartialUtf8(body: Buffer): Buffer {
  const end = body.byteLength;
  for (let back = 1; back <= 3 && back <= end; back++) {
    const byte = body[end - back]!;
    if ((byte & 0xc0) === 0x80) continue; // a continuation byte: look further back
    if (byte >= 0xc0) {
      const length = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : 2;
      return length > back ? body.subarray(0, end - back) : body;
    }
    return body;
  }
  return body;
}

function roundMs(ms: number): number {
  return Math.round(ms * 100) / 100;
}
