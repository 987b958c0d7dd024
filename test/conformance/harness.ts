/**
 * Runs one conformance case twice, directly against a local app and through the tunnel, and compares
 * the two. HTTP requests are raw bytes on a fresh connection (so the request is exactly what the case
 * says) and responses are parsed from the bytes received; WebSockets use the `ws` client. After each
 * exchange the app's record of what it received is fetched, so the request direction is compared too.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { request } from 'undici';
import WebSocket from 'ws';
import { normaliseInterim, normaliseRequest, normaliseResponse, type DifferenceId } from './differences.js';
import { parseExchange, WireError, type WireExchange } from './http-wire.js';
import { messageData, type RequestRecord } from './node-app.js';

/** Where one side of a case goes: the app itself, or the edge. */
export interface Endpoint {
  address: string;
  port: number;
}

/** One app and the ways to reach it. */
export interface AppUnderTest {
  direct: Endpoint;
  tunnel: Endpoint;
  /** The Host both sides send: the tunnel's public host. */
  host: string;
}

/** What one side of an HTTP case observed. */
export interface HttpObservation {
  exchange: WireExchange;
  /** The parser refused the bytes, or the connection ended inside a response. */
  error: string | null;
  /** No complete response before the case's time limit (the connection may still be open). */
  timedOut: boolean;
  record: RequestRecord | null;
}

export interface HttpCase {
  kind: 'http';
  /** The request bytes as latin1; `{host}` stands for the tunnel's host. */
  request: string;
  /** Sent once a 100 Continue arrived, or after a second without one (as curl does); not after a final answer. */
  afterContinue?: string;
  /** One method per request on the connection (pipelining); default: the first request line's. */
  methods?: string[];
  /** Once the body received contains this, the app is told to finish the response (SSE). */
  release?: string;
  /** Downloads repeated to catch a failure that shows only sometimes. */
  repeat?: number;
  timeoutMs?: number;
}

export interface WebSocketCase {
  kind: 'websocket';
  path: string;
  protocols: string[];
  headers?: Record<string, string>;
  /** The client offers permessage-deflate (the app's /deflate route accepts it). */
  deflate?: boolean;
  send: { data: string; binary: boolean }[];
  close: { by: 'client' | 'server'; code: number; reason: string };
}

export function fill(template: string, host: string): Buffer {
  return Buffer.from(template.replaceAll('{host}', host), 'latin1');
}

/** Sends the case's bytes on a fresh connection and reads the answer. */
export async function httpExchange(endpoint: Endpoint, app: AppUnderTest, spec: HttpCase, releaseId: string): Promise<HttpObservation> {
  const methods = spec.methods ?? [spec.request.slice(0, spec.request.indexOf(' '))];
  const socket = connect(endpoint.port, endpoint.address);
  await once(socket, 'connect');
  // One growing buffer (doubling), so a 5 MB body costs no quadratic copying.
  let storage = Buffer.allocUnsafe(64 * 1024);
  let received = storage.subarray(0, 0);
  let released = spec.release === undefined;
  let closed = false;
  let error: string | null = null;
  let result: WireExchange = { interim: [], responses: [], incomplete: false, received: 0 };
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const parse = (): void => {
    try {
      const parsed = parseExchange(received, closed, methods);
      result = parsed.exchange;
      if (parsed.complete) done();
    } catch (caught) {
      if (!(caught instanceof WireError)) throw caught;
      error = caught.message;
      done();
    }
  };
  socket.on('data', (chunk: Buffer) => {
    if (received.length + chunk.length > storage.length) {
      const larger = Buffer.allocUnsafe(Math.max(storage.length * 2, received.length + chunk.length));
      received.copy(larger);
      storage = larger;
    }
    chunk.copy(storage, received.length);
    received = storage.subarray(0, received.length + chunk.length);
    if (!released && received.includes(spec.release!, 0, 'latin1')) {
      released = true;
      void fetch(`http://${hostPart(app.direct.address)}:${app.direct.port}/__release?id=${releaseId}`).then((response) => response.text());
    }
    parse();
  });
  socket.on('close', () => {
    closed = true;
    parse();
    done();
  });
  socket.on('error', () => {});
  socket.write(fill(spec.request, app.host));
  if (spec.afterContinue !== undefined) {
    const deadline = Date.now() + 1_000;
    while (result.interim.length === 0 && result.responses.length === 0 && !closed && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    if (!closed && result.responses.length === 0) socket.write(fill(spec.afterContinue, app.host));
  }
  const timeoutMs = spec.timeoutMs ?? 10_000;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    done();
  }, timeoutMs);
  await finished;
  clearTimeout(timer);
  socket.destroy();
  result.received = received.length;
  return { exchange: result, error, timedOut: timedOut && result.responses.length < methods.length, record: await lastRecord(app.direct) };
}

