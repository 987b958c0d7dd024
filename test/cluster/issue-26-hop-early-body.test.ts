/**
 * Issue 26 broke this: a forwarding edge reads the policy of a name another edge holds before it
 * forwards (a Promise the first time, cached after), so the request's body may have arrived, even
 * whole, before the hop attached to it. The hop attached first and made its upload after, dropping
 * those bytes: the first POST per name through the hop hung and ended 502 EDGE_UNREACHABLE. Each POST
 * here is the first on its name.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Readable } from 'node:stream';
import { request } from 'undici';
import { createAccount, echo, startClient, startLocal } from '../helpers.js';
import { TestCluster, mirrorAccount, startClusterEdge } from './hop-fixture.js';

const cluster = new TestCluster();
const edgeA = await startClusterEdge(cluster, 'a');
const edgeB = await startClusterEdge(cluster, 'b');
const local = await startLocal(echo);
const account = await createAccount(edgeA, 'PRO');
await mirrorAccount(edgeA, edgeB, account.id);
const clients: { close(): Promise<void> }[] = [];

after(async () => {
  for (const client of clients) await client.close();
  await local.close();
  await edgeB.close();
  await edgeA.close();
});

async function firstPost(subdomain: string, body: Buffer | Readable): Promise<{ status: number; json: { body: string; length: number } }> {
  const started = await startClient(edgeA, account.token, local.port, { subdomain });
  clients.push(started.client);
  cluster.own(subdomain, edgeA.peer, account.id);
  const response = await request(`${edgeB.base}/upload`, { method: 'POST', headers: { host: `${subdomain}.localhost:8080` }, body });
  return { status: response.statusCode, json: (await response.body.json()) as { body: string; length: number } };
}

test('the first POST on a name through the hop arrives whole: a small body, and a chunked one', async () => {
  const small = await firstPost('early-small', Buffer.from('payload-first'));
  assert.deepEqual([small.status, small.json.body], [200, 'payload-first']);
  const pieces = [Buffer.from('a'.repeat(3000)), Buffer.from('b'.repeat(3000))];
  const chunked = await firstPost('early-chunked', Readable.from(pieces));
  assert.deepEqual([chunked.status, chunked.json.length], [200, 6000]);
});
