/**
 * A slow consumer keeps the local hop's memory bounded: while the exchange is paused at most the rest of
 * one socket read reaches the handler, the socket's own buffer stays under its high-water mark plus one
 * read, and the server is the one that waits (its writes report backpressure). Checked in bytes, never
 * in time; the body still arrives whole.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { LocalHop } from '../../../src/client/local-hop/pool.js';
import { localTarget } from '../../../src/client/routes.js';
import { Recorder } from './record.js';

const TOTAL = 32 * 1024 * 1024;
const PIECE = Buffer.alloc(256 * 1024, 0x62);
/** One socket read (libuv reads at most 64 KiB at a time). */
const ONE_READ = 64 * 1024;

test('a paused exchange stops the socket: bounded bytes here, the server waits', { timeout: 60_000 }, async () => {
  let serverBlocked = 0;
  const server = createServer((_req, res: ServerResponse) => {
    res.writeHead(200, { 'Content-Length': String(TOTAL) });
    let sent = 0;
    const pump = (): void => {
      while (sent < TOTAL) {
        sent += PIECE.length;
        if (!res.write(PIECE)) {
          serverBlocked++;
          res.once('drain', pump);
          return;
        }
      }
      res.end();
    };
    pump();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const target = localTarget((server.address() as AddressInfo).port, '127.0.0.1');
  const hop = new LocalHop([target]);
  try {
    const recorder = new Recorder();
    const exchange = hop.pool(target).request({ method: 'GET', target: '/big', fields: ['Host', 'x'] }, null, true, recorder);
    let paused = false;
    let held = 0;
    let sincePause = 0;
    let maxSincePause = 0;
    let maxBuffered = 0;
    let pauses = 0;
    const release = (): void => {
      maxBuffered = Math.max(maxBuffered, exchange.bufferedResponseBytes);
      held = 0;
      paused = false;
      exchange.resume();
    };
    recorder.onChunk = (chunk) => {
      if (paused) {
        sincePause += chunk.byteLength;
        maxSincePause = Math.max(maxSincePause, sincePause);
        return;
      }
      held += chunk.byteLength;
      if (held >= 1024 * 1024) {
        paused = true;
        pauses++;
        sincePause = 0;
        exchange.pause();
        // The consumer is slow: it takes what it holds later (how much later does not matter).
        setTimeout(release, 15);
      }
    };
    const outcome = await recorder.done;
    assert.equal(outcome.error, null, outcome.error?.message);
    assert.equal(outcome.body.length, TOTAL);
    assert.ok(pauses >= 16, `${pauses} pauses`);
    assert.ok(maxSincePause <= ONE_READ, `${maxSincePause} bytes reached the handler while paused (at most the rest of one read)`);
    assert.ok(maxBuffered <= 16 * 1024 + ONE_READ, `${maxBuffered} bytes sat in the paused socket's buffer`);
    assert.ok(serverBlocked > 0, 'the server felt the backpressure');
  } finally {
    hop.close();
    server.closeAllConnections();
    server.close();
  }
});