function hostPart(address: string): string {
  return address.includes(':') ? `[${address}]` : address;
}

/** The app's record of the last request it received (null when none arrived since the last look). */
export async function lastRecord(direct: Endpoint, peek = false): Promise<RequestRecord | null> {
  const response = await request(`http://${hostPart(direct.address)}:${direct.port}/__last${peek ? '?peek' : ''}`);
  return (await response.body.json()) as RequestRecord | null;
}

/** The comparison of one HTTP case: equal after the documented differences, or why not. */
export function compareHttp(direct: HttpObservation, tunnel: HttpObservation, host: string, spec: HttpCase): Set<DifferenceId> {
  const fired = new Set<DifferenceId>();
  assert.equal(direct.error, null, `the direct response did not parse: ${direct.error}`);
  assert.equal(direct.timedOut, false, 'the app did not answer directly');
  assert.equal(tunnel.error, null, `the tunnelled response did not parse: ${tunnel.error}`);
  assert.equal(tunnel.timedOut, false, `no complete answer through the tunnel (${tunnel.exchange.received} bytes received)`);
  assert.equal(tunnel.exchange.responses.length, direct.exchange.responses.length, 'as many responses through the tunnel as direct');
  const interim = normaliseInterim(direct.exchange, tunnel.exchange, fired);
  assert.deepEqual(interim.tunnel, interim.direct, 'the interim responses through the tunnel differ from direct');
  direct.exchange.responses.forEach((response, i) => {
    const compared = normaliseResponse(response, tunnel.exchange.responses[i]!, fired);
    assert.deepEqual(compared.tunnel, compared.direct, `response ${i + 1}: the tunnel's differs from direct beyond the documented differences`);
  });
  assert.ok(direct.record !== null, 'the app recorded the direct request');
  assert.ok(tunnel.record !== null, 'the request reached the app through the tunnel');
  const upgrade = /\r\nupgrade:/i.test(spec.request);
  const requests = normaliseRequest(direct.record, tunnel.record, { host, clientAddress: '127.0.0.1', upgrade }, fired);
  assert.deepEqual(requests.tunnel, requests.direct, 'what the app received through the tunnel differs from direct beyond the documented differences');
  return fired;
}

// ---- WebSockets -------------------------------------------------------------------------------------

export interface WebSocketObservation {
  /** The handshake response: 101, or the refusal. */
  status: number;
  headers: [string, string][];
  body: Buffer;
  protocol: string;
  /** Messages received, in order (messageData: hex, or a digest for a long one). */
  messages: { data: string; binary: boolean }[];
  /** The extensions the client ended up with (permessage-deflate's parameters, or ''). */
  extensions: string;
  close: { code: number; reason: string } | null;
  record: RequestRecord | null;
}

