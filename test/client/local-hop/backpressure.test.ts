/**
 * Backpressure both ways keeps the local hop's memory bounded. A slow consumer of the response: while
 * the exchange is paused at most the rest of one socket read reaches the handler, the socket's own
 * buffer stays under its high-water mark plus one read, and the server is the one that waits (its
 * writes report backpressure). A slow reader of the request: write() refuses once the socket is full
 * and onRequestDrain says when it takes more, also for a request still waiting for a connection.
 * Checked in bytes, never in time; every body arrives whole.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type RequestListener, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { localTarget, type LocalTarget } from '../../../src/client/routes.js';
import { readBody, waitFor } from '../../helpers.js';
import { Recorder, withPool } from './record.js';

/** A Node server with `listener` on a loopback port, and its target. */
async function serve(listener: RequestListener): Promise<{ target: LocalTarget; close(): void }> {
  const server = createServer(listener);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    target: localTarget((server.address() as AddressInfo).port, '127.0.0.1'),
    close() {
      server.closeAllConnections();
      server.close();
    },
  };
}

const TOTAL = 32 * 1024 * 1024;
const PIECE = Buffer.alloc(256 * 1024, 0x62);
/** One socket read (libuv reads at most 64 KiB at a time). */
const ONE_READ = 64 * 1024;

test('a paused exchange stops the socket: bounded bytes here, the server waits', { timeout: 60_000 }, async () => {
  let serverBlocked = 0;
  const server = await serve((_req, res: ServerResponse) => {
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
  await withPool(server.target, async (pool) => {
    const recorder = new Recorder();
    const exchange = pool.request({ method: 'GET', target: '/big', fields: ['Host', 'x'] }, null, true, recorder);
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
  }).finally(() => server.close());
});

test('request body: write() says when the local socket is full, onRequestDrain when it takes more; nothing is lost', { timeout: 60_000 }, async () => {
  const UPLOAD = 16 * 1024 * 1024;
  const CHUNK = Buffer.alloc(64 * 1024, 0x75);
  let received = 0;
  const server = await serve((req, res) => {
    // A slow reader: the upload waits in the kernel's buffers, then in the socket's.
    req.pause();
    const read = (): void => {
      let chunk: Buffer | null;
      while ((chunk = req.read(16 * 1024) as Buffer | null) !== null) received += chunk.length;
      if (!req.readableEnded) setTimeout(read, 2);
    };
    req.once('end', () => res.end(String(received)));
    setTimeout(read, 50);
  });
  await withPool(server.target, async (pool) => {
    const recorder = new Recorder();
    const exchange = pool.request({ method: 'PUT', target: '/upload', fields: ['Host', 'x', 'Content-Length', String(UPLOAD)] }, null, false, recorder);
    // The caller's side of credit: it writes while allowed and waits for the drain otherwise.
    let written = 0;
    let refused = 0;
    let mostOutstanding = 0;
    while (written < UPLOAD) {
      const accepted = exchange.write(CHUNK);
      written += CHUNK.length;
      if (!accepted) {
        refused++;
        const drains = recorder.drains;
        mostOutstanding = Math.max(mostOutstanding, exchange.bufferedRequestBytes);
        while (recorder.drains === drains) await new Promise((resolve) => setImmediate(resolve));
      }
    }
    exchange.end();
    const outcome = await recorder.done;
    assert.equal(outcome.body.toString(), String(UPLOAD), 'the server read every byte');
    assert.ok(refused > 0, 'the socket filled at least once');
    assert.ok(mostOutstanding <= 16 * 1024 + CHUNK.length + 64 * 1024, `${mostOutstanding} bytes waited in the socket at most`);
  }).finally(() => server.close());
});

test('a request waiting for a connection holds its body (write() false) until it has one, then drains', { timeout: 30_000 }, async () => {
  let release: (() => void) | null = null;
  const server = await serve((req, res) => {
    void readBody(req).then((body) => {
      if (req.url === '/first') release = () => res.end('first');
      else res.end(`second ${body.length}`);
    });
  });
  await withPool(
    server.target,
    async (pool) => {
      const first = new Recorder();
      pool.request({ method: 'GET', target: '/first', fields: ['Host', 'x'] }, null, true, first);
      await waitFor(() => release !== null, 5_000, 'the first request at the server');
      const second = new Recorder();
      const exchange = pool.request({ method: 'POST', target: '/second', fields: ['Host', 'x'] }, null, false, second);
      assert.equal(pool.stats.queued, 1);
      assert.equal(exchange.write(Buffer.from('waits for a connection')), false);
      exchange.end();
      assert.equal(second.drains, 0);
      release!();
      assert.equal((await first.done).body.toString(), 'first');
      assert.equal((await second.done).body.toString(), 'second 22');
      assert.equal(second.drains, 1, 'the held bytes went out: their credit can go back');
    },
    { connectionsPerTarget: 1 },
  ).finally(() => server.close());
});
