/**
 * Regression: a fast-path request body that does not fit
 * the connection credit left must still go out, as DATA, once the client returns credit.
 *
 * EdgeHttpStream.sendOpen fell back to OPEN(end=false) and queued the body, but only joined the
 * session's blocked set when the connection credit was exactly 0. With some credit left (less than the
 * body), nothing ever drained the queue and the request ended in 504. It now sends what the credit
 * allows at once and waits for the rest like any streamed body.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { encode, type DataFrame, type OpenFrame } from '../../src/protocol/codec.js';
import { FrameType } from '../../src/protocol/constants.js';
import { createAccount, startEdge } from '../helpers.js';
import { openRawTunnel } from './raw-tunnel.js';

test(
  'a request body that did not fit the remaining connection credit goes out once credit returns',
  async () => {
    const target = await startEdge({ settings: { connectionWindow: 100_000 }, requestTimeoutMs: 3_000 });
    try {
      const account = await createAccount(target, 'PRO');
      const { tunnel, ready } = await openRawTunnel(target, account.token);
      const host = `${ready[2]}.localhost:${target.port}`;
      const post = (size: number) =>
        request(`${target.base}/upload`, { method: 'POST', headers: { host }, body: Buffer.alloc(size, 0x62) }).then(
          async (res) => ({ status: res.statusCode, text: await res.body.text() }),
          (error: Error) => ({ status: 0, text: error.message }),
        );

      // 60 000 of the 100 000 bytes of connection credit go inline with the first OPEN.
      const first = post(60_000);
      const open1 = await tunnel.next<OpenFrame>(FrameType.OPEN);
      assert.equal(open1[7]?.byteLength, 60_000);
      // 50 000 do not fit the 40 000 left: OPEN without the body, the body to follow as DATA.
      const second = post(50_000);
      const open2 = await tunnel.next<OpenFrame>(FrameType.OPEN);
      assert.equal(open2[7], null);
      assert.equal(open2[8], false);

      // The client writes out the first body and returns its connection credit.
      tunnel.send(encode([FrameType.WINDOW, 0, 60_000]));
      tunnel.send(encode([FrameType.RESPONSE, open1[1], 200, '', ['content-length', '2'], Buffer.from('ok'), true]));
      assert.equal((await first).status, 200);

      let received = 0;
      for (;;) {
        const next = await Promise.race([
          tunnel.next<DataFrame>(FrameType.DATA).then((frame) => ({ frame })),
          second.then((response) => ({ response })),
        ]);
        if ('response' in next) assert.fail(`the request ended with ${next.response.status} before its body went through`);
        assert.equal(next.frame[1], open2[1]);
        received += next.frame[2]?.byteLength ?? 0;
        if (next.frame[3]) break;
      }
      assert.equal(received, 50_000);
      tunnel.send(encode([FrameType.RESPONSE, open2[1], 201, '', ['content-length', '2'], Buffer.from('ok'), true]));
      assert.equal((await second).status, 201);
      tunnel.ws.close(1000);
      await tunnel.closed;
    } finally {
      await target.close();
    }
  },
);
