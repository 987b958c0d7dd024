// Export as HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/): exchanges as a log that browsers'
// developer tools, Postman and HAR viewers open. A plain function of exchanges as both APIs give them
// (src/exchange-json.ts), used by the dashboard's page and the inspector's API (GET /api/har,
// src/inspector/har.ts). Bodies that are not UTF-8 are base64 (`content.encoding`; request bodies carry
// `_encoding`, HAR having no field for it). Burrow's own facts go in `_`-prefixed fields.
import { base64Of, bytesOf } from './exchange-format.js';

function nameValues(pairs) {
  return pairs.map(([name, value]) => ({ name, value }));
}

function headerValue(pairs, wanted) {
  for (const [name, value] of pairs) if (name.toLowerCase() === wanted) return value;
  return '';
}

function queryString(path) {
  const mark = path.indexOf('?');
  if (mark < 0) return [];
  return [...new URLSearchParams(path.slice(mark + 1))].map(([name, value]) => ({ name, value }));
}

function entry(exchange, base) {
  const { request, response } = exchange;
  const ms = exchange.latency_ms ?? exchange.duration_ms ?? 0;
  const latency = Math.round(ms * 1000) / 1000;
  return {
    startedDateTime: exchange.received_at,
    time: latency,
    request: {
      method: exchange.method,
      url: `${base.replace(/\/+$/, '')}${exchange.path}`,
      httpVersion: 'HTTP/1.1',
      cookies: [],
      headers: nameValues(request.headers),
      queryString: queryString(exchange.path),
      ...(request.body_size > 0 || request.body !== ''
        ? { postData: { mimeType: headerValue(request.headers, 'content-type'), text: request.body, ...(request.body_encoding === 'base64' ? { _encoding: 'base64' } : {}) } }
        : {}),
      headersSize: -1,
      bodySize: request.body_size,
    },
    response: {
      status: response.status,
      statusText: '',
      httpVersion: 'HTTP/1.1',
      cookies: [],
      headers: nameValues(response.headers),
      content: {
        size: response.body_size,
        mimeType: headerValue(response.headers, 'content-type'),
        text: response.body,
        ...(response.body_encoding === 'base64' ? { encoding: 'base64' } : {}),
      },
      redirectURL: headerValue(response.headers, 'location'),
      headersSize: -1,
      bodySize: response.body_size,
    },
    cache: {},
    timings: { send: 0, wait: latency, receive: 0 },
    _id: exchange.id,
    _clientAddress: exchange.client_address ?? null,
    _localPort: exchange.port ?? null,
    _error: exchange.error ?? null,
    _replayOf: exchange.replay_of ?? null,
    _requestTruncated: request.truncated,
    _responseTruncated: response.truncated,
    // Chrome's own HAR export carries a WebSocket's frames the same way.
    ...(exchange.messages === undefined
      ? {}
      : {
          _resourceType: 'websocket',
          _webSocketMessages: exchange.messages.map((message) => ({
            type: message.direction === 'in' ? 'send' : 'receive',
            time: Date.parse(message.at) / 1000,
            opcode: message.binary ? 2 : 1,
            data: message.binary ? base64Of(bytesOf(message)) : message.data,
          })),
        }),
  };
}

/**
 * The HAR document; entries oldest first, as HAR viewers expect. `base` prefixes each path: one URL, or a
 * function of the exchange (one inspector records several tunnels under `burrow start`).
 */
export function harLog(exchanges, base, creator) {
  const oldestFirst = [...exchanges].sort((a, b) => Date.parse(a.received_at) - Date.parse(b.received_at));
  const baseOf = typeof base === 'function' ? base : () => base;
  return { log: { version: '1.2', creator, pages: [], entries: oldestFirst.map((exchange) => entry(exchange, baseOf(exchange))) } };
}
