/**
 * The documented differences between talking to a local server directly and through the tunnel
 * (docs/protocol.md section 16, "Differences from direct, by design"), and the one normalisation that
 * removes exactly them before direct and tunnelled exchanges are compared. Every rule here is a row of
 * that table and the other way round (differences.test.ts checks it); a rule that fired for a case is
 * reported with it, and what a rule promises about the tunnel's side (HTTP/1.1, only framing fields
 * added, the forwarding headers' values) is checked, not only removed.
 *
 * Everything else is compared exactly: field names in their case, the order of all fields, values byte
 * for byte, the reason phrase, interim responses, trailers, body bytes. Two things are not the tunnel's
 * and are evened out here: a `Date` value (the direct and the tunnelled request are two requests, maybe
 * a second apart: both must be IMF-fixdates at the same place), and a WebSocket's `Sec-WebSocket-Key`
 * and `Sec-WebSocket-Accept` (each run's client makes a new key).
 */
import { createHash } from 'node:crypto';
import { HOP_BY_HOP } from '../../src/protocol/headers.js';
import type { WireExchange, WireResponse } from './http-wire.js';
import type { RequestRecord } from './node-app.js';

export const DIFFERENCES = [
  { id: 'status-line', direction: 'response', summary: "the status line says HTTP/1.1; the code and reason phrase are the local server's" },
  { id: 'request-line', direction: 'request', summary: 'the local server gets HTTP/1.1 and an origin-form target' },
  { id: 'hop-by-hop', direction: 'both', summary: "hop-by-hop fields and those named in Connection are each hop's own" },
  { id: 'framing', direction: 'both', summary: 'Content-Length is kept; other bodies are framed by each hop' },
  { id: 'x-forwarded', direction: 'request', summary: 'X-Forwarded-For/-Proto/-Host are set by the edge' },
] as const;

export type DifferenceId = (typeof DIFFERENCES)[number]['id'];

