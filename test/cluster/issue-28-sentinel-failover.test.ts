/**
 * Redis high availability (issue 28, item 2): a master, two replicas and three sentinels (Debian's
 * redis-server, the sentinels with --sentinel), three edges started by the CLI with `--cluster
 * redis-sentinel://S1,S2,S3/burrow` (the accounts made with `burrow admin ... --cluster` on the same URL),
 * tunnels of one account on every edge, traffic for every tunnel sent to every edge, and another
 * account trying all along to take the names through other edges.
 *
 * The replicas are frozen (SIGSTOP) for a moment: a connect then is refused 503, because no replica can
 * acknowledge its grant (WAIT), so nothing is served on a grant the promoted replica might lack. Then
 * the master is killed (SIGKILL) with the replicas running again, and Sentinel promotes one.
 *
 * Checked per request, by the serving edge's id (each edge's access log has the line with a request id
 * for what it served): every name is served by one edge at a time, never two; the other account never
 * gets a name; every answer comes from the owner's local server; the refused connect succeeds after the
 * failover. The failover's times are printed (docs/cluster.md quotes them).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { assertApiError, freePort, runCli, spawnCli, startLocal, tempDirs, waitFor, type SpawnedProcess } from '../helpers.js';
import { TestSentinels, redisSkip } from '../redis-server.js';
import { refusedConnect, startNamed, steadyLoad, tally, type LoadOutcome } from './cluster-helpers.js';

const NODE_IDS = ['a', 'b', 'c'] as const;
const NAMES = ['ha-0', 'ha-1', 'ha-2', 'ha-3', 'ha-4', 'ha-5'];
const COMPETE_EVERY_MS = 300;

const freshDir = tempDirs('burrow-sentinel-');

interface Served {
  path: string;
  subdomain: string;
  edge: number;
  at: number;
}

test('a sentinel failover under load: never two edges serving one name, and no grant served that no replica acknowledged', {
  skip: redisSkip,
  timeout: 180_000,
}, async () => {
  const set = await TestSentinels.start(2);
  const env = { XDG_CONFIG_HOME: freshDir() };
  const ports = [await freePort(), await freePort(), await freePort()];
  const logs = NODE_IDS.map((id) => join(freshDir(), `access-${id}.log`));
  const edges: SpawnedProcess[] = [];
  const clients: TunnelClient[] = [];
  const owner = await startNamed('owner');
  const intruder = await startLocal((_req, res) => res.end('competitor'));
  let competing = true;
  let competition: Promise<void> | null = null;
  let load: ReturnType<typeof steadyLoad> | null = null;
  try {
    const accounts = [];
    for (const email of ['owner@example.test', 'competitor@example.test']) {
      const created = await runCli(['admin', 'create-account', '--email', email, '--plan', 'PRO', '--cluster', set.url, '--json'], env);
      assert.equal(created.code, 0, created.stderr);
      accounts.push(JSON.parse(created.stdout).token.token as string);
    }
    const [ownerToken, competitorToken] = accounts as [string, string];
    for (const [index, id] of NODE_IDS.entries()) {
      const edge = await spawnCli(
        [
          'edge', '--cluster', set.url, '--node-id', id, '--advertise', `http://127.0.0.1:${ports[index]}`, '--host', '127.0.0.1',
          '--port', String(ports[index]), '--data', freshDir(), '--rate-limit', '1000000', '--access-log', logs[index]!,
        ],
        env,
        /listening on/,
      );
      edges.push(edge);
    }
    assert.match(edges[0]!.output(), /lease grants and renewals wait for 1 replica/);
    const targets = ports.map((port) => ({ base: `http://127.0.0.1:${port}`, port, url: `http://localhost:${port}` }));
    for (const [i, name] of NAMES.entries()) {
      const client = new TunnelClient({ edge: targets[i % 3]!.url, token: ownerToken, routes: new RouteTable(owner.port), subdomain: name, minBackoffMs: 50, maxBackoffMs: 500 });
      await client.start();
      clients.push(client);
    }

    // The other account asks for every name through another edge, again and again: always refused.
    const competitorWins: string[] = [];
    competition = (async () => {
      while (competing) {
        for (const [i, name] of NAMES.entries()) {
          const client = new TunnelClient({ edge: targets[(i + 1) % 3]!.url, token: competitorToken, routes: new RouteTable(intruder.port), subdomain: name, minBackoffMs: 50, maxBackoffMs: 500 });
          const won = await client.start().then(() => true, () => false);
          if (won) competitorWins.push(`${name} through ${NODE_IDS[(i + 1) % 3]}`);
          await client.close();
        }
        await new Promise((resolve) => setTimeout(resolve, COMPETE_EVERY_MS));
      }
    })();

    load = steadyLoad(targets, NAMES, 20);
    await new Promise((resolve) => setTimeout(resolve, 1_500));

    // No replica can acknowledge: a new grant is refused rather than served.
    for (const replica of set.replicas) replica.pause();
    const refusal = await refusedConnect(targets[0]!, ownerToken, 'during-pause');
    assertApiError(refusal, 'STORE_UNAVAILABLE');
    assert.match(refusal.text, /not acknowledged by 1 replica/);

    const oldMaster = set.master.port;
    const saidBeforeKill = edges.map((edge) => timesSaid(edge, STORE_BACK));
    await set.master.kill();
    const killedAt = performance.now();
    for (const replica of set.replicas) replica.resume();
    await waitFor(async () => (await set.masterPort().catch(() => oldMaster)) !== oldMaster, 30_000, 'Sentinel to promote a replica');
    const promotedAt = performance.now();
    // Every edge renews on the new master; the refused name can be had now.
    // Every edge renews on the new master (it says so once: "reachable again"); the refused name can be had now.
    const backAt = edges.map(() => 0);
    await waitFor(
      () => {
        edges.forEach((edge, i) => {
          if (backAt[i] === 0 && timesSaid(edge, STORE_BACK) > saidBeforeKill[i]!) backAt[i] = performance.now();
        });
        return backAt.every((at) => at !== 0);
      },
      30_000,
      'every edge to reach the new master',
    ).catch(async (error: Error) => {
      const replication = await Promise.all(set.replicas.map((replica) => replica.command('INFO', 'replication').catch(() => '?')));
      // Each edge's store lines, whole: its tail alone is mostly the competing connects, and hides them.
      const storeLines = (edge: SpawnedProcess): string => edge.output().split('\n').filter((line) => /cluster:|usage flush|store/.test(line)).join('\n');
      const said = edges.map((edge, i) => `edge ${NODE_IDS[i]} (back ${backAt[i] === 0 ? 'never' : `${Math.round(backAt[i]! - promotedAt)} ms after the promotion`}):\n${storeLines(edge)}`);
      throw new Error(`${error.message}; edges said:\n${said.join('\n---\n')}\nreplicas:\n${replication.join('\n')}`);
    });
    let late: TunnelClient | null = null;
    await waitFor(async () => {
      const client = new TunnelClient({ edge: targets[0]!.url, token: ownerToken, routes: new RouteTable(owner.port), subdomain: 'during-pause', minBackoffMs: 50, maxBackoffMs: 500 });
      late = (await client.start().then(() => client, () => null)) ?? null;
      return late !== null;
    }, 20_000, 'a connect after the failover');
    clients.push(late!);
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const outcomes = await load.stop();
    competing = false;
    await competition;

    const failed = outcomes.filter((outcome) => outcome.status !== 200);
    const storeBackMs = Math.max(...backAt) - killedAt;
    console.log(
      `# sentinel failover: promoted ${Math.round(promotedAt - killedAt)} ms after the kill; every edge renewing again ${Math.round(storeBackMs)} ms after it; ` +
        `${outcomes.length} requests, ${failed.length} not answered 200 ${JSON.stringify(tally(failed))}`,
    );
    assert.deepEqual(competitorWins, [], 'the other account never got a name');
    for (const outcome of outcomes) if (outcome.status === 200) assert.equal(outcome.text, 'owner', `${outcome.path} answered by ${outcome.text}`);

    // Who served each request: the edge whose access log has it with a request id (flushed on exit).
    for (const edge of edges) {
      edge.child.kill('SIGTERM');
      await edge.exited;
    }
    const served = servedBy(logs, outcomes);
    assert.ok(served.length >= outcomes.filter((outcome) => outcome.status === 200).length, 'every answered request has its serving edge');
    assertOneServerAtATime(served);
  } finally {
    competing = false;
    await load?.stop();
    await competition;
    for (const client of clients) await client.close();
    for (const edge of edges) {
      edge.child.kill('SIGTERM');
      await edge.exited;
    }
    await owner.close();
    await intruder.close();
  }
});

const STORE_BACK = 'the shared store is reachable again';

/** How many times the edge has logged `line` so far. */
function timesSaid(edge: SpawnedProcess, line: string): number {
  return edge.output().split(line).length - 1;
}

