/**
 * Export as HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/): the inspector's exchanges as a
 * log that browsers' developer tools, Postman and HAR viewers open. Bodies that are not UTF-8 are
 * base64 (`content.encoding`; request bodies carry `_encoding`, HAR having no field for it). Burrow's
 * own facts go in `_`-prefixed fields, as the format allows.
 */
import { bodyJson, headerPairs } from '../exchange-json.js';
import type { Exchange } from '../client/exchange.js';
import { nowIso } from '../ids.js';
import { VERSION } from '../version.js';

function nameValues(flat: readonly string[]): { name: string; value: string }[] {
  return headerPairs(flat).map(([name, value]) => ({ name, value }));
}

function headerValue(flat: readonly string[], wanted: string): string {
  for (let i = 0; i + 1 < flat.length; i += 2) if (flat[i]!.toLowerCase() === wanted) return flat[i + 1]!;
  return '';
}

function queryString(path: string): { name: string; value: string }[] {
  const mark = path.indexOf('?');
  if (mark < 0) return [];
  const list: { name: string; value: string }[] = [];
  for (const [name, value] of new URLSearchParams(path.slice(mark + 1))) list.push({ name, value });
  return list;
}

function entry(exchange: Exchange, base: string): Record<string, unknown> {
  const request = bodyJson(exchange.requestBody, exchange.requestBodySize, exchange.requestTruncated);
  const response = bodyJson(exchange.responseBody, exchange.responseBodySize, exchange.responseTruncated);
  const requestType = headerValue(exchange.requestHeaders, 'content-type');
  const responseType = headerValue(exchange.responseHeaders, 'content-type');
  const latency = Math.round(exchange.latencyMs * 1000) / 1000;
  return {
    startedDateTime: nowIso(exchange.startedAt),
    time: latency,
    request: {
      method: exchange.method,
      url: `${base.replace(/\/+$/, '')}${exchange.path}`,
      httpVersion: 'HTTP/1.1',
      cookies: [],
      headers: nameValues(exchange.requestHeaders),
      queryString: queryString(exchange.path),
      ...(exchange.requestBodySize > 0 || exchange.requestBody !== null && exchange.requestBody.byteLength > 0
        ? { postData: { mimeType: requestType, text: request.body, ...(request.body_encoding === 'base64' ? { _encoding: 'base64' } : {}) } }
        : {}),
      headersSize: -1,
      bodySize: exchange.requestBodySize,
    },
    response: {
      status: exchange.status,
      statusText: '',
      httpVersion: 'HTTP/1.1',
      cookies: [],
      headers: nameValues(exchange.responseHeaders),
      content: {
        size: exchange.responseBodySize,
        mimeType: responseType,
        text: response.body,
        ...(response.body_encoding === 'base64' ? { encoding: 'base64' } : {}),
      },
      redirectURL: headerValue(exchange.responseHeaders, 'location'),
      headersSize: -1,
      bodySize: exchange.responseBodySize,
    },
    cache: {},
    timings: { send: 0, wait: latency, receive: 0 },
    _id: exchange.id,
    _clientAddress: exchange.clientAddress ?? null,
    _localPort: exchange.port,
    _error: exchange.error,
    _replayOf: exchange.replayOf,
    _requestTruncated: exchange.requestTruncated,
    _responseTruncated: exchange.responseTruncated,
    // Chrome's own HAR export carries a WebSocket's frames the same way.
    ...(exchange.websocket === undefined
      ? {}
      : {
          _resourceType: 'websocket',
          _webSocketMessages: exchange.websocket.messages.map((message) => ({
            type: message.direction === 'in' ? 'send' : 'receive',
            time: message.at / 1000,
            opcode: message.binary ? 2 : 1,
            data: message.binary ? message.data.toString('base64') : message.data.toString('utf8'),
          })),
        }),
  };
}

/** The HAR document; entries oldest first, as HAR viewers expect. `base` prefixes each path. */
export function harLog(exchanges: readonly Exchange[], base: string): Record<string, unknown> {
  return {
    log: {
      version: '1.2',
      creator: { name: 'Burrow inspector', version: VERSION },
      pages: [],
      entries: exchanges.map((exchange) => entry(exchange, base)),
    },
  };
}
