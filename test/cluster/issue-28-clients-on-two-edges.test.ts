/**
 * Clients on several edges (issue 28, item 3): three edges in cluster mode as real processes on one real
 * Redis, Debian's nginx in front with the shipped deploy/nginx-burrow-cluster.conf, and the real client
 * as a process (`burrow http --json`, connecting through nginx) with --edges' default: it attaches its
 * tunnel to two of the edges. Bounded public traffic goes through nginx (round robin over the three);
 * then one of the two edges the tunnel is attached to is killed with SIGKILL in the middle of it.
 *
 * Checked:
 * - the tunnel is attached to exactly two edges (its lease in Redis names two), and a request nginx
 *   gave to one of them was served there without the internal hop: its capture is in that edge's span
 *   of request ids (a forwarded request is captured by the edge that served it);
 * - no request sent after the kill failed (nginx retries a refused connection on the next edge; the
 *   third edge sends a request whose attached edge refuses the connection to the other one);
 * - the client attaches again to two edges (the third one), and says nothing alarming meanwhile: its
 *   other session kept the tunnel up, so there is no reconnect or failover event.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import '../wildcard-dns.js';
import { TEST_DOMAIN } from '../wildcard-dns.js';
import { frontProxySkip } from '../nginx-front.js';
import { tempDirs, waitFor, spawnCli, type SpawnedProcess } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { wildcardDnsEnv } from '../tls-fixtures.js';
import { attachedNodes, jsonEventsOf, killUnderLoad, NODE_IDS, servedWhereSent, startNginxCluster, startSequenceServer, type NginxCluster } from './nginx-cluster.js';

const skip = redisSkip !== false ? redisSkip : frontProxySkip();
const SUBDOMAIN = 'two-edges';
const makeDir = tempDirs('burrow-two-edges-');

test('a client on two edges behind nginx: kill -9 of one of them under load fails no new request, and the client attaches to the third', { skip, timeout: 120_000 }, async () => {
  const redis = await TestRedis.start();
  let cluster: NginxCluster | undefined;
  let client: SpawnedProcess | undefined;
  const local = await startSequenceServer();
  try {
    cluster = await startNginxCluster(redis, makeDir(), makeDir, 'two-edges@example.test');
    client = await spawnCli(
      ['http', `127.0.0.1:${local.port}`, '--subdomain', SUBDOMAIN, '--edge', `https://${TEST_DOMAIN}:${cluster.httpsPort}`, '--ca', cluster.caFile, '--no-inspect', '--json'],
      { ...cluster.env, ...wildcardDnsEnv(), BURROW_TOKEN: cluster.token },
      /"event":"ready"[^\n]*\n/,
    );
    const running = client;
    const events = (): Record<string, unknown>[] => jsonEventsOf(running);
    await waitFor(async () => (await attachedNodes(redis, SUBDOMAIN)).length === 2, 10_000, 'the tunnel attached to two edges').catch(async (error: Error) => {
      throw new Error(`${error.message}: lease fields ${JSON.stringify(await redis.command('HKEYS', `burrow:cluster:lease:${SUBDOMAIN}`))}; client:\n${running.output()}`);
    });
    assert.ok(events().some((event) => event.event === 'edges' && event.count === 2), running.output());
    const [victim, survivor] = (await attachedNodes(redis, SUBDOMAIN)) as [string, string];
    const third = NODE_IDS.find((id) => id !== victim && id !== survivor)!;

    await killUnderLoad(cluster, victim, [SUBDOMAIN], 'clients on two edges');

    // The client attaches to the third edge; its other session kept the tunnel up all along.
    await waitFor(async () => (await attachedNodes(redis, SUBDOMAIN)).join() === [survivor, third].sort().join(), 20_000, 'the tunnel attached to the survivor and the third edge');
    assert.ok(!events().some((event) => event.event === 'reconnect' || event.event === 'failover' || event.event === 'closed'), running.output());

    // Served where nginx sent it: a request nginx gave to an attached edge is captured in that edge's span of ids.
    const checked = await servedWhereSent(redis, cluster, survivor, SUBDOMAIN);
    assert.ok(checked > 20, `requests nginx sent to the attached edge ${survivor}: ${checked}`);
  } finally {
    client?.child.kill('SIGTERM');
    if (client !== undefined) await client.exited;
    await cluster?.stop();
    await local.close();
  }
});
