/**
 * Issue 27, item 4 in cluster mode: a pool across edges. Two edges in cluster mode on one real Redis, real
 * clients with `pool` (one session each, as `--edges 1`), each with its own local server that tags its
 * answers. Member A connects through edge a, member B through edge b: the lease records one pool with an
 * attachment on each edge. 400 requests alternate between the two edges and all are answered 200, both
 * members serving; A leaves half-way (its Ctrl-C: GOAWAY CLIENT_CLOSING) with requests in flight, and
 * none fails: edge a forwards to B through the hop from then on, and B's session is untouched. When B
 * leaves too, the name is offline (404) on both edges.
 *
 * Then: a client without `pool` is refused with the message naming the pool, a `pool` client is refused
 * on a lone tunnel's name, two members on one edge share its attachment (one leaving keeps it), and
 * `--replace` takes the whole pool over: every member, on either edge, ends with GOAWAY REPLACED.
 *
 * Also: a third edge forwarding to an edge that no longer serves the pool (answered "not mine") sends the
 * request to the other attached edge; `burrow http --pool` processes with the default `--edges 2` (both
 * members on both edges) lose no request when one gets SIGINT; a member's reconnect through another edge
 * (`drop`) ends only its old member there.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Agent, request } from 'undici';
import type { TunnelClient } from '../../src/client/tunnel-client.js';
import type { Frame } from '../../src/protocol/codec.js';
import { FrameType, GoAwayCode, type Settings } from '../../src/protocol/constants.js';
import { openRawTunnel } from '../edge/raw-tunnel.js';
import { createAccount, spawnCli, startClient, startLocal, tempDir, waitFor, type LocalServer, type SpawnedProcess, type TestAccount, type TestEdge } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { attachedNodes } from './nginx-cluster.js';
import { publicGet, refusedConnect, startClusterEdge, startNamed } from './cluster-helpers.js';

/** A local server answering with its tag after a few milliseconds: requests are in flight when a member leaves. */
function startTagged(tag: string): Promise<LocalServer> {
  return startLocal((req, res) => {
    req.resume();
    setTimeout(() => res.end(tag), 3);
  });
}

/** Resolves with the code of the client's end ('REPLACED', 'CLIENT_CLOSING', ...). */
function endOf(client: TunnelClient): Promise<string> {
  return new Promise((resolve) => client.once('closed', (event: { code: string }) => resolve(event.code)));
}

interface PoolCluster {
  redis: TestRedis;
  edges: TestEdge[];
  /** One local server per tag, each answering with its tag. */
  locals: LocalServer[];
  account: TestAccount;
}

/** Edges `nodeIds` in cluster mode on a fresh Redis, a local server per tag, an account: `body` runs, then all is closed. */
async function withCluster(nodeIds: readonly string[], tags: readonly string[], startServer: (tag: string) => Promise<LocalServer>, body: (cluster: PoolCluster) => Promise<void>): Promise<void> {
  const redis = await TestRedis.start();
  const edges: TestEdge[] = [];
  const locals: LocalServer[] = [];
  try {
    for (const nodeId of nodeIds) edges.push(await startClusterEdge(redis.url, nodeId));
    for (const tag of tags) locals.push(await startServer(tag));
    await body({ redis, edges, locals, account: await createAccount(edges[0]!) });
  } finally {
    for (const edge of edges) await edge.close();
    for (const local of locals) await local.close();
  }
}

/**
 * 400 GETs for `subdomain`, alternating between the edges, 8 at a time; `halfWay` runs once 200 are
 * answered, with requests in flight on both edges. Which member answered each (its tag), and what failed.
 */