/** The serving edge of every load request, from the access logs: the line that has a request id. */
function servedBy(logs: string[], outcomes: LoadOutcome[]): Served[] {
  const sent = new Set(outcomes.map((outcome) => outcome.path));
  const served: Served[] = [];
  const seen = new Map<string, number>();
  logs.forEach((file, edge) => {
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      if (line === '') continue;
      const entry = JSON.parse(line) as { time: string; subdomain: string; path: string; request_id: string | null; status: number };
      if (entry.request_id === null || !sent.has(entry.path)) continue;
      const before = seen.get(entry.path);
      assert.equal(before, undefined, `${entry.path} was served by edge ${NODE_IDS[before ?? 0]} and by edge ${NODE_IDS[edge]}`);
      seen.set(entry.path, edge);
      served.push({ path: entry.path, subdomain: entry.subdomain, edge, at: Date.parse(entry.time) });
    }
  });
  return served;
}

/** Per name, the spans of time each edge served it never overlap: one owner at a time. */
function assertOneServerAtATime(served: Served[]): void {
  const spans = new Map<string, Map<number, { first: number; last: number }>>();
  for (const request of served) {
    const byEdge = spans.get(request.subdomain) ?? new Map<number, { first: number; last: number }>();
    spans.set(request.subdomain, byEdge);
    const span = byEdge.get(request.edge);
    if (span === undefined) byEdge.set(request.edge, { first: request.at, last: request.at });
    else {
      span.first = Math.min(span.first, request.at);
      span.last = Math.max(span.last, request.at);
    }
  }
  for (const [subdomain, byEdge] of spans) {
    const list = [...byEdge.entries()];
    for (const [i, [edge, span]] of list.entries()) {
      for (const [other, otherSpan] of list.slice(i + 1)) {
        const overlap = span.first <= otherSpan.last && otherSpan.first <= span.last;
        assert.ok(!overlap, `${subdomain} was served by edges ${NODE_IDS[edge]} and ${NODE_IDS[other]} at once (${JSON.stringify(span)}, ${JSON.stringify(otherSpan)})`);
      }
    }
  }
}
