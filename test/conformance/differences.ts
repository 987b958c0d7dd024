/**
 * The documented differences between talking to a local server directly and through the tunnel
 * (docs/protocol.md, "Differences from direct, by design"), and the one normalisation that removes
 * exactly them before direct and tunnelled exchanges are compared. Every rule here is a row of that
 * table and the other way round (differences.test.ts checks it); a rule that fired for a case is
 * reported with it, and what a rule promises about the tunnel's side (one Date, `uWebSockets: 20`,
 * the forwarding headers' values) is checked, not only removed.
 */
import { STATUS_CODES } from 'node:http';
import { createHash } from 'node:crypto';
import { HOP_BY_HOP } from '../../src/protocol/headers.js';
import type { WireExchange, WireResponse } from './http-wire.js';
import type { RequestRecord } from './node-app.js';

export const DIFFERENCES = [
  { id: 'status-line', direction: 'response', summary: 'the status line is HTTP/1.1 with the standard reason phrase' },
  { id: 'field-name-case', direction: 'both', summary: 'field names arrive lower-case' },
  { id: 'field-order', direction: 'both', summary: 'order is kept within one field name, not between names' },
  { id: 'date', direction: 'response', summary: "the edge's own Date replaces the local server's" },
  { id: 'uwebsockets-header', direction: 'response', summary: 'uWebSockets.js 20.30 adds `uWebSockets: 20`' },
  { id: 'hop-by-hop', direction: 'both', summary: 'hop-by-hop fields and those named in Connection are dropped' },
  { id: 'framing', direction: 'both', summary: 'Content-Length is kept; other bodies are framed by each hop' },
  { id: 'trailers', direction: 'both', summary: 'trailer fields are not carried' },
  { id: 'interim-responses', direction: 'response', summary: "1xx responses are not carried; uWS answers 100-continue itself" },
  { id: 'expect', direction: 'request', summary: 'Expect is answered by the edge and not forwarded' },
  { id: 'x-forwarded', direction: 'request', summary: 'X-Forwarded-For/-Proto/-Host are set by the edge' },
  { id: 'websocket-handshake', direction: 'both', summary: "each hop's WebSocket handshake is its own" },
  { id: 'websocket-refusal', direction: 'response', summary: 'a refused upgrade is answered without its body' },
] as const;

export type DifferenceId = (typeof DIFFERENCES)[number]['id'];


