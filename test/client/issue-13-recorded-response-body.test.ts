/**
 * What the client records of a response for the inspector, now that it records the buffer it frames
 * (a body that came in several chunks in one loop turn was joined twice: once for the frame, once for
 * the recording). Each case compares the recorded body with what the public client received, through a
 * real edge, the real client and a real Node server: several writes in one turn, writes over several
 * turns, the recording limit, and a local server that dies halfway through a body (its bytes are
 * recorded whether they were framed before the failure or, caught in the same turn, never framed).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { bodyLength, wholeBody } from '../../src/capture-buffer.js';
import type { Exchange } from '../../src/client/exchange.js';
import { ExchangeRing } from '../../src/inspector/ring.js';
import { exchangeJson } from '../../src/inspector/json.js';
import type { TunnelClient } from '../../src/client/tunnel-client.js';
import { call, createAccount, startClient, startEdge, startLocal, waitFor, type LocalServer, type TestEdge } from '../helpers.js';

const RECORD_LIMIT = 100 * 1024;

let target: TestEdge;
let local: LocalServer;
let client: TunnelClient;
let host = '';
const exchanges: Exchange[] = [];

function letters(letter: string, size: number): Buffer {
  return Buffer.alloc(size, letter);
}

before(async () => {
  target = await startEdge();
  const account = await createAccount(target);
  local = await startLocal((req, res) => {
    if (req.url === '/one-turn') {
      // Three writes in one turn arrive as several chunks that undici hands over in one turn.
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.write(letters('a', 20_000));
      res.write(letters('b', 30_000));
      res.end(letters('c', 14_000));
    } else if (req.url === '/turns') {
      res.writeHead(200, { 'content-length': '6' });
      res.write('abc');
      setTimeout(() => res.end('def'), 50);
    } else if (req.url === '/upload') {
      req.resume();
      req.on('end', () => res.end('taken'));
    } else if (req.url === '/over-limit') {
      res.end(letters('z', RECORD_LIMIT + 5_000));
    } else if (req.url === '/dies-later' || req.url === '/dies-at-once') {
      res.writeHead(200, { 'content-length': '1000' });
      res.write('partial body');
      // At once or a little later: the connection's end right behind the bytes, or after a pause.
      if (req.url === '/dies-at-once') res.socket?.end();
      else setTimeout(() => res.socket?.destroy(), 20);
    }
  });
  ({ client, host } = await startClient(target, account.token, local.port, { recordLimit: RECORD_LIMIT }));
  client.on('exchange', (exchange: Exchange) => exchanges.push(exchange));
});

after(async () => {
  await client.close();
  await local.close();
  await target.close();
});

async function exchangeFor(path: string): Promise<Exchange> {
  await waitFor(() => exchanges.some((exchange) => exchange.path === path), 5_000, `the exchange of ${path}`);
  return exchanges.find((exchange) => exchange.path === path)!;
}

test('a body written in several pieces within one turn is recorded whole, as the public client got it', async () => {
  const result = await call(target, 'GET', '/one-turn', { host });
  assert.equal(result.status, 200);
  const expected = Buffer.concat([letters('a', 20_000), letters('b', 30_000), letters('c', 14_000)]);
  assert.equal(result.text, expected.toString('latin1'));
  const exchange = await exchangeFor('/one-turn');
  assert.deepEqual(wholeBody(exchange.responseBody), expected);
  assert.equal(exchange.responseBodySize, expected.byteLength);
  assert.equal(exchange.responseTruncated, false);
});

test('a body that crossed the tunnel in several frames is kept in them, not joined, until something reads it', async () => {
  const result = await call(target, 'POST', '/upload', { host, rawBody: letters('u', 200_000) });
  assert.equal(result.status, 200);
  const uploaded = await exchangeFor('/upload');
  assert.ok(!Buffer.isBuffer(uploaded.requestBody) && (uploaded.requestBody?.length ?? 0) > 1, 'the request body as the frames it came in');
  assert.equal(bodyLength(uploaded.requestBody), RECORD_LIMIT);
  // What the inspector counts and shows of it is the body, whole.
  const entry = new ExchangeRing().add(uploaded);
  assert.ok(entry.size >= RECORD_LIMIT && entry.size < RECORD_LIMIT + 4_096, `counted by its bytes (${entry.size})`);
  assert.deepEqual(wholeBody(uploaded.requestBody), letters('u', RECORD_LIMIT));
  assert.equal(exchangeJson(uploaded).request.body, letters('u', RECORD_LIMIT).toString('latin1'));
  assert.equal(exchangeJson(uploaded).request.truncated, true);
});

test('a body written over several turns is recorded in order', async () => {
  const result = await call(target, 'GET', '/turns', { host });
  assert.equal(result.text, 'abcdef');
  const exchange = await exchangeFor('/turns');
  assert.equal(wholeBody(exchange.responseBody)?.toString('latin1'), 'abcdef');
  assert.equal(exchange.responseBodySize, 6);
});

test('a body over the recording limit is recorded up to it and marked truncated; the traffic is whole', async () => {
  const result = await call(target, 'GET', '/over-limit', { host });
  assert.equal(result.text.length, RECORD_LIMIT + 5_000);
  const exchange = await exchangeFor('/over-limit');
  assert.deepEqual(wholeBody(exchange.responseBody), letters('z', RECORD_LIMIT));
  assert.equal(exchange.responseBodySize, RECORD_LIMIT + 5_000);
  assert.equal(exchange.responseTruncated, true);
});

for (const path of ['/dies-later', '/dies-at-once']) {
  test(`a local server that dies halfway through a body (${path.slice(1)}): the exchange fails and records the bytes it sent`, async () => {
    await call(target, 'GET', path, { host }).catch(() => undefined);
    const exchange = await exchangeFor(path);
    assert.notEqual(exchange.error, null);
    assert.equal(wholeBody(exchange.responseBody)?.toString('latin1'), 'partial body');
    assert.equal(exchange.responseBodySize, 'partial body'.length);
  });
}
