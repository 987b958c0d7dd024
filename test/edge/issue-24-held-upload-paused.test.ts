/**
 * Issue 23's held uploads on issue 24's listener: a body to hold is written to LMDB in 16 KiB pieces, and
 * while a piece is being written the spool says "no room" (`HeldBodySpool.write` returns false); the
 * public socket must then stop being read (`ServerExchange.pauseBody`) until the spool has room again.
 * A sender on loopback delivers a 4 MiB body far faster than LMDB commits pieces: without the pause the
 * spool would take every read and hold most of the body in pieces waiting to be written. The edge's own
 * gauge (`burrow_queue_upload_bytes_buffered`), read between every loop turn while the body arrives,
 * stays within a few pieces and one socket read; the event is stored whole and answered 202.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { test } from 'node:test';
import type { Gauge } from 'prom-client';
import { call, createAccount, startEdge, waitFor } from '../helpers.js';

const BODY = 4 * 1024 * 1024;
/** The piece being filled, a spare, pieces in flight for one socket read (64 KiB), with room to spare. */
const HELD_BOUND = 256 * 1024;

test('a fast held upload is read only as fast as its pieces are stored: the spool never holds much of the body', async () => {
  const edge = await startEdge({ admin: { host: '127.0.0.1', port: 0 }, offlineQueue: { maxEventBody: 8 * 1024 * 1024 } });
  try {
    const account = await createAccount(edge, 'PRO');
    const reserved = await call(edge, 'POST', '/api/v1/reserved-subdomains', { token: account.token, body: { subdomain: 'fast-hooks', offline: 'queue' } });
    assert.equal(reserved.status, 201, reserved.text);
    const gauge = edge.edge.observer.metrics!.registry.getSingleMetric('burrow_queue_upload_bytes_buffered') as Gauge;
    let peak = 0;
    let sampling = true;
    const sample = async (): Promise<void> => {
      while (sampling) {
        const value = (await gauge.get()).values[0]?.value ?? 0;
        peak = Math.max(peak, value);
        await new Promise((resolve) => setImmediate(resolve));
      }
    };
    const sampler = sample();

    const socket = connect(edge.port, '127.0.0.1');
    await once(socket, 'connect');
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
    socket.write(`POST /hook HTTP/1.1\r\nHost: fast-hooks.localhost:${edge.port}\r\nContent-Type: application/octet-stream\r\nContent-Length: ${BODY}\r\nConnection: close\r\n\r\n`);
    socket.write(Buffer.alloc(BODY, 0x61));
    await waitFor(() => answer.includes('\r\n\r\n'), 30_000, 'the answer to the held upload');
    sampling = false;
    await sampler;
    socket.destroy();

    assert.match(answer, /^HTTP\/1\.1 202 /, answer);
    const eventId = /burrow-event-id: (\S+)/i.exec(answer)?.[1];
    const listed = await call(edge, 'GET', '/api/v1/queue?subdomain=fast-hooks', { token: account.token });
    assert.equal(listed.status, 200, listed.text);
    const held = (listed.json.queue as { id: string; size: number }[]).find((event) => event.id === eventId);
    assert.equal(held?.size, BODY, listed.text);
    assert.ok(peak > 0, 'the gauge saw the upload');
    assert.ok(peak <= HELD_BOUND, `the spool held ${peak} bytes of a ${BODY}-byte body at once (bound ${HELD_BOUND})`);
  } finally {
    await edge.close();
  }
});
