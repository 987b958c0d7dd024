/**
 * `burrow start` in a cluster (docs/cluster.md "Clients on several edges"): as `burrow http` does, it
 * keeps a connection to two edges (the default of --edges), each binding every tunnel of the file, so
 * both edges serve both tunnels without the hop; the store lines are printed once for the whole process,
 * not once per edge or per tunnel.
 *
 * 1. A real `burrow start --all` of three tunnels (one without a subdomain), two in-process edges on
 *    one real Redis (the file lists both edges): a held webhook sent again by the other edge reaches the
 *    local server once; Redis killed and started again.
 * 2. Three edge processes behind the shipped nginx file, the real `burrow start --all --json` connecting
 *    through nginx, bounded traffic to both tunnels, kill -9 of one edge they are attached to.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import '../wildcard-dns.js';
import { TEST_DOMAIN } from '../wildcard-dns.js';
import { frontProxySkip } from '../nginx-front.js';
import { request } from 'undici';
import { createAccount, spawnCli, startLocal, tempDir, tempDirs, waitFor, type SpawnedProcess, type TestEdge } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { wildcardDnsEnv } from '../tls-fixtures.js';
import { publicGet, startClusterEdge, startNamed } from './cluster-helpers.js';
import { attachedNodes, jsonEventsOf, killUnderLoad, NODE_IDS, servedWhereSent, startNginxCluster, startSequenceServer, type NginxCluster } from './nginx-cluster.js';

/** Leases of 10 s renewed every second: a 3 s outage stays inside every lease's validity. */
const TIMINGS = { leaseTtlMs: 10_000, renewEveryMs: 1_000, marginMs: 1_000, heartbeatTtlMs: 5_000 };
const UNAVAILABLE = /^burrow: the cluster store is unavailable \(edge \S+: .+\)$/gm;
const AVAILABLE = /^burrow: the cluster store is available again \(edge \S+\)$/gm;
const NAMES = ['start-shop', 'start-blog'] as const;
const makeDir = tempDirs('burrow-start-cluster-');

