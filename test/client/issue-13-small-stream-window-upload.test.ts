/**
 * Found while testing issue 13's capture change: an upload through an edge whose stream window is no
 * larger than what the client's body buffer hands undici in one read (64 KiB) hung until the request
 * timeout. The client returned credit from the body's read(), which Node calls before the chunk leaves
 * the buffer and not again until more is pushed; with the whole window pushed and read at once, no credit
 * ever went back. The default window (256 KiB) hid it. Each row: a 200 KiB upload, with a
 * Content-Length and chunked, must arrive whole.
 */
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { request } from 'undici';
import { createAccount, readBody, startClient, startEdge, startLocal, type LocalServer, type TestEdge } from '../helpers.js';

const BODY = Buffer.alloc(200 * 1024, 0x61);

for (const streamWindow of [16 * 1024, 64 * 1024]) {
  describe(`a ${streamWindow / 1024} KiB stream window`, () => {
    let target: TestEdge;
    let local: LocalServer;
    let started: Awaited<ReturnType<typeof startClient>>;

    before(async () => {
      target = await startEdge({ settings: { streamWindow }, requestTimeoutMs: 5_000 });
      const account = await createAccount(target);
      local = await startLocal((req, res) => {
        void readBody(req).then((body) => res.end(`read ${body.byteLength} ${body.equals(BODY)}`));
      });
      started = await startClient(target, account.token, local.port);
    });

    after(async () => {
      await started.client.close();
      await local.close();
      await target.close();
    });

    for (const framing of ['content-length', 'chunked'] as const) {
      test(`carries a 200 KiB upload (${framing})`, async () => {
        // A stream of unknown length goes out chunked.
        const body = framing === 'chunked' ? Readable.from([BODY.subarray(0, 70_000), BODY.subarray(70_000)]) : BODY;
        const response = await request(`${target.base}/upload`, { method: 'POST', headers: { host: started.host }, body });
        const text = await response.body.text();
        assert.equal(response.statusCode, 200, text);
        assert.equal(text, `read ${BODY.byteLength} true`);
      });
    }
  });
}