const IMF_FIXDATE = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-9]{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT$/;
/** What a Date value becomes once checked (see the file's comment). */
const SOME_DATE = '<an IMF-fixdate>';
/** The only fields the edge may add to an answer: its own framing (docs/protocol.md section 16). */
const EDGE_FRAMING = new Set(['connection', 'transfer-encoding', 'content-length']);

/** A response reduced to what must match. */
export interface ComparableResponse {
  version: string;
  status: number;
  reason: string;
  /** [name, value] in order, names in their case. */
  fields: [string, string][];
  body: { length: number; sha256: string; start: string };
  trailers: [string, string][];
  /** A promise of a rule the tunnel's side broke (empty on the direct side). */
  problems: string[];
}

export interface ComparableRequest {
  method: string;
  target: string;
  version: string;
  fields: [string, string][];
  bodyLength: number;
  bodySha256: string;
  trailers: [string, string][];
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

/** `fields` without hop-by-hop ones and those Connection names (except `keep`, lower-case). */
function withoutHopByHop(fields: [string, string][], keep: readonly string[] = []): [string, string][] {
  const named = connectionNamed(fields);
  return fields.filter(([name]) => {
    const lower = name.toLowerCase();
    return keep.includes(lower) || (!HOP_BY_HOP.has(lower) && !named.has(lower));
  });
}

/** Date values checked for shape, then evened out (two requests, maybe a second apart). */
function evenDates(fields: [string, string][], problems: string[] | null): [string, string][] {
  return fields.map(([name, value]): [string, string] => {
    if (name.toLowerCase() !== 'date') return [name, value];
    if (!IMF_FIXDATE.test(value)) {
      problems?.push(`Date ${JSON.stringify(value)} is not an IMF-fixdate`);
      return [name, value];
    }
    return [name, SOME_DATE];
  });
}

function named(fields: readonly (readonly [string, string])[], lowerCase: string): [string, string][] {
  return fields.filter(([name]) => name.toLowerCase() === lowerCase) as [string, string][];
}

/**
 * Removes the documented differences from a direct and a tunnelled response; returns the two
 * comparables and adds the rules that changed something to `fired`.
 */
export function normaliseResponse(direct: WireResponse, tunnel: WireResponse, fired: Set<DifferenceId>): { direct: ComparableResponse; tunnel: ComparableResponse } {
  const problems: string[] = [];

  // status-line
  if (tunnel.version !== '1.1') problems.push(`status-line: the tunnel answered HTTP/${tunnel.version}`);
  if (direct.version !== tunnel.version) fired.add('status-line');

  let directFields = evenDates(direct.headers, null);
  let tunnelFields = evenDates(tunnel.headers, problems);

  // framing: a body without Content-Length (chunked or close-delimited) is the edge's to frame: chunked
  // while it streams, close-delimited for an HTTP/1.0 client, with a Content-Length when the whole body
  // was at hand at once. The bytes must match.
  const unframed = direct.framing === 'chunked' || direct.framing === 'close';
  if (direct.framing !== tunnel.framing) {
    const allowed = unframed && (tunnel.framing === 'chunked' || tunnel.framing === 'content-length' || tunnel.framing === 'close');
    if (!allowed) problems.push(`framing: direct ${direct.framing}, tunnel ${tunnel.framing}`);
    if (unframed && tunnel.framing === 'content-length') {
      const lengths = named(tunnelFields, 'content-length');
      if (lengths.length !== 1 || lengths[0]![1] !== String(tunnel.body.length)) problems.push(`framing: the tunnel's Content-Length ${JSON.stringify(lengths)} for ${tunnel.body.length} bytes`);
      tunnelFields = tunnelFields.filter(([name]) => name.toLowerCase() !== 'content-length');
    }
    fired.add('framing');
  } else if (direct.framing === 'chunked' && direct.chunkSizes.join() !== tunnel.chunkSizes.join()) {
    fired.add('framing');
  }
  const tunnelEncodings = named(tunnelFields, 'transfer-encoding');
  if (tunnel.framing === 'chunked' && (tunnelEncodings.length !== 1 || tunnelEncodings[0]![1] !== 'chunked')) {
    problems.push(`framing: the tunnel's Transfer-Encoding is ${JSON.stringify(tunnelEncodings)}`);
  }

  // hop-by-hop: the local server's are dropped; the tunnel's side has none but its own framing.
  const before = directFields.length;
  directFields = withoutHopByHop(directFields);
  if (directFields.length !== before) fired.add('hop-by-hop');
  const tunnelBefore = tunnelFields.length;
  for (const [name] of tunnelFields) {
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) && !EDGE_FRAMING.has(lower)) problems.push(`hop-by-hop: the tunnel sent ${name}`);
  }
  tunnelFields = tunnelFields.filter(([name]) => !HOP_BY_HOP.has(name.toLowerCase()));
  if (tunnelFields.length !== tunnelBefore) fired.add('hop-by-hop');

  return {
    direct: { version: tunnel.version === '1.1' ? '1.1' : direct.version, status: direct.status, reason: direct.reason, fields: directFields, body: bodySummary(direct.body), trailers: withoutHopByHop(direct.trailers), problems: [] },
    tunnel: { version: tunnel.version, status: tunnel.status, reason: tunnel.reason, fields: tunnelFields, body: bodySummary(tunnel.body), trailers: tunnel.trailers, problems },
  };
}

/** Interim responses (1xx but 101) are carried: the same ones, in order, each compared like a response. */
export function normaliseInterim(direct: WireExchange, tunnel: WireExchange, fired: Set<DifferenceId>): { direct: ComparableResponse[]; tunnel: ComparableResponse[] } {
  const result = { direct: [] as ComparableResponse[], tunnel: [] as ComparableResponse[] };
  for (let i = 0; i < Math.max(direct.interim.length, tunnel.interim.length); i++) {
    const [one, other] = [direct.interim[i], tunnel.interim[i]];
    const compared = normaliseResponse(one ?? other!, other ?? one!, one !== undefined && other !== undefined ? fired : new Set());
    if (one !== undefined) result.direct.push(compared.direct);
    if (other !== undefined) result.tunnel.push(compared.tunnel);
  }
  return result;
}

export interface RequestContext {
  /** The public client's Host, which the edge copies into X-Forwarded-Host. */
  host: string;
  /** The public client's address, as the edge sees it. */
  clientAddress: string;
  /** An upgrade: Connection and Upgrade are end to end, compared like any field. */
  upgrade: boolean;
}

