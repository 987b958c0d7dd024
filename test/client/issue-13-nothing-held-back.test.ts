/**
 * Issue 13, "nothing held back", end to end: a slow local Node server flushes its head, then writes its
 * body in pieces, each only once the public client (a raw socket through the real edge and the real
 * client) holds the piece before it. Before, the client held a response with a Content-Length of at
 * most 64 KiB until its body was complete, so the public client saw nothing until the end (here: the
 * server waits forever, and the test times out).
 *
 * With a Content-Length the public client sees the whole head before the server writes its first body
 * byte. Without one the public response is chunked, and uWebSockets.js 20.30 completes a chunked head
 * only with its first body byte (docs/protocol.md section 6): there the head arrives with the first
 * piece, and every piece still arrives before the server writes the next.
 */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { createAccount, startClient, startEdge, startLocal, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';
import type { TunnelClient } from '../../src/client/tunnel-client.js';

/** Letters outside hex, so chunk-size lines never count as body bytes. */
const LETTERS = 'KLMNOPQRSTUVWXYZ';

let target: TestEdge;
let account: TestAccount;
let local: LocalServer;
let client: TunnelClient;
let host = '';

/** Lets the local server take its next step: write a piece, or end. */
let permits = 0;
let waiting: (() => void) | null = null;
let headWritten = false;

function release(): void {
  const next = waiting;
  waiting = null;
  if (next !== null) next();
  else permits++;
}

function nextStep(): Promise<void> {
  if (permits > 0) {
    permits--;
    return Promise.resolve();
  }
  return new Promise((resolve) => (waiting = resolve));
}

before(async () => {
  target = await startEdge();
  account = await createAccount(target, 'PRO');
  local = await startLocal((req, res) => {
    const url = new URL(req.url!, 'http://local');
    const pieces = Number(url.searchParams.get('pieces'));
    const size = Number(url.searchParams.get('size'));
    const headers: Record<string, string> = { 'content-type': 'application/octet-stream' };
    if (url.searchParams.get('length') === 'yes') headers['content-length'] = String(pieces * size);
    res.writeHead(200, headers);
    res.flushHeaders();
    headWritten = true;
    void (async () => {
      for (let i = 0; i < pieces; i++) {
        await nextStep();
        res.write(Buffer.alloc(size, LETTERS.charCodeAt(i)));
      }
      await nextStep();
      res.end();
    })();
  });
  const started = await startClient(target, account.token, local.port);
  client = started.client;
  host = started.host;
});

after(async () => {
  await client?.close();
  await local?.close();
  await target?.close();
});

/** A public client on a raw socket: everything it received, as Latin-1. */
function publicRequest(path: string): { socket: Socket; received: () => string } {
  let text = '';
  const socket = connect(target.port, '127.0.0.1');
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => (text += chunk));
  socket.on('error', () => {});
  socket.write(`GET ${path} HTTP/1.1\r\nhost: ${host}\r\n\r\n`);
  return { socket, received: () => text };
}

function bodyOf(text: string): string {
  const end = text.indexOf('\r\n\r\n');
  return end < 0 ? '' : text.slice(end + 4);
}

function count(text: string, letter: string): number {
  let n = 0;
  for (let i = text.indexOf(letter); i >= 0; i = text.indexOf(letter, i + 1)) n++;
  return n;
}

const cases = [
  { name: 'small (100 bytes in 4 pieces)', pieces: 4, size: 25 },
  { name: 'larger (60,000 bytes in 3 pieces)', pieces: 3, size: 20_000 },
];

for (const { name, pieces, size } of cases) {
  for (const length of [true, false]) {
    test(`a slow ${length ? 'Content-Length' : 'chunked'} response, ${name}: the head and each piece reach the public client as written`, { timeout: 30_000 }, async () => {
      permits = 0;
      waiting = null;
      headWritten = false;
      const { socket, received } = publicRequest(`/slow?pieces=${pieces}&size=${size}&length=${length ? 'yes' : 'no'}`);
      try {
        await waitFor(() => headWritten, 10_000, 'the local server to flush its head');
        if (length) {
          // No body byte is written yet: the head must arrive alone.
          await waitFor(() => received().includes('\r\n\r\n'), 10_000, 'the head before any body byte');
          assert.match(received(), /^HTTP\/1\.1 200 /);
          assert.match(received(), new RegExp(`content-length: ${pieces * size}\\r\\n`, 'i'));
          assert.equal(bodyOf(received()), '');
        }
        for (let i = 0; i < pieces; i++) {
          release();
          const letter = LETTERS[i]!;
          // The next piece is written only once this one is at the public client.
          await waitFor(() => count(bodyOf(received()), letter) >= size, 10_000, `piece ${i + 1} of ${pieces} at the public client`);
        }
        release();
        if (length) await waitFor(() => bodyOf(received()).length >= pieces * size, 10_000, 'the whole body');
        else await waitFor(() => received().endsWith('0\r\n\r\n'), 10_000, 'the last chunk');
        const body = bodyOf(received());
        if (length) assert.equal(body.length, pieces * size);
        else assert.match(received(), /transfer-encoding: chunked\r\n/i);
        for (let i = 0; i < pieces; i++) assert.equal(count(body, LETTERS[i]!), size);
      } finally {
        socket.destroy();
      }
    });
  }
}
