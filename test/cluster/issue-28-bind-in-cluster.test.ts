/**
 * Several tunnels on one connection (issue 27's BIND) meet the cluster's attachments and NOTICE (issue
 * 28), played by hand against two real edges on a real Redis (docs/cluster.md "Clients on several edges",
 * docs/protocol.md section 18):
 * - a connect without port is told `clusterEdges` and no `attachment` (its BIND tunnels have none to drop);
 * - its BIND tunnels are attached to their leases: the other edge reaches them through the hop;
 * - the store's NOTICEs come once per connection, not once per tunnel (Redis killed and started again);
 * - the same client process binding a name again on that edge (its new connection after losing the old
 *   one) replaces its old attachment there instead of being refused ALREADY_ATTACHED.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { encode, type BoundFrame, type Frame, type OpenFrame } from '../../src/protocol/codec.js';
import { FrameType, NoticeCode, type Settings } from '../../src/protocol/constants.js';
import { createAccount, waitFor, type TestEdge } from '../helpers.js';
import { openRawTunnel, type RawTunnel } from '../edge/raw-tunnel.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { startClusterEdge } from './cluster-helpers.js';

const INSTANCE = 'bind-in-cluster-28';
/** Leases of 10 s renewed every second: a short outage stays inside every lease's validity. */
const TIMINGS = { leaseTtlMs: 10_000, renewEveryMs: 1_000, marginMs: 1_000, heartbeatTtlMs: 5_000 };

function bind(tunnel: RawTunnel, id: number, name: string): Promise<BoundFrame> {
  tunnel.send(encode([FrameType.BIND, 0, id, 'http', name, 0, 3000, '', false, false]));
  return tunnel.next<BoundFrame>(FrameType.BOUND);
}

/** A GET to `name` through `edge`, answered by hand on `tunnel` with `text`; resolves with the OPEN and what the public client got. */
async function served(edge: TestEdge, name: string, tunnel: RawTunnel, text: string): Promise<{ open: OpenFrame; body: string }> {
  const sent = request(`${edge.base}/which`, { headers: { host: `${name}.localhost:${edge.port}` } }).then((response) => response.body.text());
  const open = await tunnel.next<OpenFrame>(FrameType.OPEN);
  tunnel.send(encode([FrameType.RESPONSE, open[1], 200, 'OK', ['content-length', String(text.length)], Buffer.from(text), true]));
  return { open, body: await sent };
}

function notices(tunnel: RawTunnel, code: number): number {
  return tunnel.frames.filter((frame: Frame) => frame[0] === FrameType.NOTICE && frame[2] === code).length;
}

test('a connection of several tunnels in a cluster: no attachment in READY, tunnels reached through the hop, one store NOTICE per connection, a rebind of the same client replaces its old one', { skip: redisSkip, timeout: 90_000 }, async () => {
  const redis = await TestRedis.start();
  const edges: TestEdge[] = [];
  try {
    for (const nodeId of ['a', 'b']) edges.push(await startClusterEdge(redis.url, nodeId, { clusterTimings: TIMINGS }));
    const [a, b] = edges as [TestEdge, TestEdge];
    const account = await createAccount(a, 'PRO');

    const { tunnel, ready } = await openRawTunnel(a, account.token, `instance=${INSTANCE}`);
    const settings = ready[4] as Settings;
    assert.equal(ready[2], '', 'the connect names no tunnel');
    assert.equal(settings.clusterEdges, 2);
    assert.equal(settings.attachment, undefined, 'a connect without port has no attachment');
    const first = await tunnel.next<Frame>(FrameType.NOTICE);
    assert.equal(first[2], NoticeCode.STORE_AVAILABLE);

    for (const [id, name] of [[1, 'bc-one'], [2, 'bc-two']] as const) {
      const bound = await bind(tunnel, id, name);
      assert.equal(bound[3], '', `${name}: ${bound[4]}`);
    }
    // Through b, which holds neither: the hop takes each request to a's connection, naming its tunnel.
    await waitFor(() => b.edge.cluster!.fenceOf('bc-one') === undefined, 1_000, 'b holds nothing');
    for (const [id, name] of [[1, 'bc-one'], [2, 'bc-two']] as const) {
      const { open, body } = await served(b, name, tunnel, name);
      assert.equal(open[10], id);
      assert.equal(body, name);
    }

    await redis.kill();
    await waitFor(() => !a.edge.cluster!.storeStatus.available, 15_000, 'a to lose the store');
    await waitFor(() => notices(tunnel, NoticeCode.STORE_UNAVAILABLE) > 0, 5_000, 'the unavailable NOTICE');
    // Still served within the leases (and a later frame shows nothing more was queued before it).
    const during = await served(a, 'bc-two', tunnel, 'during');
    assert.equal(during.body, 'during');
    assert.equal(notices(tunnel, NoticeCode.STORE_UNAVAILABLE), 1, 'one NOTICE for the connection, not one per tunnel');

    await redis.restart();
    await waitFor(() => a.edge.cluster!.storeStatus.available, 15_000, 'a to have the store back');
    await waitFor(() => notices(tunnel, NoticeCode.STORE_AVAILABLE) > 0, 5_000, 'the available NOTICE');
    const after = await served(a, 'bc-one', tunnel, 'after');
    assert.equal(after.body, 'after');
    assert.equal(notices(tunnel, NoticeCode.STORE_AVAILABLE), 1, 'one NOTICE for the connection, not one per tunnel');

    // The same client's next connection (its old one not yet seen closed by the edge) binds again.
    await waitFor(() => a.edge.cluster!.fenceOf('bc-one') !== undefined, 10_000, 'a holds bc-one again after the outage');
    const oldFence = a.edge.cluster!.fenceOf('bc-one');
    const again = await openRawTunnel(a, account.token, `instance=${INSTANCE}`);
    const rebound = await bind(again.tunnel, 1, 'bc-one');
    assert.equal(rebound[3], '', `rebind: ${rebound[4]}`);
    assert.notEqual(a.edge.cluster!.fenceOf('bc-one'), oldFence);
    const moved = await served(b, 'bc-one', again.tunnel, 'new connection');
    assert.equal(moved.body, 'new connection');
    again.tunnel.ws.close();
    tunnel.ws.close();
  } finally {
    for (const edge of edges) await edge.close();
  }
});
