/**
 * A Redis connection that ioredis ends while its store is open connects again (RedisStore
 * `reconnectWhenEnded`). ioredis 5.x ends a client for good when a reconnection attempt is cut short:
 * its failover detector hears +switch-master while the attempt is asking a sentinel for the master, and
 * the attempt's rejection ends the client. An edge then never reached the new master, and its leases
 * lapsed (the sentinel failover test, on a loaded machine). The end is made here with ioredis' own
 * `disconnect()`, which leaves a client in the same state: status 'end', no reconnection scheduled.
 *
 * Checked on a running edge in cluster mode: with its lease connection ended it renews again by itself
 * (its tunnel is still served after a whole lease's life), every connection it holds comes back, and
 * once the edge is closed none does.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import type { Redis } from 'ioredis';
import type { ClusterConnection } from '../../src/edge/cluster/connection.js';
import { createAccount, startClient, waitFor, type TestEdge } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { FAST_TIMINGS, publicGet, startClusterEdge, startNamed } from './cluster-helpers.js';

/** Ends each connection as ioredis does (status 'end', no reconnection scheduled), and waits until it has. */
async function endAll(connections: readonly Redis[]): Promise<void> {
  const ended = connections.map((connection) => once(connection, 'end'));
  for (const connection of connections) connection.disconnect();
  await Promise.all(ended);
}

/** The edge's connections to Redis (private to it: this test ends them as ioredis would). */
function connectionsOf(edge: TestEdge): Redis[] {
  const cluster = (edge.edge as unknown as { clusterConnection: ClusterConnection }).clusterConnection;
  const queue = (cluster.queue as unknown as { redis: Redis }).redis;
  return [cluster.leases.redis, cluster.subscriber, cluster.accounts.redis, queue];
}

test('an edge whose lease connection ioredis ends renews again by itself, its tunnel served throughout', { skip: redisSkip, timeout: 60_000 }, async () => {
  const redis = await TestRedis.start();
  const edge = await startClusterEdge(redis.url, 'a');
  const local = await startNamed('ended');
  try {
    const account = await createAccount(edge);
    const { client } = await startClient(edge, account.token, local.port, { subdomain: 'ended' });
    try {
      assert.equal((await publicGet(edge, 'ended')).text, 'ended');
      const [leases] = connectionsOf(edge);
      await endAll([leases!]);
      await waitFor(() => leases!.status === 'ready', 10_000, 'the lease connection to come back');
      await waitFor(() => edge.edge.cluster!.storeStatus.available, 10_000, 'the edge to renew again');
      // Past a whole lease's life: a lease that was not renewed meanwhile would have lapsed (503).
      await new Promise((resolve) => setTimeout(resolve, FAST_TIMINGS.leaseTtlMs! + 500));
      const answer = await publicGet(edge, 'ended');
      assert.equal(answer.status, 200, answer.text);
      assert.equal(answer.text, 'ended');
      assert.equal(edge.edge.cluster!.storeStatus.available, true);
    } finally {
      await client.close();
    }
  } finally {
    await edge.close();
    await local.close();
  }
});

test('every Redis connection of an edge comes back after ioredis ends it; none does once the edge is closed', { skip: redisSkip, timeout: 60_000 }, async () => {
  const redis = await TestRedis.start();
  const edge = await startClusterEdge(redis.url, 'b');
  const connections = connectionsOf(edge);
  try {
    await waitFor(() => connections.every((connection) => connection.status === 'ready'), 5_000, 'every connection to be ready');
    await endAll(connections);
    await waitFor(() => connections.every((connection) => connection.status === 'ready'), 10_000, 'every connection to come back');
  } finally {
    await edge.close();
  }
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  assert.deepEqual(connections.map((connection) => connection.status), ['end', 'end', 'end', 'end'], 'closed means closed');
});
