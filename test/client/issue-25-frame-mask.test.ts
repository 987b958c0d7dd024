/**
 * Issue 25: the client masks its frames with a random key only where a cleartext intermediary could sit
 * between it and the edge (RFC 6455, sections 5.3 and 10.3). To a loopback edge (and over TLS) the key
 * is zero, so `ws` sends the payload as it is instead of a masked copy of it (docs/protocol.md,
 * "Masking"). The client's bytes to the edge are read on the wire, through a relay in front of the agent
 * port, and the edge must take both kinds of frame.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, test } from 'node:test';
import { request } from 'undici';
import { masksUnneeded } from '../../src/client/frame-mask.js';
import { parseResolveRule, type ResolveRule } from '../../src/client/resolve-rules.js';
import { CONNECT_PATH } from '../../src/protocol/constants.js';
import { createAccount, startClient, startEdge, startLocal } from '../helpers.js';

const running: { close(): Promise<unknown> }[] = [];
after(async () => {
  for (const each of running.reverse()) await each.close();
});

/** A relay on loopback to the edge's agent port (set once the edge is up) keeping what the client sent. */
async function agentRelay(): Promise<{ port: number; target: number; fromClient: Buffer[] }> {
  const relay = { port: 0, target: 0, fromClient: [] as Buffer[] };
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    const upstream = connect(relay.target, '127.0.0.1');
    socket.on('data', (chunk: Buffer) => relay.fromClient.push(Buffer.from(chunk)));
    socket.pipe(upstream).pipe(socket);
    socket.on('error', () => upstream.destroy());
    upstream.on('error', () => socket.destroy());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  relay.port = (server.address() as AddressInfo).port;
  running.push({ close: () => new Promise((resolve) => {
    server.close(resolve);
    for (const socket of sockets) socket.destroy();
  }) });
  return relay;
}

/** The masking keys of the client's frames after its upgrade request (RFC 6455, section 5.2). */
function maskingKeys(wire: Buffer): Buffer[] {
  let at = wire.indexOf('\r\n\r\n') + 4;
  assert.ok(at > 3, 'the upgrade request ends');
  const keys: Buffer[] = [];
  while (at + 2 <= wire.length) {
    const second = wire[at + 1]!;
    assert.equal(second & 0x80, 0x80, 'every client frame has the mask bit (RFC 6455, section 5.3)');
    let length = second & 0x7f;
    let offset = at + 2;
    if (length === 126) {
      length = wire.readUInt16BE(offset);
      offset += 2;
    } else if (length === 127) {
      length = Number(wire.readBigUInt64BE(offset));
      offset += 8;
    }
    if (offset + 4 + length > wire.length) break;
    keys.push(wire.subarray(offset, offset + 4));
    at = offset + 4 + length;
  }
  return keys;
}

const MARKER = 'answer-from-the-local-server-'.repeat(40);

async function throughTunnel(edgeName: string, resolve: (edgePort: number, relayPort: number) => ResolveRule[]): Promise<Buffer> {
  const relay = await agentRelay();
  const edge = await startEdge({ agentUrl: `ws://${edgeName}:${relay.port}${CONNECT_PATH}`, ...(edgeName === '127.0.0.1' ? {} : { domain: edgeName }) });
  running.push(edge);
  relay.target = edge.edge.agentPort;
  const local = await startLocal((_req, res) => res.end(MARKER));
  running.push(local);
  const account = await createAccount(edge);
  const { client, subdomain } = await startClient(edge, account.token, local.port, { edge: `http://${edgeName}:${edge.port}`, resolve: resolve(edge.port, relay.port), insecure: true });
  try {
    for (let i = 0; i < 4; i++) {
      const answer = await request(`${edge.base}/`, { headers: { host: `${subdomain}.${edgeName === '127.0.0.1' ? 'localhost' : edgeName}:${edge.port}` } });
      assert.equal(answer.statusCode, 200);
      assert.equal(await answer.body.text(), MARKER, 'the edge read what the client sent, masked or not');
    }
  } finally {
    await client.close();
  }
  return Buffer.concat(relay.fromClient);
}

test('to a loopback edge the key is zero: the answer crosses the wire as the local server wrote it', async () => {
  const wire = await throughTunnel('127.0.0.1', () => []);
  const keys = maskingKeys(wire);
  assert.ok(keys.length >= 4, `frames seen: ${keys.length}`);
  for (const key of keys) assert.deepEqual([...key], [0, 0, 0, 0]);
  assert.ok(wire.includes(MARKER), 'the payload is not masked');
});

test('to an edge reached by another name the key is random: the answer never crosses the wire as it is', async () => {
  const rule = (port: number): ResolveRule => parseResolveRule(`edge.test:${port}:127.0.0.1`) as ResolveRule;
  const wire = await throughTunnel('edge.test', (edgePort, relayPort) => [rule(edgePort), rule(relayPort)]);
  const keys = maskingKeys(wire);
  assert.ok(keys.length >= 4, `frames seen: ${keys.length}`);
  assert.equal(keys.filter((key) => key.readUInt32BE(0) === 0).length, 0, 'no zero key');
  assert.equal(new Set(keys.map((key) => key.toString('hex'))).size, keys.length, 'a fresh key per frame');
  assert.ok(!wire.includes(MARKER.slice(0, 64)), 'the payload is masked');
});

test('which edge URLs go unmasked: TLS, loopback addresses and localhost names', () => {
  for (const url of ['wss://tunnels.example.com/api/v1/connect', 'ws://127.0.0.1:4001/', 'ws://127.8.9.10/', 'ws://[::1]:4001/', 'ws://localhost:4001/', 'ws://edge.localhost/'])
    assert.equal(masksUnneeded(new URL(url)), true, url);
  for (const url of ['ws://tunnels.example.com/', 'ws://10.0.0.1:4001/', 'ws://[::2]/', 'ws://[2001:db8::1]/', 'ws://localhost.example.com/', 'ws://128.0.0.1/'])
    assert.equal(masksUnneeded(new URL(url)), false, url);
});
