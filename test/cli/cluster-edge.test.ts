/**
 * `burrow edge --cluster`: the companions it needs are demanded with a clear one-line reason, and a real
 * edge joins a real Redis (its heartbeat is there) and leaves it on SIGTERM.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { RedisLeases } from '../../src/store/redis-leases.js';
import { freePort, runCli, spawnCli, tempDir, waitFor } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';

const REFUSALS: [string, string[], RegExp][] = [
  ['--cluster without --node-id', ['--cluster', 'redis://127.0.0.1:1', '--advertise', 'http://127.0.0.1:8080'], /--cluster needs --node-id/],
  ['--cluster without --advertise', ['--cluster', 'redis://127.0.0.1:1', '--node-id', 'a'], /--cluster needs --advertise/],
  ['--node-id without --cluster', ['--node-id', 'a'], /--node-id is for cluster mode/],
  ['--cluster that is not redis://', ['--cluster', 'http://127.0.0.1:1', '--node-id', 'a', '--advertise', 'http://x:1'], /redis:\/\//],
  ['a bad --node-id', ['--cluster', 'redis://127.0.0.1:1', '--node-id', 'a b', '--advertise', 'http://x:1'], /--node-id must be/],
  ['a Sentinel URL without a master name', ['--cluster', 'redis-sentinel://127.0.0.1:26379', '--node-id', 'a', '--advertise', 'http://x:1'], /redis-sentinel:\/\/.*\/MASTER/],
];

for (const [name, args, reason] of REFUSALS) {
  test(`burrow edge refuses ${name}`, async () => {
    const result = await runCli(['edge', '--port', '0', '--data', tempDir(), ...args]);
    assert.notEqual(result.code, 0);
    assert.match(result.stderr, reason);
    assert.equal(result.stderr.trim().split('\n').length <= 2, true, result.stderr);
  });
}

test('burrow edge --cluster with Redis unreachable exits with the reason', async () => {
  const port = await freePort();
  const result = await runCli(['edge', '--port', '0', '--data', tempDir(), '--cluster', `redis://127.0.0.1:${port}`, '--node-id', 'a', '--advertise', 'http://127.0.0.1:1']);
  assert.notEqual(result.code, 0);
  assert.match(result.stderr, /cannot reach the cluster store/);
});

test('burrow edge --cluster on a Redis Cluster node exits with a message that says it is not supported and what to use', { skip: redisSkip }, async () => {
  const node = await TestRedis.start({ args: ['--cluster-enabled', 'yes'] });
  const result = await runCli(['edge', '--port', '0', '--data', tempDir(), '--cluster', node.url, '--node-id', 'a', '--advertise', 'http://127.0.0.1:1']);
  assert.notEqual(result.code, 0);
  assert.match(result.stderr, /Redis Cluster is not supported/);
  assert.match(result.stderr, /redis-sentinel:\/\//);
  const admin = await runCli(['admin', 'accounts', 'list', '--cluster', node.url]);
  assert.notEqual(admin.code, 0);
  assert.match(admin.stderr, /Redis Cluster is not supported/);
});

test('burrow edge --cluster joins the cluster (its heartbeat is in Redis) and leaves on SIGTERM', { skip: redisSkip }, async () => {
  const redis = await TestRedis.start();
  const client = new Redis(redis.url);
  try {
    const edge = await spawnCli(
      ['edge', '--port', '0', '--data', tempDir(), '--cluster', redis.url, '--node-id', 'cli-a', '--advertise', 'http://127.0.0.1:9999'],
      {},
      /listening on http:\/\/localhost:(\d+)/,
    );
    const leases = new RedisLeases(client);
    assert.deepEqual(
      (await leases.peers()).map(({ nodeId, advertise }) => ({ nodeId, advertise })),
      [{ nodeId: 'cli-a', advertise: 'http://127.0.0.1:9999' }],
    );
    edge.child.kill('SIGTERM');
    assert.equal(await edge.exited, 0);
    await waitFor(async () => (await leases.peers()).length === 0, 2_000, 'the heartbeat to be removed');
  } finally {
    client.disconnect();
  }
});
