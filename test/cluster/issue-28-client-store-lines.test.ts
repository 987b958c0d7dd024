/**
 * The client says when its edges lose the cluster store and when they have it back (issue 28, item 1's
 * last clause). Before, `burrow http` printed nothing while Redis was down: its user learned of the
 * outage only from failed requests.
 *
 * A real `burrow http` process on two edges of one real Redis (attached to both, --edges' default of 2);
 * Redis is killed and started again on its data. Checked on the client's own output: exactly one line
 * when the store becomes unavailable (both edges report it; the user hears it once), exactly one when it
 * is back, and the tunnel answers through both edges before, during (within the lease validity) and after.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createAccount, spawnCli, tempDir, waitFor, type TestEdge } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { publicGet, startClusterEdge, startNamed } from './cluster-helpers.js';

/** Leases of 10 s renewed every second: a 3 s outage stays inside every lease's validity. */
const TIMINGS = { leaseTtlMs: 10_000, renewEveryMs: 1_000, marginMs: 1_000, heartbeatTtlMs: 5_000 };
const UNAVAILABLE = /^burrow: the cluster store is unavailable \(edge \S+: the cluster store is unreachable \(.+\); tunnels stay served while their leases hold, new ones wait\)$/gm;
const AVAILABLE = /^burrow: the cluster store is available again \(edge \S+\)$/gm;

test('burrow http prints one line when its edges report the store unavailable and one when it is back', { skip: redisSkip, timeout: 90_000 }, async () => {
  const redis = await TestRedis.start();
  const edges: TestEdge[] = [];
  const local = await startNamed('store-lines');
  try {
    for (const nodeId of ['a', 'b']) edges.push(await startClusterEdge(redis.url, nodeId, { clusterTimings: TIMINGS }));
    const account = await createAccount(edges[0]!);
    const env = { XDG_CONFIG_HOME: tempDir() };
    const run = await spawnCli(
      ['http', String(local.port), '--token', account.token, '--no-inspect', '--subdomain', 'store-lines', '--edge', edges[0]!.url, '--edge', edges[1]!.url],
      env,
      /Forwarding /,
    );
    try {
      // Attached to both edges: each holds a session of the tunnel.
      await waitFor(() => edges.every((edge) => edge.edge.registry.session('store-lines') !== undefined), 10_000, 'the tunnel on both edges');
      for (const edge of edges) assert.deepEqual(await publicGet(edge, 'store-lines'), { status: 200, text: 'store-lines' });

      await redis.kill();
      await waitFor(() => (run.output().match(UNAVAILABLE) ?? []).length > 0, 10_000, 'the unavailable line');
      // Both edges noticed (each sent its NOTICE); the user still hears it once.
      await waitFor(() => edges.every((edge) => !edge.edge.cluster!.storeStatus.available), 10_000, 'both edges to lose the store');
      for (const edge of edges) assert.deepEqual(await publicGet(edge, 'store-lines'), { status: 200, text: 'store-lines' });

      await redis.restart();
      await waitFor(() => (run.output().match(AVAILABLE) ?? []).length > 0, 15_000, 'the available line');
      await waitFor(() => edges.every((edge) => edge.edge.cluster!.storeStatus.available), 10_000, 'both edges to have the store back');
      // Give a late NOTICE from the second edge time to arrive: it must not print a second line.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      for (const edge of edges) assert.deepEqual(await publicGet(edge, 'store-lines'), { status: 200, text: 'store-lines' });

      const output = run.output();
      if (process.env.SHOW_OUTPUT) console.log(output);
      assert.equal((output.match(UNAVAILABLE) ?? []).length, 1, output);
      assert.equal((output.match(AVAILABLE) ?? []).length, 1, output);
      assert.ok(output.search(UNAVAILABLE) < output.search(AVAILABLE), output);
      assert.doesNotMatch(output, /Reconnect|went away/, output);
    } finally {
      run.child.kill('SIGINT');
      await run.exited;
    }
  } finally {
    for (const edge of edges) await edge.close();
    await local.close();
  }
});