async function loadThroughBoth(edges: readonly TestEdge[], subdomain: string, halfWay: () => void): Promise<{ served: Record<string, number>; failures: string[] }> {
  const dispatcher = new Agent({ connections: 8 });
  const served: Record<string, number> = {};
  const failures: string[] = [];
  let done = 0;
  const one = async (i: number): Promise<void> => {
    const edge = edges[i % edges.length]!;
    try {
      const response = await request(`${edge.base}/${i}`, { headers: { host: `${subdomain}.localhost:${edge.port}` }, dispatcher });
      const text = await response.body.text();
      if (response.statusCode !== 200) failures.push(`${i} via edge ${i % edges.length}: ${response.statusCode} ${text}`);
      else served[text] = (served[text] ?? 0) + 1;
    } catch (error) {
      failures.push(`${i}: ${(error as Error).message}`);
    }
    if (++done === 200) halfWay();
  };
  let next = 0;
  try {
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < 400) await one(next++);
      }),
    );
  } finally {
    await dispatcher.close();
  }
  return { served, failures };
}

test('a pool across two edges: 400 requests through both edges served by both members, none failed when one leaves; offline after the last', { skip: redisSkip, timeout: 90_000 }, async () => {
  await withCluster(['a', 'b'], ['A', 'B'], startTagged, async ({ redis, edges, locals, account }) => {
    const [a, b] = edges as [TestEdge, TestEdge];
    const memberA = await startClient(a, account.token, locals[0]!.port, { subdomain: 'pool-x', pool: true });
    const memberB = await startClient(b, account.token, locals[1]!.port, { subdomain: 'pool-x', pool: true });
    const bEnded = endOf(memberB.client);
    assert.equal(await redis.command('HGET', 'burrow:cluster:lease:pool-x', 'pool'), '$1\r\n1\r\n', 'the lease records the pool');
    assert.deepEqual(await attachedNodes(redis, 'pool-x'), ['a', 'b']);

    // Half-way, with requests in flight on both edges: member A leaves as its Ctrl-C does.
    let leaving: Promise<void> | null = null;
    const { served, failures } = await loadThroughBoth(edges, 'pool-x', () => {
      leaving = memberA.client.leave();
    });
    await leaving;
    assert.deepEqual(failures, []);
    assert.equal(served.A! + served.B!, 400, JSON.stringify(served));
    assert.ok(served.A! > 20 && served.B! > 20, `both members served: ${JSON.stringify(served)}`);

    // A's leave dropped only its own attachment: the pool lives on b, and edge a forwards to it.
    await waitFor(async () => (await attachedNodes(redis, 'pool-x')).join() === 'b', 5_000, "a's attachment released");
    assert.deepEqual(await publicGet(a, 'pool-x'), { status: 200, text: 'B' });
    assert.deepEqual(await publicGet(b, 'pool-x'), { status: 200, text: 'B' });
    assert.ok(b.edge.registry.session('pool-x') !== undefined, "B's session was not ended by A's GOAWAY");

    // The last member leaves: the name is offline on every edge.
    await memberB.client.leave();
    assert.equal(await bEnded, 'CLIENT_CLOSING');
    for (const edge of [a, b]) {
      await waitFor(async () => (await publicGet(edge, 'pool-x')).status === 404, 5_000, 'the name offline');
    }
  });
});

