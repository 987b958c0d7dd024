/**
 * Issue 25: the local hop's connections, plain TCP and TLS, read into one buffer shared by the process
 * (src/client/local-hop/connection.ts, SHARED_READ). Body chunks reach the handler as copies from llhttp;
 * what else outlives a read must be copied too: the bytes a local server sent right after its 101, and
 * the bytes that reach the upgraded socket's new owner later. Other connections' reads land in the
 * shared buffer in between, and the kept bytes must be as sent.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { after, before, test } from 'node:test';
import { localTarget, parseTarget, type LocalTarget } from '../../../src/client/routes.js';
import { tempDirs } from '../../helpers.js';
import { makeServerCert } from '../../tls-fixtures.js';
import { send, withPool } from './record.js';

const HOST = ['Host', 'app.example'];
let server: Server;
let tlsServer: Server;
/** The upgraded connection's server side, to send later bytes on. */
let upgraded: Socket | null = null;

/** Answers an upgrade with a 101 and bytes right after it; any other request with 2,000 bytes and a close. */
function answer(socket: Socket): void {
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
}

before(async () => {
  const pem = makeServerCert(tempDirs('burrow-shared-read-tls-')(), 'local', ['localhost'], null);
  server = createServer(answer);
  tlsServer = createTlsServer({ cert: readFileSync(pem.cert), key: readFileSync(pem.key) }, answer);
  for (const each of [server, tlsServer]) {
    each.listen(0, '127.0.0.1');
    await once(each, 'listening');
  }
});

after(() => {
  upgraded?.destroy();
  server.close();
  tlsServer.close();
});

function targetOf(kind: 'plain' | 'TLS'): LocalTarget {
  if (kind === 'plain') return localTarget((server.address() as AddressInfo).port, '127.0.0.1');
  const target = parseTarget(`https://localhost:${(tlsServer.address() as AddressInfo).port}`);
  assert.ok(typeof target !== 'string');
  return target;
}

for (const kind of ['plain', 'TLS'] as const) {
  test(`${kind}: a 101 and the bytes after it reach the new owner as sent, while other connections read`, { timeout: 15_000 }, async () => {
    await withPool(targetOf(kind), async (pool) => {
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
    }, { insecure: true });
  });
}
