import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import { HttpPeerLink } from '../../src/edge/cluster/peer-link.js';
import { RELEASE_PATH } from '../../src/edge/cluster/secret.js';
import type { LocalTunnels } from '../../src/edge/cluster/types.js';
import { call, freePort } from '../helpers.js';
import { SECRET, TestCluster, startClusterEdge } from './hop-fixture.js';

const cluster = new TestCluster();
const released: string[] = [];
const local: LocalTunnels = {
  release(subdomain, fence) {
    released.push(`${subdomain}@${fence}`);
    return subdomain === 'held' && fence === 7 ? 'released' : 'not-held';
  },
};
const owner = await startClusterEdge(cluster, 'a', { local });
const link = new HttpPeerLink({ secret: SECRET, timeoutMs: 300 });
after(async () => {
  await link.close();
  await owner.close();
});

test('a release reaches the owner\'s LocalTunnels with the secret and answers what it did', async () => {
  released.length = 0;
  assert.equal(await link.release(owner.peer, 'held', 7), 'released');
  assert.equal(await link.release(owner.peer, 'held', 6), 'not-held');
  assert.equal(await link.release(owner.peer, 'other', 7), 'not-held');
  assert.deepEqual(released, ['held@7', 'held@6', 'other@7']);
});

test('a release meant for an earlier process of the edge (another boot) is not-held without asking', async () => {
  released.length = 0;
  assert.equal(await link.release({ ...owner.peer, boot: 'an-earlier-boot' }, 'held', 7), 'not-held');
  assert.deepEqual(released, []);
});

test('a refused connection is not-held (the process is gone); a silent peer is unreachable', async () => {
  const port = await freePort();
  assert.equal(await link.release({ nodeId: 'gone', advertise: `http://127.0.0.1:${port}`, boot: 'x' }, 'held', 7), 'not-held');
  const sockets: Socket[] = [];
  const silent = createServer((socket) => sockets.push(socket)).listen(0, '127.0.0.1');
  await once(silent, 'listening');
  try {
    const advertise = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    assert.equal(await link.release({ nodeId: 'silent', advertise, boot: 'x' }, 'held', 7), 'unreachable');
  } finally {
    for (const socket of sockets) socket.destroy();
    silent.close();
  }
});

test('a release with another secret is unreachable and never reaches LocalTunnels', async () => {
  released.length = 0;
  const stranger = new HttpPeerLink({ secret: 'another-secret-of-sixteen', timeoutMs: 300 });
  try {
    assert.equal(await stranger.release(owner.peer, 'held', 7), 'unreachable');
  } finally {
    await stranger.close();
  }
  assert.deepEqual(released, []);
});

test('internal endpoints without the secret are an unknown API path, and on a tunnel host a tunnel path', async () => {
  released.length = 0;
  const body = { subdomain: 'held', fence: 7 };
  const unknown = await call(owner, 'POST', '/api/v1/no-such-path', { body });
  for (const headers of [{}, { 'burrow-cluster-secret': 'wrong' }, { 'burrow-cluster-secret': '' }] as Record<string, string>[]) {
    const refused = await call(owner, 'POST', RELEASE_PATH, { body, headers });
    assert.equal(refused.status, unknown.status);
    assert.equal(refused.json.error.code, unknown.json.error.code);
  }
  // The right secret on a tunnel's host is still a public request for that tunnel (none here).
  const onTunnel = await call(owner, 'POST', RELEASE_PATH, { body, headers: { 'burrow-cluster-secret': SECRET }, host: `held.localhost:${owner.port}` });
  assert.equal(onTunnel.status, 404);
  assert.equal(onTunnel.json.error.code, 'TUNNEL_NOT_FOUND');
  assert.deepEqual(released, []);
  const allowed = await call(owner, 'POST', RELEASE_PATH, { body, headers: { 'burrow-cluster-secret': SECRET } });
  assert.deepEqual(allowed.json, { outcome: 'released' });
});
