/**
 * A small strict HTTP/1.x response parser for the conformance suite, so that what is compared is the
 * bytes on the wire and not what a client library makes of them: header names and values stay latin1
 * strings (one char per byte), bodies are de-framed (Content-Length, chunked or close-delimited) and
 * the framing itself is reported next to them. Anything outside RFC 9112's grammar is an error, so a
 * malformed response from either side fails the case instead of being smoothed over.
 */

export type Framing = 'none' | 'content-length' | 'chunked' | 'close';

export interface WireResponse {
  version: string;
  status: number;
  reason: string;
  /** [name, value] in wire order, latin1, value without surrounding whitespace. */
  headers: [string, string][];
  framing: Framing;
  body: Buffer;
  /** Chunk extensions seen (the edge's chunking is its own, so these are reported, not compared). */
  chunkSizes: number[];
  trailers: [string, string][];
}

export interface WireExchange {
  /** 1xx responses before the final one, in order. */
  interim: WireResponse[];
  responses: WireResponse[];
  /** The connection closed before a complete response (or no byte came at all). */
  incomplete: boolean;
  /** Bytes received in all. */
  received: number;
}

export class WireError extends Error {}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const STATUS_LINE = /^HTTP\/(1\.[01]) ([0-9]{3}) ([\t \x21-\x7e\x80-\xff]*)$/;

/** What a parse step found: a complete message and where the next one starts, or "need more bytes". */
type Step = { message: WireResponse; next: number } | null;

/**
 * Parses one response starting at `offset`. `closed` says the connection ended (a close-delimited body
 * is then complete). `noBody` is true for a response to HEAD. Returns null when more bytes are needed.
 */
export function parseResponse(data: Buffer, offset: number, closed: boolean, noBody: boolean): Step {
  const headEnd = data.indexOf('\r\n\r\n', offset, 'latin1');
  if (headEnd < 0) {
    if (closed && data.length > offset) throw new WireError(`the connection closed inside a response head: ${JSON.stringify(data.subarray(offset).toString('latin1').slice(0, 200))}`);
    return null;
  }
  const head = data.subarray(offset, headEnd).toString('latin1');
  const lines = head.split('\r\n');
  for (const line of lines) if (line.includes('\n') || line.includes('\r')) throw new WireError(`a bare CR or LF in the response head: ${JSON.stringify(line)}`);
  const statusMatch = STATUS_LINE.exec(lines[0]!);
  if (statusMatch === null) throw new WireError(`not a status line: ${JSON.stringify(lines[0])}`);
  const headers = lines.slice(1).map(parseField);
  const status = Number(statusMatch[2]);
  const response: WireResponse = {
    version: statusMatch[1]!,
    status,
    reason: statusMatch[3]!,
    headers,
    framing: 'none',
    body: Buffer.alloc(0),
    chunkSizes: [],
    trailers: [],
  };
  let at = headEnd + 4;
  const lengths = values(headers, 'content-length');
  const encodings = values(headers, 'transfer-encoding');
  if (status < 200 || status === 204 || status === 304 || noBody) return { message: response, next: at };
  if (encodings.length > 0) {
    if (lengths.length > 0) throw new WireError('both Transfer-Encoding and Content-Length');
    const codings = encodings.join(',').split(',').map((coding) => coding.trim().toLowerCase());
    if (codings[codings.length - 1] !== 'chunked') throw new WireError(`Transfer-Encoding without chunked last: ${encodings.join(',')}`);
    response.framing = 'chunked';
    const chunks: Buffer[] = [];
    for (;;) {
      const lineEnd = data.indexOf('\r\n', at, 'latin1');
      if (lineEnd < 0) return needMore(closed, 'a chunk size line');
      const sizeLine = data.subarray(at, lineEnd).toString('latin1');
      const sizeMatch = /^([0-9A-Fa-f]{1,8})(;[\t !-~]*)?$/.exec(sizeLine);
      if (sizeMatch === null) throw new WireError(`bad chunk size line ${JSON.stringify(sizeLine)}`);
      const size = parseInt(sizeMatch[1]!, 16);
      at = lineEnd + 2;
      if (size === 0) break;
      if (data.length < at + size + 2) return needMore(closed, 'a chunk');
      chunks.push(data.subarray(at, at + size));
      response.chunkSizes.push(size);
      if (data[at + size] !== 13 || data[at + size + 1] !== 10) throw new WireError('a chunk not followed by CRLF');
      at += size + 2;
    }
    for (;;) {
      const lineEnd = data.indexOf('\r\n', at, 'latin1');
      if (lineEnd < 0) return needMore(closed, 'the trailer section');
      const line = data.subarray(at, lineEnd).toString('latin1');
      at = lineEnd + 2;
      if (line === '') break;
      response.trailers.push(parseField(line));
    }
    response.body = Buffer.concat(chunks);
    return { message: response, next: at };
  }
  if (lengths.length > 0) {
    if (lengths.length > 1 || !/^[0-9]{1,15}$/.test(lengths[0]!)) throw new WireError(`bad Content-Length ${JSON.stringify(lengths)}`);
    const length = Number(lengths[0]);
    response.framing = 'content-length';
    if (data.length < at + length) return needMore(closed, `a body of ${length} bytes (have ${data.length - at})`);
    response.body = data.subarray(at, at + length);
    return { message: response, next: at + length };
  }
  // Neither: the body runs to the end of the connection (RFC 9112 section 6.3, rule 8).
  if (!closed) return null;
  response.framing = 'close';
  response.body = data.subarray(at);
  return { message: response, next: data.length };
}

function needMore(closed: boolean, what: string): null {
  if (closed) throw new WireError(`the connection closed inside ${what}`);
  return null;
}

function parseField(line: string): [string, string] {
  const colon = line.indexOf(':');
  if (colon <= 0) throw new WireError(`not a header field: ${JSON.stringify(line)}`);
  const name = line.slice(0, colon);
  if (!TOKEN.test(name)) throw new WireError(`bad field name ${JSON.stringify(name)}`);
  const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '');
  if (/[\x00-\x08\x0a-\x1f\x7f]/.test(value)) throw new WireError(`a control character in ${name}: ${JSON.stringify(value)}`);
  return [name, value];
}

/** The values of every field named `name` (case-insensitive), in order. */
export function values(headers: readonly (readonly [string, string])[], name: string): string[] {
  const found: string[] = [];
  for (const [field, value] of headers) if (field.toLowerCase() === name) found.push(value);
  return found;
}

/**
 * Parses everything received on one connection: `methods` are the methods of the requests sent on it,
 * in order (HEAD responses have no body). Interim 1xx responses are collected apart.
 */
export function parseExchange(data: Buffer, closed: boolean, methods: readonly string[]): { exchange: WireExchange; complete: boolean } {
  const exchange: WireExchange = { interim: [], responses: [], incomplete: false, received: data.length };
  let offset = 0;
  while (exchange.responses.length < methods.length) {
    const step = parseResponse(data, offset, closed, methods[exchange.responses.length] === 'HEAD');
    if (step === null) {
      exchange.incomplete = closed;
      return { exchange, complete: closed };
    }
    offset = step.next;
    if (step.message.status < 200) exchange.interim.push(step.message);
    else exchange.responses.push(step.message);
  }
  return { exchange, complete: true };
}