const IMF_FIXDATE = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-9]{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT$/;

/** A response reduced to what must match: what the rules remove is gone, what they promise is checked. */
export interface ComparableResponse {
  status: number;
  /** Lower-case name and its values in order, names in first-appearance order. */
  fields: [string, string[]][];
  body: { length: number; sha256: string; start: string };
  trailers: [string, string][];
  /** A promise of a rule the tunnel's side broke (empty on the direct side). */
  problems: string[];
}

export interface ComparableRequest {
  method: string;
  target: string;
  version: string;
  fields: [string, string[]][];
  bodyLength: number;
  bodySha256: string;
  messages?: { data: string; binary: boolean }[];
  close?: { code: number; reason: string };
  problems: string[];
}

export function bodySummary(body: Buffer): ComparableResponse['body'] {
  return { length: body.length, sha256: createHash('sha256').update(body).digest('hex'), start: body.subarray(0, 120).toString('latin1') };
}

/** Names a Connection field lists (beyond the hop-by-hop set), lower-case. */
function connectionNamed(fields: readonly (readonly [string, string])[]): Set<string> {
  const named = new Set<string>();
  for (const [name, value] of fields) {
    if (name.toLowerCase() !== 'connection') continue;
    for (const token of value.split(',')) {
      const item = token.trim().toLowerCase();
      if (item !== '' && item !== 'close' && item !== 'keep-alive') named.add(item);
    }
  }
  return named;
}

function group(fields: readonly (readonly [string, string])[]): [string, string[]][] {
  const grouped = new Map<string, string[]>();
  for (const [name, value] of fields) {
    const list = grouped.get(name);
    if (list === undefined) grouped.set(name, [value]);
    else list.push(value);
  }
  return [...grouped];
}

function sameOrder(a: readonly (readonly [string, string])[], b: readonly (readonly [string, string])[]): boolean {
  return a.length === b.length && a.every(([name], i) => name === b[i]![0]);
}

function hasUpperCase(fields: readonly (readonly [string, string])[]): boolean {
  return fields.some(([name]) => name !== name.toLowerCase());
}

export interface ResponseContext {
  /** The request asked `Expect: 100-continue`. */
  expectContinue: boolean;
  /** The request was a WebSocket upgrade that the local server refused. */
  refusedUpgrade: boolean;
}

/**
 * Removes the documented differences from a direct and a tunnelled response; returns the two
 * comparables and adds the rules that changed something to `fired`.
 */
export function normaliseResponse(
  direct: WireResponse,
  tunnel: WireResponse,
  context: ResponseContext,
  fired: Set<DifferenceId>,
): { direct: ComparableResponse; tunnel: ComparableResponse } {
  const problems: string[] = [];

  // status-line
  const standardReason = STATUS_CODES[tunnel.status] ?? 'Status';
  if (tunnel.version !== '1.1') problems.push(`status-line: the tunnel answered HTTP/${tunnel.version}`);
  if (tunnel.reason !== standardReason) problems.push(`status-line: reason ${JSON.stringify(tunnel.reason)}, not ${JSON.stringify(standardReason)}`);
  if (direct.version !== tunnel.version || direct.reason !== tunnel.reason) fired.add('status-line');

  // field-name-case
  if (hasUpperCase(direct.headers)) fired.add('field-name-case');
  let directFields = direct.headers.map(([name, value]): [string, string] => [name.toLowerCase(), value]);
  let tunnelFields = tunnel.headers.map(([name, value]): [string, string] => [name.toLowerCase(), value]);

  // date
  const dates = tunnelFields.filter(([name]) => name === 'date');
  if (dates.length !== 1 || !IMF_FIXDATE.test(dates[0]![1])) problems.push(`date: the tunnel sent ${JSON.stringify(dates)}, not one IMF-fixdate`);
  if (directFields.some(([name]) => name === 'date') || dates.length > 0) fired.add('date');
  directFields = directFields.filter(([name]) => name !== 'date');
  tunnelFields = tunnelFields.filter(([name]) => name !== 'date');

  // uwebsockets-header
  const marks = tunnelFields.filter(([name]) => name === 'uwebsockets');
  if (marks.length !== 1 || marks[0]![1] !== '20') problems.push(`uwebsockets-header: the tunnel sent ${JSON.stringify(marks)}`);
  else fired.add('uwebsockets-header');
  if (directFields.some(([name]) => name === 'uwebsockets')) problems.push('uwebsockets-header: the local server sent one itself');
  tunnelFields = tunnelFields.filter(([name]) => name !== 'uwebsockets');

  // framing: a body without Content-Length (chunked or close-delimited) is the edge's to frame: chunked
  // while it streams, with a Content-Length when the whole body was at hand at once. The bytes must match.
  const unframed = direct.framing === 'chunked' || direct.framing === 'close';
  if (direct.framing !== tunnel.framing) {
    const allowed = unframed && (tunnel.framing === 'chunked' || tunnel.framing === 'content-length');
    if (!allowed) problems.push(`framing: direct ${direct.framing}, tunnel ${tunnel.framing}`);
    if (unframed && tunnel.framing === 'content-length') tunnelFields = tunnelFields.filter(([name]) => name !== 'content-length');
    fired.add('framing');
  } else if (direct.framing === 'chunked' && direct.chunkSizes.join() !== tunnel.chunkSizes.join()) {
    fired.add('framing');
  }
  const tunnelEncodings = tunnelFields.filter(([name]) => name === 'transfer-encoding');
  if (tunnel.framing === 'chunked' && (tunnelEncodings.length !== 1 || tunnelEncodings[0]![1] !== 'chunked')) {
    problems.push(`framing: the tunnel's Transfer-Encoding is ${JSON.stringify(tunnelEncodings)}`);
  }

  // hop-by-hop: dropped from the direct side; the tunnel's side has none but its own framing.
  const named = connectionNamed(directFields);
  const before = directFields.length;
  directFields = directFields.filter(([name]) => !HOP_BY_HOP.has(name) && !named.has(name));
  if (directFields.length !== before) fired.add('hop-by-hop');
  for (const [name] of tunnelFields) {
    if (name !== 'transfer-encoding' && HOP_BY_HOP.has(name)) problems.push(`hop-by-hop: the tunnel sent ${name}`);
  }
  tunnelFields = tunnelFields.filter(([name]) => name !== 'transfer-encoding');

  // trailers
  if (direct.trailers.length > 0) fired.add('trailers');
  if (tunnel.trailers.length > 0) problems.push(`trailers: the tunnel sent trailers ${JSON.stringify(tunnel.trailers)}`);

  // websocket-refusal: the refused upgrade's body is not carried, and the edge frames none.
  let directBody = direct.body;
  if (context.refusedUpgrade) {
    fired.add('websocket-refusal');
    directBody = Buffer.alloc(0);
    directFields = directFields.filter(([name]) => name !== 'content-length');
    tunnelFields = tunnelFields.filter(([name]) => name !== 'content-length');
  }

  // field-order
  if (!sameOrder(directFields, tunnelFields)) fired.add('field-order');

  return {
    direct: { status: direct.status, fields: sortedGroups(directFields), body: bodySummary(directBody), trailers: [], problems: [] },
    tunnel: { status: tunnel.status, fields: sortedGroups(tunnelFields), body: bodySummary(tunnel.body), trailers: tunnel.trailers, problems },
  };
}

/** Groups by name (order within a name kept) and orders the groups by name. */
function sortedGroups(fields: readonly (readonly [string, string])[]): [string, string[]][] {
  return group(fields).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** interim-responses: what the tunnel may answer before the final response. */
export function normaliseInterim(direct: WireExchange, tunnel: WireExchange, context: ResponseContext, fired: Set<DifferenceId>): string[] {
  const problems: string[] = [];
  const tunnelInterim = tunnel.interim.map((response) => response.status);
  const allowed = context.expectContinue ? [100] : [];
  if (tunnelInterim.join() !== allowed.join()) problems.push(`interim-responses: the tunnel sent ${JSON.stringify(tunnelInterim)}, expected ${JSON.stringify(allowed)}`);
  if (direct.interim.map((response) => response.status).join() !== tunnelInterim.join()) fired.add('interim-responses');
  return problems;
}

export interface RequestContext {
  /** The public client's Host, which the edge copies into X-Forwarded-Host. */
  host: string;
  /** The public client's address, as the edge sees it. */
  clientAddress: string;
  websocket: boolean;
}

/** Removes the documented differences from what the local server received, direct and tunnelled. */
export function normaliseRequest(
  direct: RequestRecord,
  tunnel: RequestRecord,
  context: RequestContext,
  fired: Set<DifferenceId>,
): { direct: ComparableRequest; tunnel: ComparableRequest } {
  const problems: string[] = [];
  if (hasUpperCase(direct.headers) && !hasUpperCase(tunnel.headers)) fired.add('field-name-case');
  let directFields = direct.headers.map(([name, value]): [string, string] => [name.toLowerCase(), value]);
  let tunnelFields = tunnel.headers.map(([name, value]): [string, string] => [name.toLowerCase(), value]);

  // x-forwarded: checked, then removed from both sides.
  const publicFor = directFields.filter(([name]) => name === 'x-forwarded-for').map(([, value]) => value);
  const expected = {
    'x-forwarded-for': [publicFor.length === 0 ? context.clientAddress : `${publicFor.join(', ')}, ${context.clientAddress}`],
    'x-forwarded-proto': ['http'],
    'x-forwarded-host': [context.host],
  };
  for (const [name, values] of Object.entries(expected)) {
    const got = tunnelFields.filter(([field]) => field === name).map(([, value]) => value);
    if (got.join('\n') !== values.join('\n')) problems.push(`x-forwarded: ${name} is ${JSON.stringify(got)}, expected ${JSON.stringify(values)}`);
  }
  fired.add('x-forwarded');
  directFields = directFields.filter(([name]) => !name.startsWith('x-forwarded-'));
  tunnelFields = tunnelFields.filter(([name]) => !name.startsWith('x-forwarded-'));

  // framing: a chunked request body may reach the app chunked or with a Content-Length (the local hop
  // frames the body itself); the bytes must match.
  const directChunked = directFields.some(([name, value]) => name === 'transfer-encoding' && /chunked/i.test(value));
  const tunnelLength = tunnelFields.filter(([name]) => name === 'content-length');
  if (directChunked && !directFields.some(([name]) => name === 'content-length') && tunnelLength.length > 0) {
    if (tunnelLength.length !== 1 || tunnelLength[0]![1] !== String(tunnel.bodyLength)) problems.push(`framing: the app received Content-Length ${JSON.stringify(tunnelLength)} for ${tunnel.bodyLength} bytes`);
    tunnelFields = tunnelFields.filter(([name]) => name !== 'content-length');
    fired.add('framing');
  }

  // trailers
  if ((direct.trailers ?? []).length > 0) fired.add('trailers');
  if ((tunnel.trailers ?? []).length > 0) problems.push(`trailers: the app received trailers ${JSON.stringify(tunnel.trailers)} through the tunnel`);

  // expect
  if (directFields.some(([name]) => name === 'expect')) {
    fired.add('expect');
    directFields = directFields.filter(([name]) => name !== 'expect');
  }
  if (tunnelFields.some(([name]) => name === 'expect')) problems.push('expect: the local server received Expect through the tunnel');

  // websocket-handshake: each hop's handshake fields are its own.
  if (context.websocket) {
    const own = ['sec-websocket-key', 'sec-websocket-version', 'sec-websocket-extensions'];
    directFields = directFields.filter(([name]) => !own.includes(name));
    tunnelFields = tunnelFields.filter(([name]) => !own.includes(name));
    fired.add('websocket-handshake');
  }

  // hop-by-hop: the public request's are dropped; the local hop's (Connection, and Transfer-Encoding for
  // a body of unknown length, Upgrade on a WebSocket) are the client's HTTP stack's own.
  const named = connectionNamed(directFields);
  const before = directFields.length;
  directFields = directFields.filter(([name]) => !HOP_BY_HOP.has(name) && !named.has(name));
  if (directFields.length !== before) fired.add('hop-by-hop');
  const tunnelBefore = tunnelFields.length;
  tunnelFields = tunnelFields.filter(([name]) => !HOP_BY_HOP.has(name));
  if (tunnelFields.length !== tunnelBefore) fired.add('hop-by-hop');

  if (!sameOrder(directFields, tunnelFields)) fired.add('field-order');

  const comparable = (record: RequestRecord, fields: [string, string][], found: string[]): ComparableRequest => ({
    method: record.method,
    target: record.target,
    version: record.version,
    fields: sortedGroups(fields),
    bodyLength: record.bodyLength,
    bodySha256: record.bodySha256,
    ...(record.messages === undefined ? {} : { messages: record.messages }),
    ...(record.close === undefined ? {} : { close: record.close }),
    problems: found,
  });
  return { direct: comparable(direct, directFields, []), tunnel: comparable(tunnel, tunnelFields, problems) };
}
