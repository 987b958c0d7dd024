/**
 * One client on several edges, at the protocol (issue 28, item 3; docs/protocol.md sections 1, 4 and
 * 10): a cluster edge's READY carries `clusterEdges` and the session's `attachment`, and a NOTICE with
 * the store's state follows it; the same client (`instance`) connecting to a second edge is attached
 * beside the first, and a request to either edge arrives on that edge's own session (no hop); connecting twice to one edge is refused
 * 409 ALREADY_ATTACHED; a reconnect that names its old attachment in `drop` replaces that session
 * (GOAWAY REPLACED) instead.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import type { Frame } from '../../src/protocol/codec.js';
import { FrameType, GoAwayCode, NoticeCode, type Settings } from '../../src/protocol/constants.js';
import { createAccount, waitFor, type TestEdge } from '../helpers.js';
import { openRawTunnel } from '../edge/raw-tunnel.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { refusedConnect, startClusterEdge, startNamed } from './cluster-helpers.js';

const INSTANCE = 'client-instance-1';

test('a client attached to two edges: READY says so, both serve without the hop, a second session on one edge is refused unless it drops the first', { skip: redisSkip, timeout: 60_000 }, async () => {
  const redis = await TestRedis.start();
  const edges: TestEdge[] = [];
  const local = await startNamed('attached');
  try {
    for (const nodeId of ['a', 'b']) edges.push(await startClusterEdge(redis.url, nodeId));
    const [a, b] = edges as [TestEdge, TestEdge];
    const account = await createAccount(a);
    const query = `port=${local.port}&subdomain=pair&instance=${INSTANCE}`;

    const first = await openRawTunnel(a, account.token, query);
    const firstSettings = first.ready[4] as Settings;
    assert.equal(firstSettings.clusterEdges, 2);
    assert.ok(Number.isSafeInteger(firstSettings.attachment) && firstSettings.attachment! > 0);
    const notice = await first.tunnel.next<Frame>(FrameType.NOTICE);
    assert.deepEqual(notice.slice(0, 3), [FrameType.NOTICE, 0, NoticeCode.STORE_AVAILABLE]);

    const second = await openRawTunnel(b, account.token, query);
    const secondSettings = second.ready[4] as Settings;
    assert.notEqual(secondSettings.attachment, firstSettings.attachment);
    // Both edges hold a session and serve the tunnel themselves: a request to each arrives on its own session.
    for (const [edge, tunnel] of [[a, first.tunnel], [b, second.tunnel]] as const) {
      assert.ok(edge.edge.registry.session('pair') !== undefined);
      const aborted = new AbortController();
      const sent = request(`${edge.base}/which`, { headers: { host: `pair.localhost:${edge.port}` }, signal: aborted.signal }).catch(() => undefined);
      const open = await tunnel.next<Frame>(FrameType.OPEN);
      assert.equal(open[4], '/which');
      aborted.abort();
      await sent;
    }

    const refused = await refusedConnect(a, account.token, `pair&instance=${INSTANCE}`);
    assert.equal(refused.status, 409, refused.text);
    assert.equal(refused.json.error.code, 'ALREADY_ATTACHED');

    // The reconnect the client makes after losing its session on a: it names the old attachment.
    const again = await openRawTunnel(a, account.token, `${query}&drop=${firstSettings.attachment}`);
    const goaway = await first.tunnel.next<Frame>(FrameType.GOAWAY);
    assert.equal(goaway[2], GoAwayCode.REPLACED);
    await waitFor(() => a.edge.registry.session('pair') !== undefined, 2_000, 'the new session on a');
    assert.equal(a.edge.cluster!.fenceOf('pair'), (again.ready[4] as Settings).attachment);

    const badDrop = await refusedConnect(b, account.token, `pair&instance=${INSTANCE}&drop=0`);
    assert.equal(badDrop.status, 400);
    assert.equal(badDrop.json.error.code, 'INVALID_REQUEST');
    again.tunnel.ws.close();
    second.tunnel.ws.close();
  } finally {
    for (const edge of edges) await edge.close();
    await local.close();
  }
});
