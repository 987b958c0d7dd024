/**
 * `burrow start` in a cluster (docs/cluster.md "Clients on several edges"): its tunnels ride one
 * connection to one edge (BIND), where `burrow http` would attach to two; every edge serves them (the
 * other through the hop), and the store lines are printed once for the connection, not once per tunnel.
 *
 * A real `burrow start --all` of two tunnels, two edges on one real Redis, Redis killed and started again.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { createAccount, spawnCli, tempDir, waitFor, type TestEdge } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { publicGet, startClusterEdge, startNamed } from './cluster-helpers.js';

/** Leases of 10 s renewed every second: a 3 s outage stays inside every lease's validity. */
const TIMINGS = { leaseTtlMs: 10_000, renewEveryMs: 1_000, marginMs: 1_000, heartbeatTtlMs: 5_000 };
const UNAVAILABLE = /^burrow: the cluster store is unavailable \(edge \S+: .+\)$/gm;
const AVAILABLE = /^burrow: the cluster store is available again \(edge \S+\)$/gm;

test('burrow start in a cluster: one connection to one edge carries its tunnels, both edges serve them, one store line per change', { skip: redisSkip, timeout: 90_000 }, async () => {
  const redis = await TestRedis.start();
  const edges: TestEdge[] = [];
  const shop = await startNamed('shop');
  const blog = await startNamed('blog');
  try {
    for (const nodeId of ['a', 'b']) edges.push(await startClusterEdge(redis.url, nodeId, { clusterTimings: TIMINGS }));
    const [a, b] = edges as [TestEdge, TestEdge];
    const account = await createAccount(a, 'PRO');
    const dir = tempDir();
    writeFileSync(
      join(dir, 'burrow.yml'),
      [`edge: ${a.url}`, 'inspect: 0', 'tunnels:', '  shop:', `    http: ${shop.port}`, '    subdomain: start-shop', '  blog:', `    http: ${blog.port}`, '    subdomain: start-blog', ''].join('\n'),
    );
    const env = { XDG_CONFIG_HOME: join(dir, 'xdg'), BURROW_CONFIG: '', BURROW_EDGE: '', BURROW_TOKEN: account.token };
    const run = await spawnCli(['start', '--all', '--log', 'text'], env, /(?:Forwarding \S+ -> \S+\n[\s\S]*?){2}/, 30_000, dir);
    try {
      const shopSession = a.edge.registry.session('start-shop');
      const blogSession = a.edge.registry.session('start-blog');
      assert.ok(shopSession !== undefined && blogSession !== undefined, 'both tunnels on a');
      assert.equal(shopSession.connection, blogSession.connection, 'one connection carries both');
      for (const edge of [a, b]) {
        assert.deepEqual(await publicGet(edge, 'start-shop'), { status: 200, text: 'shop' });
        assert.deepEqual(await publicGet(edge, 'start-blog'), { status: 200, text: 'blog' });
      }
      // Not attached to a second edge, as burrow http would be.
      assert.equal(b.edge.registry.session('start-shop'), undefined);
      assert.equal(b.edge.registry.session('start-blog'), undefined);

      await redis.kill();
      await waitFor(() => (run.output().match(UNAVAILABLE) ?? []).length > 0, 15_000, 'the unavailable line');
      assert.deepEqual(await publicGet(a, 'start-shop'), { status: 200, text: 'shop' });
      await redis.restart();
      await waitFor(() => (run.output().match(AVAILABLE) ?? []).length > 0, 15_000, 'the available line');
      await waitFor(() => edges.every((edge) => edge.edge.cluster!.storeStatus.available), 10_000, 'both edges to have the store back');
      assert.deepEqual(await publicGet(b, 'start-blog'), { status: 200, text: 'blog' });

      const output = run.output();
      assert.equal((output.match(UNAVAILABLE) ?? []).length, 1, output);
      assert.equal((output.match(AVAILABLE) ?? []).length, 1, output);
    } finally {
      run.child.kill('SIGINT');
      await run.exited;
    }
  } finally {
    for (const edge of edges) await edge.close();
    await shop.close();
    await blog.close();
  }
});
