/**
 * Issue 13, coalescing, at the frame level: a response whose head, body and end reach the client in one
 * loop turn leaves as ONE RESPONSE frame with the body inline and end=true, whatever its framing
 * (Content-Length, chunked, close-delimited). Before, only a Content-Length response did: a chunked one
 * left as RESPONSE end=false, DATA, DATA end=true. A response that arrives over several turns leaves as
 * it arrives: the head at once (before, a small Content-Length response was held to its end), then one
 * DATA frame per turn, however many chunks undici parsed in it.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Socket } from 'node:net';
import type { TunnelClient } from '../../src/client/tunnel-client.js';
import { waitFor } from '../helpers.js';
import { FrameEdge, type FrameRecord } from './frame-edge.js';
import { startRawLocal, type RawLocal } from './raw-local.js';

const BODY = 'b'.repeat(100);
/** A frame's worth of body (maxFrameBody), every byte telling its place. */
const TWO_READS = Buffer.from(Array.from({ length: 64 * 1024 }, (_, i) => (i * 7 + (i >> 8)) & 0xff));
let edge: FrameEdge;
let local: RawLocal;
let client: TunnelClient;
/** Resolves once the edge holds `count` frames of `stream`: the local server's previous write crossed. */
async function framesSeen(stream: number, count: number): Promise<void> {
  await waitFor(() => (edge.frames.get(stream)?.length ?? 0) >= count, 10_000, `frame ${count} of stream ${stream}`);
}

/** The stream a slow script paces itself by: its request's `?stream=` (the test knows the id first). */
function streamOf(head: Buffer): number {
  return Number(/[?&]stream=([0-9]+)/.exec(head.toString('latin1'))![1]);
}

function chunk(text: string): string {
  return `${text.length.toString(16)}\r\n${text}\r\n`;
}

before(async () => {
  local = await startRawLocal({
    '/length': (socket) => {
      socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${BODY.length}\r\n\r\n${BODY}`);
      return 'keep';
    },
    '/two-reads': (socket) => {
      // Head and body in one write, larger than one read of the client (64 KiB): read twice in one turn.
      socket.write(Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\ncontent-length: ${TWO_READS.length}\r\n\r\n`), TWO_READS]));
      return 'keep';
    },
    '/chunked': (socket) => {
      socket.write(`HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n${chunk(BODY)}0\r\n\r\n`);
      return 'keep';
    },
    '/close-delimited': (socket) => {
      socket.end(`HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n${BODY}`);
      return 'done';
    },
    '/slow-length': (socket, head) => {
      void pace(socket, streamOf(head), `HTTP/1.1 200 OK\r\ncontent-length: 30\r\n\r\n`, ['a'.repeat(10), 'b'.repeat(10), 'c'.repeat(10)], '');
      return 'done';
    },
    '/slow-chunked': (socket, head) => {
      // The second write carries three chunks: undici hands them over one by one in one turn.
      void pace(socket, streamOf(head), 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n', [chunk('a'.repeat(10)), chunk('b'.repeat(10)) + chunk('c'.repeat(10)) + chunk('d'.repeat(10))], '0\r\n\r\n');
      return 'done';
    },
  });
  edge = await FrameEdge.start();
  client = await edge.client(local.port);
});

after(async () => {
  await client?.close();
  await edge?.close();
  await local?.close();
});

/** Writes the head, then each piece once the frame of the write before reached the edge. */
async function pace(socket: Socket, stream: number, head: string, pieces: string[], tail: string): Promise<void> {
  socket.write(head);
  for (let i = 0; i < pieces.length; i++) {
    await framesSeen(stream, i + 1);
    socket.write(pieces[i]!);
  }
  if (tail !== '') await framesSeen(stream, pieces.length + 1);
  socket.end(tail);
}

/** A request whose id is also in its query, for the slow scripts. */
function pacedRequest(path: string): ReturnType<FrameEdge['requestWithId']> {
  const id = edge.nextStreamId;
  return edge.requestWithId('GET', `${path}?stream=${id}`, ['host', 'app.localhost']);
}

for (const path of ['/length', '/chunked']) {
  test(`a whole ${path.slice(1)} response of one turn is one RESPONSE frame with its body and end=true`, { timeout: 20_000 }, async () => {
    const { id, result } = edge.requestWithId('GET', path, ['host', 'app.localhost']);
    const answer = await result;
    assert.equal(answer.status, 200);
    assert.equal(answer.body.toString(), BODY);
    assert.deepEqual(edge.frames.get(id), [{ type: 'RESPONSE', end: true, bytes: BODY.length }]);
  });
}

test('a body read in two pieces in one turn is one RESPONSE frame, its pieces copied into it in order', { timeout: 20_000 }, async () => {
  const { id, result } = edge.requestWithId('GET', '/two-reads', ['host', 'app.localhost']);
  const answer = await result;
  assert.equal(answer.status, 200);
  assert.ok(answer.body.equals(TWO_READS), 'the body byte for byte');
  assert.deepEqual(edge.frames.get(id), [{ type: 'RESPONSE', end: true, bytes: TWO_READS.length }]);
});

test('a close-delimited response leaves as RESPONSE with its body inline, then the end alone', { timeout: 20_000 }, async () => {
  // Its end is the local server's FIN, which libuv reports in the turn after the bytes (a short read
  // ends a read loop): the end cannot be in the head's turn, and nothing waits for it.
  const { id, result } = edge.requestWithId('GET', '/close-delimited', ['host', 'app.localhost']);
  const answer = await result;
  assert.equal(answer.body.toString(), BODY);
  assert.deepEqual(edge.frames.get(id), [
    { type: 'RESPONSE', end: false, bytes: BODY.length },
    { type: 'DATA', end: true, bytes: 0 },
  ]);
});

test('a slow Content-Length response: the head leaves at once, then one DATA frame per write', { timeout: 20_000 }, async () => {
  const { id, result } = pacedRequest('/slow-length');
  const answer = await result;
  assert.equal(answer.body.toString(), 'a'.repeat(10) + 'b'.repeat(10) + 'c'.repeat(10));
  const frames = edge.frames.get(id)!;
  // The last piece completes the declared length: it carries the end.
  const expected: FrameRecord[] = [
    { type: 'RESPONSE', end: false, bytes: 0 },
    { type: 'DATA', end: false, bytes: 10 },
    { type: 'DATA', end: false, bytes: 10 },
    { type: 'DATA', end: true, bytes: 10 },
  ];
  assert.deepEqual(frames, expected);
});

test('a slow chunked response: the head at once, and the chunks parsed in one turn leave in one DATA frame', { timeout: 20_000 }, async () => {
  const { id, result } = pacedRequest('/slow-chunked');
  const answer = await result;
  assert.equal(answer.body.toString(), 'a'.repeat(10) + 'b'.repeat(10) + 'c'.repeat(10) + 'd'.repeat(10));
  const frames = edge.frames.get(id)!;
  assert.deepEqual(frames, [
    { type: 'RESPONSE', end: false, bytes: 0 },
    { type: 'DATA', end: false, bytes: 10 },
    { type: 'DATA', end: false, bytes: 30 },
    { type: 'DATA', end: true, bytes: 0 },
  ]);
});
