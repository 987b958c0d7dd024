/**
 * Issue 23 (lower item): 50 handshake loops from one client pushed the API's p50 to 479 ms, because
 * every TLS handshake was served at once. The public listener bounds handshakes per client address
 * (docs/security.md, "TLS handshakes"): `perAddress` in progress, `queuedPerAddress` more waiting with
 * their ClientHello unread, the rest closed at once, and a handshake cut after `timeoutMs`. Another
 * address is not held up by it.
 */
import '../wildcard-dns.js';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { test } from 'node:test';
import { startEdge, tempDirs, waitFor } from '../helpers.js';
import { makeCa, makeServerCert } from '../tls-fixtures.js';
import { TEST_DOMAIN } from '../wildcard-dns.js';

const freshDir = tempDirs('burrow-handshakes-');

/** A TCP connection that never says a word (no ClientHello): it holds a handshake slot or a queue place. */
async function silent(port: number, localAddress = '127.0.0.1'): Promise<Socket> {
  const socket = connect({ host: '127.0.0.1', port, localAddress });
  socket.on('error', () => undefined);
  await once(socket, 'connect');
  return socket;
}

/** A whole TLS handshake from `localAddress`; resolves with the protocol, or rejects. */
async function handshake(port: number, ca: string, localAddress = '127.0.0.1'): Promise<string> {
  const socket = tlsConnect({ socket: connect({ host: '127.0.0.1', port, localAddress }), servername: `api.${TEST_DOMAIN}`, ca });
  try {
    await once(socket, 'secureConnect');
    return socket.getProtocol() ?? '';
  } finally {
    socket.destroy();
  }
}

function closed(socket: Socket): Promise<void> {
  return socket.destroyed ? Promise.resolve() : once(socket, 'close').then(() => undefined);
}

test('handshakes per client address: 2 at once, 3 waiting, the rest closed; a stalled one is cut; another address is not held up', async () => {
  const dir = freshDir();
  const ca = makeCa(dir, 'ca');
  const cert = makeServerCert(dir, 'edge', [`*.${TEST_DOMAIN}`, TEST_DOMAIN], ca);
  const pem = readFileSync(ca.cert, 'utf8');
  const edge = await startEdge({ domain: TEST_DOMAIN, tls: { certFile: cert.cert, keyFile: cert.key }, handshakes: { perAddress: 2, queuedPerAddress: 3, timeoutMs: 1_500 } });
  const sockets: Socket[] = [];
  try {
    assert.match(await handshake(edge.port, pem), /^TLSv1\.[23]$/, 'an ordinary handshake');

    // Two silent connections take both slots of 127.0.0.1; three more wait; the sixth is closed at once.
    for (let i = 0; i < 5; i++) sockets.push(await silent(edge.port));
    const refused = await silent(edge.port);
    await closed(refused);
    assert.equal(refused.bytesRead, 0, 'closed without a byte');

    // A real client from the same address meanwhile: the queue is full, so it is refused too.
    await assert.rejects(handshake(edge.port, pem), 'no room for a seventh connection from 127.0.0.1');

    // Another address is not held up by 127.0.0.1's handshakes.
    assert.match(await handshake(edge.port, pem, '127.0.0.2'), /^TLSv1\.[23]$/);

    // The stalled handshakes are cut after timeoutMs; the waiting ones then get their turn and, silent
    // too, are cut in turn. Then 127.0.0.1 handshakes again.
    await Promise.all(sockets.slice(0, 2).map(closed));
    sockets.splice(2).forEach((socket) => socket.destroy());
    await waitFor(async () => (await handshake(edge.port, pem).then(() => true, () => false)), 10_000, 'a handshake from 127.0.0.1 again');
  } finally {
    for (const socket of sockets) socket.destroy();
    await edge.close();
  }
});
