/**
 * An HTTP exchange as the inspector's ring keeps it (ring.ts): its strings packed into one.
 *
 * The exchange the client builds holds ~45 small heap objects: each header name and value is a string
 * of its own, and the id, method and path are slices that keep the whole OPEN frame's strings alive.
 * At load the ring holds the last 1,000 exchanges, all of them younger than the last scavenge, so every
 * scavenge copied all those objects. Packed, an entry is a few objects, and the client's scavenges took
 * ~40% less time, at about the same CPU (bench/RESULTS.md, issue 25's tuning log, "the inspector's
 * entries packed").
 *
 * The strings are one flat string: id, method, path, the client's address, then the request's and the
 * response's header lists, each list's items joined by a line feed. They are cut apart when read, which
 * only the inspector's pages, API and search do. An exchange whose strings hold a line feed themselves
 * is kept as it came (`keptExchange` returns it).
 */
import type { Exchange, ExchangeBody, WebSocketLog } from '../client/exchange.js';

/** The exchange to keep: packed, or as it came when it cannot be (a WebSocket, a connection, a line feed in a string). */
export function keptExchange(exchange: Exchange): Exchange {
  if (exchange.websocket !== undefined || exchange.connection !== undefined) return exchange;
  // Lists of pairs only: a list of one empty item would read back as an empty list.
  if (exchange.requestHeaders.length % 2 !== 0 || exchange.responseHeaders.length % 2 !== 0) return exchange;
  const address = exchange.clientAddress;
  const request = exchange.requestHeaders;
  const response = exchange.responseHeaders;
  // Each list joined by the builtin, the rest by `+` (the count of line feeds below flattens it): in a
  // micro-benchmark the cheapest of the ways tried, one join over every piece cost 10-30% more.
  const requestText = request.join('\n');
  const text = exchange.id + exchange.method + exchange.path + (address ?? '') + requestText + response.join('\n');
  const separators = Math.max(request.length - 1, 0) + Math.max(response.length - 1, 0);
  if (lineFeeds(text, separators + 1) !== separators) return exchange;
  return new KeptExchange(exchange, text, address, requestText.length, separators);
}

/** The line feeds in `text`, counting no further than `most`. */
function lineFeeds(text: string, most: number): number {
  let count = 0;
  for (let at = text.indexOf('\n'); at !== -1 && count < most; at = text.indexOf('\n', at + 1)) count++;
  return count;
}

/** A list's items from its segment of the packed string. */
function listOf(text: string, from: number, to: number): string[] {
  return from === to ? [] : text.slice(from, to).split('\n');
}

/** The characters of a list's items, as the ring's byte bound counts them (ring.ts `sizeOf`). */
function charsOf(list: readonly string[]): number {
  let chars = 0;
  for (const item of list) chars += item.length;
  return chars;
}

export class KeptExchange implements Exchange {
  readonly id: string;
  port: number;
  requestBody: ExchangeBody | null;
  requestBodySize: number;
  requestTruncated: boolean;
  status: number;
  responseBody: ExchangeBody | null;
  responseBodySize: number;
  responseTruncated: boolean;
  startedAt: number;
  latencyMs: number;
  error: string | null;
  replayOf: string | null;
  websocket?: WebSocketLog;
  connection?: 'tcp' | 'tls';
  source?: 'live' | 'edge';
  eventId?: string | null;
  tunnel?: string;
  /** The header names' and values' characters (`sizeOf`), without the line feeds between them. */
  headerChars: number;

  private readonly text: string;
  private readonly methodEnd: number;
  private readonly pathEnd: number;
  /** Where the client's address ends in `text` and the request's header list starts. */
  private readonly headersStart: number;
  /** Where the request's header list ends and the response's starts (no line feed between the lists). */
  private readonly requestHeadersEnd: number;
  /** The client's address is in `text`; false when there was none, or once one was set after keeping. */
  private addressPacked: boolean;
  private addressSet: string | undefined = undefined;
  /** Header lists set after keeping (an edge's detail): they replace the packed ones. */
  private requestHeadersSet: string[] | null = null;
  private responseHeadersSet: string[] | null = null;

  /** `requestText`: the request's joined header list's length; `separators`: the line feeds of both lists. */
  constructor(exchange: Exchange, text: string, address: string | undefined, requestText: number, separators: number) {
    this.text = text;
    // A slice of the packed string, not the exchange's own id (a slice of the frame's strings).
    this.id = text.slice(0, exchange.id.length);
    this.methodEnd = exchange.id.length + exchange.method.length;
    this.pathEnd = this.methodEnd + exchange.path.length;
    this.addressPacked = address !== undefined;
    this.headersStart = this.pathEnd + (address?.length ?? 0);
    this.requestHeadersEnd = this.headersStart + requestText;
    // Both lists' characters, read off the packed string rather than counted again.
    this.headerChars = text.length - this.headersStart - separators;
    this.port = exchange.port;
    this.requestBody = exchange.requestBody;
    this.requestBodySize = exchange.requestBodySize;
    this.requestTruncated = exchange.requestTruncated;
    this.status = exchange.status;
    this.responseBody = exchange.responseBody;
    this.responseBodySize = exchange.responseBodySize;
    this.responseTruncated = exchange.responseTruncated;
    this.startedAt = exchange.startedAt;
    this.latencyMs = exchange.latencyMs;
    this.error = exchange.error;
    this.replayOf = exchange.replayOf;
    this.source = exchange.source;
    this.eventId = exchange.eventId;
    this.tunnel = exchange.tunnel;
  }

  get method(): string {
    return this.text.slice(this.id.length, this.methodEnd);
  }

  get path(): string {
    return this.text.slice(this.methodEnd, this.pathEnd);
  }

  /** The characters of the method and the path (`sizeOf`), without cutting them out. */
  get methodAndPathChars(): number {
    return this.pathEnd - this.id.length;
  }

  get clientAddress(): string | undefined {
    return this.addressPacked ? this.text.slice(this.pathEnd, this.headersStart) : this.addressSet;
  }

  set clientAddress(address: string | undefined) {
    this.addressPacked = false;
    this.addressSet = address;
  }

  /** A fresh array at each read: the caller may keep or change it. */
  get requestHeaders(): string[] {
    return this.requestHeadersSet?.slice() ?? listOf(this.text, this.headersStart, this.requestHeadersEnd);
  }

  set requestHeaders(list: string[]) {
    this.headerChars += charsOf(list) - charsOf(this.requestHeaders);
    this.requestHeadersSet = list.slice();
  }

  get responseHeaders(): string[] {
    return this.responseHeadersSet?.slice() ?? listOf(this.text, this.requestHeadersEnd, this.text.length);
  }

  set responseHeaders(list: string[]) {
    this.headerChars += charsOf(list) - charsOf(this.responseHeaders);
    this.responseHeadersSet = list.slice();
  }
}