test('pool refusals in cluster mode, two members sharing one edge, and --replace taking the whole pool over', { skip: redisSkip, timeout: 90_000 }, async () => {
  await withCluster(['a', 'b'], ['A', 'B', 'C', 'R'], startNamed, async ({ redis, edges, locals, account }) => {
    const [a, b] = edges as [TestEdge, TestEdge];
    const memberA = await startClient(a, account.token, locals[0]!.port, { subdomain: 'pool-y', pool: true });
    const memberB = await startClient(b, account.token, locals[1]!.port, { subdomain: 'pool-y', pool: true });
    const memberC = await startClient(a, account.token, locals[2]!.port, { subdomain: 'pool-y', pool: true });
    const fenceOnA = a.edge.cluster!.fenceOf('pool-y');

    // A plain connect is refused, naming the running tunnel and the pool; so is a pool connect on a lone name.
    const plain = await refusedConnect(b, account.token, 'pool-y&instance=plain-client-1');
    assert.equal(plain.json.error.code, 'SUBDOMAIN_TAKEN', plain.text);
    assert.match(plain.json.error.message, /"pool-y" is already online for this account: a tunnel to local port \d+, connected from .* with token .*It is a pool: add --pool to join it\./);
    const lone = await startClient(b, account.token, locals[3]!.port, { subdomain: 'lone-y' });
    const joining = await refusedConnect(a, account.token, 'lone-y&instance=pool-client-1&pool=1');
    assert.equal(joining.json.error.code, 'SUBDOMAIN_TAKEN', joining.text);
    assert.match(joining.json.error.message, /"lone-y" is already online .* on edge b .*started without --pool, so it serves alone/);
    await lone.client.close();

    // Two members on edge a share its attachment: C leaving keeps it, and A still serves there.
    const seenOnA = new Set<string>();
    for (let i = 0; i < 6; i++) seenOnA.add((await publicGet(a, 'pool-y', `/${i}`)).text);
    assert.deepEqual([...seenOnA].sort(), ['A', 'C']);
    await memberC.client.leave();
    assert.equal(a.edge.cluster!.fenceOf('pool-y'), fenceOnA);
    assert.deepEqual(await attachedNodes(redis, 'pool-y'), ['a', 'b']);
    assert.deepEqual(await publicGet(a, 'pool-y'), { status: 200, text: 'A' });

    // --replace takes the pool over from every edge: each member ends with REPLACED.
    const aEnded = endOf(memberA.client);
    const bEnded = endOf(memberB.client);
    const replacer = await startClient(b, account.token, locals[3]!.port, { subdomain: 'pool-y', replace: true });
    assert.deepEqual(await Promise.all([aEnded, bEnded]), ['REPLACED', 'REPLACED']);
    assert.equal(await redis.command('HGET', 'burrow:cluster:lease:pool-y', 'pool'), '$0\r\n\r\n', 'the replacement serves alone');
    for (const edge of [a, b]) assert.deepEqual(await publicGet(edge, 'pool-y'), { status: 200, text: 'R' });
    await replacer.client.close();
  });
});

test('an edge that no longer serves the pool while the others still name it: a forwarded request goes to another attached edge, none is answered 404', { skip: redisSkip, timeout: 90_000 }, async () => {
  await withCluster(['a', 'b', 'c'], ['A', 'B'], startNamed, async ({ edges, locals, account }) => {
    const [a, b, c] = edges as [TestEdge, TestEdge, TestEdge];
    const memberA = await startClient(a, account.token, locals[0]!.port, { subdomain: 'pool-z', pool: true });
    const memberB = await startClient(b, account.token, locals[1]!.port, { subdomain: 'pool-z', pool: true });
    const before = new Set<string>();
    for (let i = 0; i < 6; i++) before.add((await publicGet(c, 'pool-z', `/before-${i}`)).text);
    assert.deepEqual([...before].sort(), ['A', 'B'], 'edge c forwards to both attached edges in turn');
    // Edge a stops serving new requests while its attachment is still in Redis and in every owner map (as in
    // the instant after a member's leave, before its release is pushed): it answers c's hop "not mine".
    a.edge.cluster!.quiesce();
    const answers: string[] = [];
    for (let i = 0; i < 10; i++) {
      const answer = await publicGet(c, 'pool-z', `/after-${i}`);
      answers.push(`${answer.status} ${answer.text}`);
    }
    assert.deepEqual(answers, Array.from({ length: 10 }, () => '200 B'));
    await memberA.client.close();
    await memberB.client.close();
  });
});

