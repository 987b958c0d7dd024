/**
 * Clients on several edges given a list of edges (no front proxy): a tunnel's second session goes to
 * the edge after its first one in the list, not always to the list's second edge. The scale run
 * (bench/cluster-scale.ts, issue 28) found the list's second edge carrying every tunnel's second session
 * (5,000 against 1,669 on the first edge) when tunnels started at different edges.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MultiEdgeTunnel } from '../../src/client/multi-edge.js';
import { RouteTable } from '../../src/client/routes.js';
import { createAccount, waitFor, type TestEdge } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { startClusterEdge, startNamed } from './cluster-helpers.js';

test("a tunnel's second session takes the edge after its first one's in the list", { skip: redisSkip, timeout: 60_000 }, async () => {
  const redis = await TestRedis.start();
  const edges: TestEdge[] = [];
  const local = await startNamed('spread');
  const tunnels: MultiEdgeTunnel[] = [];
  try {
    for (const nodeId of ['a', 'b', 'c']) edges.push(await startClusterEdge(redis.url, nodeId));
    // Each edge tells a connecting client how many edges the cluster has: wait until all know all three.
    await waitFor(() => edges.every((edge) => (edge.edge.registry as { readySettings?(name: null): { clusterEdges: number } | null }).readySettings?.(null)?.clusterEdges === 3), 10_000, 'every edge sees three');
    const account = await createAccount(edges[0]!, 'PRO');
    const urls = edges.map((edge) => edge.url);
    // Started at the third edge, then at the second: their other sessions go to the first and third.
    for (const [subdomain, firstEdge] of [['from-c', 2], ['from-b', 1]] as const) {
      const tunnel = new MultiEdgeTunnel({ edge: urls, token: account.token, routes: new RouteTable(local.port), subdomain, recordLimit: 0, edgesPerTunnel: 2, firstEdge });
      tunnels.push(tunnel);
      await tunnel.start();
    }
    const names = ['a', 'b', 'c'];
    const holders = (subdomain: string): string[] => names.filter((_name, i) => edges[i]!.edge.registry.session(subdomain) !== undefined);
    await waitFor(() => holders('from-c').length === 2 && holders('from-b').length === 2, 10_000, 'both tunnels on two edges').catch((error: Error) => {
      throw new Error(`${error.message}: from-c on ${holders('from-c').join(',')}, from-b on ${holders('from-b').join(',')}`);
    });
    assert.deepEqual(holders('from-c'), ['a', 'c']);
    assert.deepEqual(holders('from-b'), ['b', 'c']);
  } finally {
    for (const tunnel of tunnels) await tunnel.close();
    for (const edge of edges) await edge.close();
    await local.close();
  }
});