export async function webSocketExchange(endpoint: Endpoint, app: AppUnderTest, spec: WebSocketCase): Promise<WebSocketObservation> {
  const socket = new WebSocket(`ws://${hostPart(endpoint.address)}:${endpoint.port}${spec.path}`, spec.protocols, {
    headers: { Host: app.host, ...spec.headers },
    perMessageDeflate: spec.deflate === true,
    maxPayload: 64 * 1024 * 1024,
  });
  const observed: WebSocketObservation = { status: 0, headers: [], body: Buffer.alloc(0), protocol: '', extensions: '', messages: [], close: null, record: null };
  socket.on('upgrade', (response) => {
    observed.status = response.statusCode ?? 0;
    observed.headers = pairs(response.rawHeaders);
  });
  const outcome = await new Promise<'open' | 'refused'>((resolve, reject) => {
    socket.once('open', () => resolve('open'));
    socket.once('unexpected-response', (_request, response) => {
      observed.status = response.statusCode ?? 0;
      observed.headers = pairs(response.rawHeaders);
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        observed.body = Buffer.concat(chunks);
        resolve('refused');
      });
    });
    socket.once('error', reject);
  });
  if (outcome === 'refused') {
    socket.terminate();
    observed.record = await lastRecord(app.direct);
    return observed;
  }
  socket.on('error', () => {});
  observed.protocol = socket.protocol;
  observed.extensions = socket.extensions;
  const closed = new Promise<void>((resolve) =>
    socket.once('close', (code: number, reason: Buffer) => {
      observed.close = { code, reason: reason.toString('utf8') };
      resolve();
    }),
  );
  const echoed = new Promise<void>((resolve) => {
    socket.on('message', (data: Buffer, binary: boolean) => {
      observed.messages.push({ data: messageData(data), binary });
      if (observed.messages.length === spec.send.length) resolve();
    });
  });
  for (const message of spec.send) socket.send(message.binary ? Buffer.from(message.data, 'latin1') : message.data, { binary: message.binary });
  if (spec.send.length > 0) await echoed;
  if (spec.close.by === 'client') socket.close(spec.close.code, spec.close.reason);
  else socket.send(`close:${spec.close.code}:${spec.close.reason}`);
  await closed;
  // The app's side of the close may land a moment after ours.
  const deadline = Date.now() + 5_000;
  while ((await lastRecord(app.direct, true))?.close === undefined && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  observed.record = await lastRecord(app.direct);
  return observed;
}

function pairs(raw: string[]): [string, string][] {
  const list: [string, string][] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) list.push([raw[i]!, raw[i + 1]!]);
  return list;
}

export function compareWebSocket(direct: WebSocketObservation, tunnel: WebSocketObservation, host: string): Set<DifferenceId> {
  const fired = new Set<DifferenceId>();
  // The handshake is end to end: the 101's status line and fields are compared whole, the accept value
  // evened out (each run's client makes a new key).
  const view = (observed: WebSocketObservation): unknown => ({
    status: observed.status,
    headers: evenKeys(observed.headers),
    protocol: observed.protocol,
    extensions: observed.extensions,
    messages: observed.messages,
    close: observed.close,
  });
  assert.deepEqual(view(tunnel), view(direct), 'the WebSocket exchange through the tunnel differs from direct');
  assert.ok(direct.record !== null, 'the app recorded the direct upgrade');
  assert.ok(tunnel.record !== null, 'the upgrade reached the app through the tunnel');
  const requests = normaliseRequest(
    { ...direct.record, headers: evenKeys(direct.record.headers) },
    { ...tunnel.record, headers: evenKeys(tunnel.record.headers) },
    { host, clientAddress: '127.0.0.1', upgrade: true },
    fired,
  );
  assert.deepEqual(requests.tunnel, requests.direct, 'the upgrade request the app received through the tunnel differs from direct');
  return fired;
}

/** Sec-WebSocket-Key and -Accept differ per handshake by design (a new key each time). */
function evenKeys(fields: [string, string][]): [string, string][] {
  return fields.map(([name, value]): [string, string] => (/^sec-websocket-(key|accept)$/i.test(name) ? [name, '<per handshake>'] : [name, value]));
}
