/**
 * The API answers the same on every edge for captured requests (issue 17): captures stay on the edge
 * that served them, and listing, showing, searching and replaying ask every edge.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { call, createAccount, echo, startClient, startLocal, waitFor } from '../helpers.js';
import { TestCluster, mirrorAccount, startClusterEdge } from './hop-fixture.js';

const cluster = new TestCluster();
const edgeA = await startClusterEdge(cluster, 'a');
const edgeB = await startClusterEdge(cluster, 'b');
const local = await startLocal(echo);
const account = await createAccount(edgeA, 'PRO');
const tokenB = await mirrorAccount(edgeA, edgeB, account.id);
const subdomain = 'shared-hooks';
const host = `${subdomain}.localhost:8080`;

// Three requests served on A, then the tunnel moves to B and serves three more there.
const onA = await startClient(edgeA, account.token, local.port, { subdomain });
cluster.own(subdomain, edgeA.peer, account.id);
for (let i = 0; i < 3; i++) assert.equal((await call(edgeB, 'POST', `/first/${i}`, { host, rawBody: `payload-a-${i}` })).status, 200);
await onA.client.close();
const onB = await startClient(edgeB, tokenB, local.port, { subdomain });
cluster.own(subdomain, edgeB.peer, account.id);
for (let i = 0; i < 3; i++) assert.equal((await call(edgeA, 'POST', `/second/${i}`, { host, rawBody: `payload-b-${i}` })).status, 200);

after(async () => {
  await onB.client.close();
  await local.close();
  await edgeB.close();
  await edgeA.close();
});

const paths = (list: { path: string }[]): string[] => list.map((entry) => entry.path);
const ALL = ['/second/2', '/second/1', '/second/0', '/first/2', '/first/1', '/first/0'];

async function listed(edge: typeof edgeA, token: string, query: string): Promise<{ id: string; path: string }[]> {
  const response = await call(edge, 'GET', `/api/v1/requests?subdomain=${subdomain}${query}`, { token });
  assert.equal(response.status, 200, response.text);
  return response.json.requests;
}

test('every edge lists the captures of both edges, newest first', async () => {
  await waitFor(async () => (await listed(edgeA, account.token, '')).length === 6, 5_000, 'six captures');
  const fromA = await listed(edgeA, account.token, '');
  const fromB = await listed(edgeB, tokenB, '');
  assert.deepEqual(paths(fromA), ALL);
  assert.deepEqual(fromB, fromA);
});

test('limit and before page across edges without gaps or repeats', async () => {
  for (const [edge, token] of [[edgeA, account.token], [edgeB, tokenB]] as const) {
    const first = await listed(edge, token, '&limit=2');
    assert.deepEqual(paths(first), ALL.slice(0, 2));
    const second = await listed(edge, token, `&limit=2&before=${first[1]!.id}`);
    assert.deepEqual(paths(second), ALL.slice(2, 4));
    const third = await listed(edge, token, `&limit=2&before=${second[1]!.id}`);
    assert.deepEqual(paths(third), ALL.slice(4, 6));
    assert.deepEqual(await listed(edge, token, `&limit=2&before=${third[1]!.id}`), []);
  }
  const unknown = await call(edgeA, 'GET', `/api/v1/requests?subdomain=${subdomain}&before=req_7777777700000000000a`, { token: account.token });
  assert.equal(unknown.status, 400);
  assert.equal(unknown.json.error.code, 'INVALID_REQUEST');
});

test('a search finds matches on both edges', async () => {
  const response = await call(edgeB, 'GET', `/api/v1/requests?subdomain=${subdomain}&q=payload-`, { token: tokenB });
  assert.equal(response.status, 200);
  assert.deepEqual(paths(response.json.requests), ALL);
  const only = await call(edgeB, 'GET', `/api/v1/requests?subdomain=${subdomain}&q=payload-a-1`, { token: tokenB });
  assert.deepEqual(paths(only.json.requests), ['/first/1']);
});

test('a capture is shown on every edge, wherever it is stored', async () => {
  const all = await listed(edgeA, account.token, '');
  for (const entry of all) {
    for (const [edge, token] of [[edgeA, account.token], [edgeB, tokenB]] as const) {
      const shown = await call(edge, 'GET', `/api/v1/requests/${entry.id}`, { token });
      assert.equal(shown.status, 200, `${entry.path} on ${edge.peer.nodeId}`);
      assert.equal(shown.json.path, entry.path);
      assert.equal(Buffer.from(shown.json.request.body, shown.json.request.body_encoding === 'base64' ? 'base64' : 'utf8').toString().startsWith('payload-'), true);
    }
  }
  const other = await createAccount(edgeA, 'FREE');
  const refused = await call(edgeA, 'GET', `/api/v1/requests/${all[0]!.id}`, { token: other.token });
  assert.equal(refused.status, 404);
});

test('a capture stored on A replays through the tunnel on B, and the new capture is stored on B', async () => {
  const all = await listed(edgeB, tokenB, '');
  const storedOnA = all.find((entry) => entry.path === '/first/0')!;
  const replayed = await call(edgeA, 'POST', `/api/v1/requests/${storedOnA.id}/replay`, { token: account.token, body: { path: '/replayed' } });
  assert.equal(replayed.status, 200, replayed.text);
  assert.equal(replayed.json.path, '/replayed');
  assert.equal(replayed.json.replay_of, storedOnA.id);
  assert.equal(replayed.json.status, 200);
  // Stored on B (the tunnel's edge): B's own log has it.
  const onlyB = edgeB.edge.captures.list(account.id, subdomain, { limit: 10, retentionMs: 3_600_000 });
  assert.ok(onlyB !== null && onlyB.some((entry) => entry.path === '/replayed'), JSON.stringify(onlyB));
  await waitFor(async () => paths(await listed(edgeA, account.token, '&limit=1'))[0] === '/replayed', 5_000, 'the replay listed first');
});