test('burrow http --pool as processes in a cluster (--edges 2 by default): both members on both edges, SIGINT of one fails no request', { skip: redisSkip, timeout: 120_000 }, async () => {
  const members: SpawnedProcess[] = [];
  try {
    await withCluster(['a', 'b'], ['A', 'B'], startTagged, async ({ redis, edges, locals, account }) => {
      const [a, b] = edges as [TestEdge, TestEdge];
      const env = { XDG_CONFIG_HOME: tempDir('burrow-pool-cluster-'), BURROW_EDGE: `${a.url},${b.url}`, BURROW_TOKEN: account.token, NO_COLOR: '' };
      for (const local of locals) members.push(await spawnCli(['http', String(local.port), '--subdomain', 'pool-cli', '--pool', '--no-inspect'], env, /Forwarding (http:\/\/\S+) -> /));
      const [first, second] = members as [SpawnedProcess, SpawnedProcess];
      await waitFor(() => [a, b].every((edge) => edge.edge.registry.holder('pool-cli')?.pool?.size === 2), 10_000, 'both members on both edges').catch((error: Error) => {
        throw new Error(`${error.message}\n${first.output()}\n${second.output()}`);
      });
      assert.deepEqual(await attachedNodes(redis, 'pool-cli'), ['a', 'b']);
      let firstExit: Promise<number | null> | null = null;
      const { served, failures } = await loadThroughBoth(edges, 'pool-cli', () => {
        first.child.kill('SIGINT');
        firstExit = first.exited;
      });
      assert.deepEqual(failures, []);
      assert.ok(served.A! > 20 && served.B! > 20, `both members served: ${JSON.stringify(served)}`);
      assert.equal(await firstExit!, 0, first.output());
      assert.deepEqual(await attachedNodes(redis, 'pool-cli'), ['a', 'b'], 'the second member still holds both edges');
      for (const edge of [a, b]) assert.deepEqual(await publicGet(edge, 'pool-cli'), { status: 200, text: 'B' });
      second.child.kill('SIGINT');
      assert.equal(await second.exited, 0, second.output());
    });
  } finally {
    for (const member of members) member.child.kill('SIGKILL');
  }
});

test("a pool member's reconnect through another edge names its old session in drop: only that member leaves the old edge's pool, whose attachment stays for the others", { skip: redisSkip, timeout: 60_000 }, async () => {
  await withCluster(['a', 'b'], ['B', 'C'], startNamed, async ({ redis, edges, locals, account }) => {
    const [a, b] = edges as [TestEdge, TestEdge];
    const memberB = await startClient(a, account.token, locals[0]!.port, { subdomain: 'pool-d', pool: true });
    const memberC = await startClient(b, account.token, locals[1]!.port, { subdomain: 'pool-d', pool: true });
    // A member whose connection to a is half-dead (the client thinks it lost it; a does not know yet).
    const query = 'port=1234&subdomain=pool-d&pool=1&instance=reconnecting-member';
    const old = await openRawTunnel(a, account.token, query);
    const fenceOnA = (old.ready[4] as Settings).attachment!;
    assert.equal(fenceOnA, a.edge.cluster!.fenceOf('pool-d'), "the member shares a's attachment");
    assert.equal(a.edge.registry.holder('pool-d')?.pool?.size, 2);
    // Its reconnect through b names that session: a ends it, and only it.
    const again = await openRawTunnel(b, account.token, `${query}&drop=${fenceOnA}`);
    const goaway = await old.tunnel.next<Frame>(FrameType.GOAWAY);
    assert.equal(goaway[2], GoAwayCode.REPLACED);
    assert.match(String(goaway[3]), /reconnected through another edge/);
    await waitFor(() => a.edge.registry.holder('pool-d')?.pool === null, 2_000, 'one member left on a');
    assert.equal(a.edge.cluster!.fenceOf('pool-d'), fenceOnA, "a's attachment stays for the member still there");
    assert.deepEqual(await attachedNodes(redis, 'pool-d'), ['a', 'b']);
    for (let i = 0; i < 4; i++) assert.deepEqual(await publicGet(a, 'pool-d', `/${i}`), { status: 200, text: 'B' });
    again.tunnel.ws.close();
    await memberB.client.close();
    await memberC.client.close();
  });
});
