/**
 * Issue 25: the local hop's plain TCP connections read into one buffer shared by the process
 * (src/client/local-hop/connection.ts, SHARED_READ). Body chunks reach the handler as copies from llhttp;
 * what else outlives a read must be copied too: the bytes a local server sent right after its 101, and
 * the bytes that reach the upgraded socket's new owner later. Other connections' reads land in the
 * shared buffer in between, and the kept bytes must be as sent.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { localTarget } from '../../../src/client/routes.js';
import { send, withPool } from './record.js';

const HOST = ['Host', 'app.example'];
let server: Server;
let port: number;
/** The upgraded connection's server side, to send later bytes on. */
let upgraded: Socket | null = null;

before(async () => {
  server = createServer((socket) => {
    socket.once('data', (data: Buffer) => {
      const request = data.toString('latin1');
      if (request.startsWith('GET /upgrade ')) {
        upgraded = socket;
        socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\nearly-aaaa');
        return;
      }
      // Another connection's answer: bytes of the same length, other letters, over the same offsets.
      const body = 'z'.repeat(2000);
      socket.end(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  port = (server.address() as AddressInfo).port;
});

after(() => {
  upgraded?.destroy();
  server.close();
});

test('a 101 and the bytes after it reach the new owner as sent, while other connections read', { timeout: 15_000 }, async () => {
  await withPool(localTarget(port, '127.0.0.1'), async (pool) => {
    const outcome = await send(pool, { method: 'GET', target: '/upgrade', fields: [...HOST, 'Connection', 'Upgrade', 'Upgrade', 'test'], upgrade: true });
    assert.equal(outcome.head?.status, 101);
    const { socket, leftover } = outcome.upgrade!;
    const kept: Buffer[] = [leftover];
    socket.on('data', (chunk: Buffer) => kept.push(chunk));
    socket.resume();
    // Another connection reads into the shared buffer: the leftover must not change.
    const other = await send(pool, { method: 'GET', target: '/other', fields: HOST });
    assert.equal(other.body.byteLength, 2000);
    upgraded!.write('later-bbbb');
    await new Promise((resolve) => setTimeout(resolve, 50));
    // And again, after the later bytes reached the new owner.
    await send(pool, { method: 'GET', target: '/other', fields: HOST });
    assert.equal(kept.map((chunk) => chunk.toString('latin1')).join('|'), 'early-aaaa|later-bbbb');
    socket.destroy();
  });
});
