/**
 * Issue 29, point 3, in cluster mode (the lease's takeover path, src/edge/cluster/registry.ts): a name
 * that another client of the account has online on any edge is refused with 409 SUBDOMAIN_TAKEN naming
 * that tunnel and its edge; the same client reconnecting through another edge (same instance id) still
 * moves the name, and so does --replace.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, describe, test } from 'node:test';
import type { ClosedInfo } from '../../src/client/tunnel-client.js';
import { createAccount, startClient, type LocalServer, type TestEdge } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { openRawTunnel } from '../edge/raw-tunnel.js';
import { publicGet, startClusterEdge, startNamed } from './cluster-helpers.js';

const redis = redisSkip === false ? await TestRedis.start() : null;

describe('a name online in another tunnel of the account, across edges', { skip: redisSkip }, () => {
  let a: TestEdge;
  let b: TestEdge;
  let first: LocalServer;
  let second: LocalServer;

  before(async () => {
    a = await startClusterEdge(redis!.url, 'a');
    b = await startClusterEdge(redis!.url, 'b');
    first = await startNamed('first');
    second = await startNamed('second');
  });
  after(async () => {
    await first.close();
    await second.close();
    await Promise.all([a.close(), b.close()]);
  });

  test('another client is refused on the other edge, told which tunnel and edge hold the name', async () => {
    const account = await createAccount(a, 'PRO');
    const running = await startClient(a, account.token, first.port, { subdomain: 'online-across' });
    try {
      await assert.rejects(startClient(b, account.token, second.port, { subdomain: 'online-across' }), (error: Error & { code?: string; status?: number }) => {
        assert.equal(error.code, 'SUBDOMAIN_TAKEN');
        assert.equal(error.status, 409);
        assert.match(error.message, /^The subdomain "online-across" is already online for this account: a tunnel to local port \d+, connected from 127\.0\.0\.1 on edge a at \S+Z with token tok_[0-9a-f]+\. .*--replace/);
        assert.ok(error.message.includes(`local port ${first.port},`), error.message);
        return true;
      });
      // Also on the edge that holds it.
      await assert.rejects(startClient(a, account.token, second.port, { subdomain: 'online-across' }), /already online for this account: a tunnel to local port \d+, connected from 127\.0\.0\.1 at /);
      assert.deepEqual(await publicGet(b, 'online-across'), { status: 200, text: 'first' });
      assert.equal(running.client.connected, true);
    } finally {
      await running.client.close();
    }
  });

  test("the same client's reconnect through another edge moves the name (its instance id matches)", async () => {
    const account = await createAccount(a, 'PRO');
    const running = await startClient(a, account.token, first.port, { subdomain: 'reconnects-across' });
    const closed = once(running.client, 'closed') as Promise<[ClosedInfo]>;
    // The connect the client itself would make to edge B after losing A, by hand: same instance, and the
    // attachment it had on A named in `drop` (without it, B attaches the tunnel beside A: issue 28).
    const attachment = a.edge.cluster!.fenceOf('reconnects-across');
    const moved = await openRawTunnel(b, account.token, `port=${second.port}&subdomain=reconnects-across&instance=${running.client.instance}&drop=${attachment}`);
    try {
      assert.equal(moved.ready[2], 'reconnects-across');
      const [info] = await closed;
      assert.equal(info.code, 'REPLACED');
      assert.equal(b.edge.registry.session('reconnects-across')?.instance, running.client.instance);
    } finally {
      moved.tunnel.ws.close();
    }
  });

  test('--replace takes the name over from another client on another edge', async () => {
    const account = await createAccount(a, 'PRO');
    const running = await startClient(a, account.token, first.port, { subdomain: 'replaced-across' });
    const closed = once(running.client, 'closed') as Promise<[ClosedInfo]>;
    const taker = await startClient(b, account.token, second.port, { subdomain: 'replaced-across', replace: true });
    try {
      const [info] = await closed;
      assert.equal(info.code, 'REPLACED');
      assert.deepEqual(await publicGet(a, 'replaced-across'), { status: 200, text: 'second' });
    } finally {
      await taker.client.close();
    }
  });
});
