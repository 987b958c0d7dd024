/**
 * The filter box's search: every word must appear somewhere in the exchange (method, path, status, id,
 * client address, error, a header name or value, the request or response body, a WebSocket message),
 * case-insensitively. Runs only when someone searches, over the ring as it is: nothing is indexed.
 */
import { wholeBody } from '../capture-buffer.js';
import type { Exchange } from '../client/exchange.js';

export function searchWords(query: string): string[] {
  return query.toLowerCase().split(/\s+/).filter((word) => word.length > 0);
}

/** The exchange's searchable texts, cheapest first, each produced only when a word is still missing. */
function* texts(exchange: Exchange): Generator<string> {
  yield `${exchange.method} ${exchange.path} ${exchange.status === 0 ? 'err' : exchange.status} ${exchange.id} ${exchange.replayOf ?? ''} ${exchange.clientAddress ?? ''} ${exchange.error ?? ''} ${exchange.websocket === undefined ? '' : 'websocket ws'}`;
  yield exchange.requestHeaders.join('\n');
  yield exchange.responseHeaders.join('\n');
  if (exchange.requestBody !== null) yield wholeBody(exchange.requestBody)!.toString('utf8');
  if (exchange.responseBody !== null) yield wholeBody(exchange.responseBody)!.toString('utf8');
  if (exchange.websocket !== undefined) for (const message of exchange.websocket.messages) yield message.data.toString('utf8');
}

export function matchesSearch(exchange: Exchange, words: readonly string[]): boolean {
  const missing = new Set(words);
  for (const text of texts(exchange)) {
    const lower = text.toLowerCase();
    for (const word of missing) if (lower.includes(word)) missing.delete(word);
    if (missing.size === 0) return true;
  }
  return false;
}