const ABSOLUTE_FORM = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i;

/** Removes the documented differences from what the local server received, direct and tunnelled. */
export function normaliseRequest(direct: RequestRecord, tunnel: RequestRecord, context: RequestContext, fired: Set<DifferenceId>): { direct: ComparableRequest; tunnel: ComparableRequest } {
  const problems: string[] = [];

  // request-line: HTTP/1.1 to the local server, the target in origin-form.
  if (tunnel.version !== '1.1') problems.push(`request-line: the local server got HTTP/${tunnel.version}`);
  if (direct.version !== tunnel.version) fired.add('request-line');
  let directTarget = direct.target;
  const absolute = ABSOLUTE_FORM.exec(directTarget);
  if (absolute !== null) {
    directTarget = directTarget.slice(absolute[0].length);
    if (!directTarget.startsWith('/')) directTarget = `/${directTarget}`;
    fired.add('request-line');
  }

  let directFields: [string, string][] = direct.headers;
  let tunnelFields: [string, string][] = tunnel.headers;

  // x-forwarded: checked, then removed from both sides.
  const publicFor = named(directFields, 'x-forwarded-for').map(([, value]) => value);
  const expected = {
    'x-forwarded-for': [publicFor.length === 0 ? context.clientAddress : `${publicFor.join(', ')}, ${context.clientAddress}`],
    'x-forwarded-proto': ['http'],
    'x-forwarded-host': [context.host],
  };
  for (const [name, values] of Object.entries(expected)) {
    const got = named(tunnelFields, name).map(([, value]) => value);
    if (got.join('\n') !== values.join('\n')) problems.push(`x-forwarded: ${name} is ${JSON.stringify(got)}, expected ${JSON.stringify(values)}`);
  }
  fired.add('x-forwarded');
  directFields = directFields.filter(([name]) => !name.toLowerCase().startsWith('x-forwarded-'));
  tunnelFields = tunnelFields.filter(([name]) => !name.toLowerCase().startsWith('x-forwarded-'));

  // framing: a chunked request body may reach the app chunked or with a Content-Length (the whole body
  // was at hand at once); the bytes must match.
  const directChunked = directFields.some(([name, value]) => name.toLowerCase() === 'transfer-encoding' && /chunked/i.test(value));
  const tunnelLength = named(tunnelFields, 'content-length');
  if (directChunked && named(directFields, 'content-length').length === 0 && tunnelLength.length > 0) {
    if (tunnelLength.length !== 1 || tunnelLength[0]![1] !== String(tunnel.bodyLength)) problems.push(`framing: the app received Content-Length ${JSON.stringify(tunnelLength)} for ${tunnel.bodyLength} bytes`);
    tunnelFields = tunnelFields.filter(([name]) => name.toLowerCase() !== 'content-length');
    fired.add('framing');
  }

  // hop-by-hop: the public request's are dropped, the local hop's (Transfer-Encoding for a body of
  // unknown length) are its own; an upgrade's Connection and Upgrade go end to end.
  const keep = context.upgrade ? ['connection', 'upgrade'] : [];
  const before = directFields.length;
  directFields = withoutHopByHop(directFields, keep);
  if (directFields.length !== before) fired.add('hop-by-hop');
  const tunnelBefore = tunnelFields.length;
  tunnelFields = withoutHopByHop(tunnelFields, keep);
  if (tunnelFields.length !== tunnelBefore) fired.add('hop-by-hop');

  const comparable = (record: RequestRecord, target: string, version: string, fields: [string, string][], found: string[]): ComparableRequest => ({
    method: record.method,
    target,
    version,
    fields,
    bodyLength: record.bodyLength,
    bodySha256: record.bodySha256,
    trailers: withoutHopByHop(record.trailers ?? []),
    ...(record.messages === undefined ? {} : { messages: record.messages }),
    ...(record.close === undefined ? {} : { close: record.close }),
    problems: found,
  });
  return {
    direct: comparable(direct, directTarget, tunnel.version === '1.1' ? '1.1' : direct.version, directFields, []),
    tunnel: comparable(tunnel, tunnel.target, tunnel.version, tunnelFields, problems),
  };
}