test('burrow start in a cluster: a connection to each of two edges carries every tunnel (a nameless one under its first name), each edge serves them itself, one store line per change', { skip: redisSkip, timeout: 90_000 }, async () => {
  const redis = await TestRedis.start();
  const edges: TestEdge[] = [];
  const shop = await startNamed('shop');
  const blog = await startNamed('blog');
  // The nameless tunnel's local server counts the held webhooks (Burrow-Event-Id) it is given.
  const hookIds: string[] = [];
  const hooks = await startLocal((req, res) => {
    const id = req.headers['burrow-event-id'];
    if (typeof id === 'string') hookIds.push(id);
    req.resume();
    req.on('end', () => res.end('hooks'));
  });
  try {
    for (const nodeId of ['a', 'b']) edges.push(await startClusterEdge(redis.url, nodeId, { clusterTimings: TIMINGS }));
    const [a, b] = edges as [TestEdge, TestEdge];
    const account = await createAccount(a, 'PRO');
    const dir = tempDir();
    writeFileSync(
      join(dir, 'burrow.yml'),
      ['edge:', `  - ${a.url}`, `  - ${b.url}`, 'inspect: 0', 'tunnels:', '  shop:', `    http: ${shop.port}`, '    subdomain: start-shop', '  blog:', `    http: ${blog.port}`, '    subdomain: start-blog', '  anon:', `    http: ${hooks.port}`, ''].join('\n'),
    );
    const env = { XDG_CONFIG_HOME: join(dir, 'xdg'), BURROW_CONFIG: '', BURROW_EDGE: '', BURROW_TOKEN: account.token };
    const run = await spawnCli(['start', '--all', '--log', 'text'], env, /(?:Forwarding \S+ -> \S+\n[\s\S]*?){3}/, 30_000, dir);
    try {
      // The tunnel without a subdomain: named by its first connection's BOUND, the same name on the other.
      const given = [...run.output().matchAll(/^Forwarding https?:\/\/([a-z0-9-]+)\./gm)].map((match) => match[1]!).filter((name) => !(NAMES as readonly string[]).includes(name));
      assert.equal(given.length, 1, run.output());
      const names = [...NAMES, given[0]!];
      const attachedEverywhere = (): boolean => edges.every((edge) => names.every((name) => edge.edge.registry.session(name) !== undefined));
      await waitFor(attachedEverywhere, 15_000, 'both tunnels on both edges').catch((error: Error) => {
        throw new Error(`${error.message}; client:\n${run.output()}`);
      });
      for (const edge of edges) {
        // One connection per edge carries both tunnels, and each edge serves them itself.
        assert.equal(edge.edge.registry.session('start-shop')!.connection, edge.edge.registry.session('start-blog')!.connection);
        assert.deepEqual(await publicGet(edge, 'start-shop'), { status: 200, text: 'shop' });
        assert.deepEqual(await publicGet(edge, 'start-blog'), { status: 200, text: 'blog' });
      }
      assert.deepEqual(await publicGet(b, given[0]!), { status: 200, text: 'hooks' });
      // A held webhook delivered through a, then again through b (an edge that took over its delivery):
      // the local server gets it once, the repeat is answered by the client from its one memory.
      for (const edge of [a, b]) {
        const response = await request(`${edge.base}/hook`, { headers: { host: `${given[0]}.localhost:${edge.port}`, 'burrow-event-id': 'evt_start_28' } });
        await response.body.text();
        assert.ok(response.statusCode >= 200 && response.statusCode < 300, `through ${edge.base}: ${response.statusCode}`);
      }
      assert.deepEqual(hookIds, ['evt_start_28'], 'delivered to the local server once');
      for (const name of names) assert.deepEqual(await attachedNodes(redis, name), ['a', 'b'], `${name}'s lease names both edges`);
      assert.match(run.output(), /^burrow: served by 2 edges of the cluster$/m);

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
    await hooks.close();
  }
});

const skipFront = redisSkip !== false ? redisSkip : frontProxySkip();

test('burrow start behind nginx: kill -9 of an edge both tunnels are attached to fails no new request, and they attach to the third', { skip: skipFront, timeout: 150_000 }, async () => {
  const redis = await TestRedis.start();
  let cluster: NginxCluster | undefined;
  let client: SpawnedProcess | undefined;
  const local = await startSequenceServer();
  try {
    cluster = await startNginxCluster(redis, makeDir(), makeDir, 'start-cluster@example.test');
    const dir = makeDir();
    writeFileSync(
      join(dir, 'burrow.yml'),
      [`edge: https://${TEST_DOMAIN}:${cluster.httpsPort}`, `ca: ${cluster.caFile}`, 'tunnels:', ...NAMES.flatMap((name) => [`  ${name}:`, `    http: ${local.port}`, `    subdomain: ${name}`]), ''].join('\n'),
    );
    client = await spawnCli(
      ['start', '--all', '--no-inspect', '--json'],
      { ...cluster.env, ...wildcardDnsEnv(), BURROW_CONFIG: '', BURROW_EDGE: '', BURROW_TOKEN: cluster.token },
      /(?:"event":"ready"[^\n]*\n[\s\S]*?){2}/,
      30_000,
      dir,
    );
    const running = client;
    const events = (): Record<string, unknown>[] => jsonEventsOf(running);
    const bothOn = async (nodes: readonly string[]): Promise<boolean> => {
      for (const name of NAMES) if ((await attachedNodes(redis, name)).join() !== [...nodes].sort().join()) return false;
      return true;
    };
    let attached: string[] = [];
    await waitFor(async () => {
      attached = await attachedNodes(redis, NAMES[0]);
      return attached.length === 2 && (await bothOn(attached));
    }, 15_000, 'both tunnels attached to the same two edges').catch(async (error: Error) => {
      throw new Error(`${error.message}: ${JSON.stringify(await Promise.all(NAMES.map((name) => attachedNodes(redis, name))))}; client:\n${running.output()}`);
    });
    assert.ok(events().some((event) => event.event === 'edges' && event.count === 2), running.output());
    const [victim, survivor] = attached as [string, string];
    const third = NODE_IDS.find((id) => id !== victim && id !== survivor)!;

    await killUnderLoad(cluster, victim, NAMES, 'burrow start on two edges, two tunnels');

    await waitFor(() => bothOn([survivor, third]), 20_000, 'both tunnels attached to the survivor and the third edge');
    assert.ok(!events().some((event) => event.event === 'reconnect' || event.event === 'failover' || event.event === 'closed' || event.event === 'error'), running.output());
    for (const name of NAMES) {
      const checked = await servedWhereSent(redis, cluster, survivor, name);
      assert.ok(checked > 10, `requests to ${name} nginx sent to the attached edge ${survivor}: ${checked}`);
    }
  } finally {
    client?.child.kill('SIGTERM');
    if (client !== undefined) await client.exited;
    await cluster?.stop();
    await local.close();
  }
});
