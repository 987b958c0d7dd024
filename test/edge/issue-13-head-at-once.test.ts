/**
 * Issue 13, "nothing held back", the edge's part: a RESPONSE with end=false and a Content-Length
 * reaches the public client at once, status and headers before any body byte. Before, the edge wrote
 * the head only together with the first body byte, so a client waiting for headers (long poll, a slow
 * download) saw nothing. uWebSockets.js 20.30 can flush a head alone only for a known length (see
 * docs/protocol.md section 6); a chunked head still leaves with its first byte.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { encode, type OpenFrame } from '../../src/protocol/codec.js';
import { FrameType } from '../../src/protocol/constants.js';
import { createAccount, startClient, startEdge, startLocal, type TestAccount, type TestEdge } from '../helpers.js';
import { openRawTunnel } from './raw-tunnel.js';

let target: TestEdge;
let account: TestAccount;

before(async () => {
  target = await startEdge();
  account = await createAccount(target, 'PRO');
});

after(async () => {
  await target?.close();
});

test('a head without a body byte reaches the public client at once (raw tunnel)', { timeout: 20_000 }, async () => {
  const { tunnel, ready } = await openRawTunnel(target, account.token);
  try {
    const answer = request(`${target.base}/slow`, { headers: { host: `${ready[2]}.localhost:${target.port}` } });
    const open = await tunnel.next<OpenFrame>(FrameType.OPEN);
    tunnel.send(encode([FrameType.RESPONSE, open[1], 200, '', ['content-length', '5', 'x-flushed', 'yes'], null, false]));
    // The body is sent only once the public client holds the head: before the fix this never resolved.
    const response = await answer;
    assert.equal(response.statusCode, 200);
    assert.equal(response.headers['x-flushed'], 'yes');
    assert.equal(response.headers['content-length'], '5');
    tunnel.send(encode([FrameType.DATA, open[1], Buffer.from('hello'), true]));
    assert.equal(await response.body.text(), 'hello');
  } finally {
    tunnel.ws.close(1000);
    await tunnel.closed;
  }
});

test('a slow local server\'s flushed head reaches the public client before its body (real client)', { timeout: 20_000 }, async () => {
  const size = 100_000;
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  const local = await startLocal((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(size) });
    res.flushHeaders();
    void released.then(() => res.end(Buffer.alloc(size, 0x62)));
  });
  const started = await startClient(target, account.token, local.port);
  try {
    const response = await request(`${target.base}/download`, { headers: { host: started.host } });
    assert.equal(response.statusCode, 200);
    assert.equal(response.headers['content-length'], String(size));
    release();
    const body = Buffer.from(await response.body.arrayBuffer());
    assert.equal(body.byteLength, size);
  } finally {
    release();
    await started.client.close();
    await local.close();
  }
});
