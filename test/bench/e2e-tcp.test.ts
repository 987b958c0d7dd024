/**
 * bench/e2e/tcp.ts, the measurement behind `npm run bench`'s tcp phase and bench/tcp-transfer.ts: every
 * byte of a transfer each way is counted at the other end, round trips are timed on one connection, and
 * a path that loses bytes fails the measurement instead of reporting a rate.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type AddressInfo } from 'node:net';
import { test } from 'node:test';
import { measureTcpPath, TcpLocal, tcpPathLines } from '../../bench/e2e/tcp.js';

const TOTAL = 2 * 1024 * 1024;

test('a transfer each way and round trips straight to the local server', async () => {
  const local = new TcpLocal(TOTAL);
  const port = await local.listen();
  try {
    const result = await measureTcpPath('direct', port, local, TOTAL, 50);
    assert.ok(result.uploadMiBs > 0 && result.downloadMiBs > 0);
    assert.ok(result.p50Us > 0 && result.p50Us <= result.p99Us);
    const lines = tcpPathLines(result, TOTAL);
    assert.equal(lines.length, 3);
    assert.match(lines[0]!, /^direct upload 2 MiB in [0-9.]+ s \([0-9]+ MiB\/s\)$/);
  } finally {
    local.close();
  }
});

test('a path that delivers less than was sent fails the measurement', async () => {
  const local = new TcpLocal(TOTAL);
  const localPort = await local.listen();
  // A relay that passes the first 1 MiB of an upload and drops the rest.
  const lossy = createServer({ allowHalfOpen: true }, (client) => {
    const upstream = connect({ port: localPort, host: '127.0.0.1', allowHalfOpen: true });
    let passed = 0;
    client.on('data', (chunk: Buffer) => {
      const room = Math.max(0, 1024 * 1024 - passed);
      if (room > 0) upstream.write(chunk.subarray(0, room));
      passed += chunk.byteLength;
    });
    client.on('end', () => upstream.end());
    upstream.pipe(client);
  });
  lossy.listen(0, '127.0.0.1');
  await once(lossy, 'listening');
  try {
    await assert.rejects(measureTcpPath('lossy', (lossy.address() as AddressInfo).port, local, TOTAL, 10), /lossy upload: 1048576 of 2097152 bytes arrived/);
  } finally {
    lossy.close();
    local.close();
  }
});
