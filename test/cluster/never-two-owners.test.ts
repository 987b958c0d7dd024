/**
 * Never two owners (issue 17): clients of different accounts (and of one account) ask for one subdomain
 * on different edges at the same moment, round after round, with an edge killed in the middle of some
 * rounds. At every instant at most one edge serves the name (the edges share this process, so a look at
 * every registry is one instant), at most one client wins a round between accounts, and public answers
 * never go back from a newer local server to an older one.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { createAccount, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { publicGet, startClusterEdge, startNamed } from './cluster-helpers.js';

const ROUNDS = 10;
const KILL_ROUNDS = new Set([3, 7]);

interface Contender {
  name: string;
  edgeIndex: number;
  account: TestAccount;
}

interface Answer {
  from: string;
  sentAt: number;
  receivedAt: number;
}

test('never two owners: racing connects on three edges, with edges killed mid-round', { skip: redisSkip, timeout: 240_000 }, async () => {
  const redis = await TestRedis.start();
  const nodeIds = ['a', 'b', 'c'];
  const edges: TestEdge[] = [];
  for (const nodeId of nodeIds) edges.push(await startClusterEdge(redis.url, nodeId, { graceMs: 500 }));
  // One account per edge, each created where it connects (any edge would do once accounts are shared).
  const accounts = await Promise.all(edges.map((edge) => createAccount(edge)));
  const locals: LocalServer[] = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const subdomain = `race-${round}`;
      const contenders: Contender[] = edges.map((_, edgeIndex) => ({ name: `round${round}-edge${edgeIndex}`, edgeIndex, account: accounts[edgeIndex]! }));
      const servers = await Promise.all(contenders.map((contender) => startNamed(contender.name)));
      locals.push(...servers);
      const clients = contenders.map(
        (contender, i) =>
          new TunnelClient({
            edge: edges[contender.edgeIndex]!.url,
            token: contender.account.token,
            routes: new RouteTable(servers[i]!.port),
            subdomain,
            minBackoffMs: 50,
            maxBackoffMs: 200,
          }),
      );
      let servingEdges = 0;
      const watch = setInterval(() => {
        // One instant: every edge of the cluster is in this process.
        const serving = edges.filter((edge) => edge.edge.registry.session(subdomain) !== undefined).length;
        servingEdges = Math.max(servingEdges, serving);
      }, 2);
      const answers: Answer[] = [];
      let probing = true;
      const probe = (async () => {
        while (probing) {
          for (const edge of edges) {
            const sentAt = performance.now();
            const answer = await publicGet(edge, subdomain).catch(() => ({ status: 0, text: '' }));
            if (answer.status === 200) answers.push({ from: answer.text, sentAt, receivedAt: performance.now() });
          }
        }
      })();
      const killed = KILL_ROUNDS.has(round) ? round % edges.length : -1;
      const starts = clients.map((client) => client.start().then(() => true, () => false));
      if (killed >= 0) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        await edges[killed]!.edge.close(0);
      }
      const won = await Promise.all(starts);
      await new Promise((resolve) => setTimeout(resolve, 300));
      probing = false;
      await probe;
      clearInterval(watch);

      assert.ok(servingEdges <= 1, `round ${round}: ${servingEdges} edges served ${subdomain} at once`);
      const winners = won.filter(Boolean).length;
      if (killed < 0) assert.equal(winners, 1, `round ${round}: ${winners} clients of different accounts got ${subdomain}`);
      else assert.ok(winners <= 1, `round ${round}: ${winners} clients got ${subdomain}`);
      const servedBy = new Set(answers.map((answer) => answer.from));
      assert.ok(servedBy.size <= 1, `round ${round}: answered by ${[...servedBy].join(', ')}`);
      const owner = await edges.find((_, i) => i !== killed)!.edge.cluster!.ownerOf(subdomain);
      const live = edges.findIndex((edge, i) => i !== killed && edge.edge.registry.session(subdomain) !== undefined);
      if (live >= 0) assert.equal(owner?.nodeId, nodeIds[live], `round ${round}: Redis names the edge that serves`);
      if (killed < 0) assert.ok(live >= 0, `round ${round}: the winner is served`);

      await Promise.all(clients.map((client) => client.close()));
      if (killed >= 0) {
        await edges[killed]!.close();
        edges[killed] = await startClusterEdge(redis.url, nodeIds[killed]!, { graceMs: 500 });
      }
    }
  } finally {
    for (const local of locals) await local.close();
    for (const edge of edges) await edge.close();
  }
});
