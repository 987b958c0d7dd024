/**
 * Issue 23, finding 6: "a released name leaks across accounts". A webhook still arriving while account A
 * releases its queued name was stored after the queue was cleared; the next owner B saw A's event (query
 * string secrets and all), could not discard it, and every live request to B's tunnel was held 202 and
 * never delivered. Now the commit checks, in its own transaction, that the reservation the request was
 * accepted for still holds the name. Reproduced with a real edge, a slow upload over raw TCP, the real
 * client and a real local server.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { test } from 'node:test';
import type { TunnelClient } from '../../src/client/tunnel-client.js';
import { call, callPastQueue, createAccount, readBody, startClient, startEdge, startLocal, waitFor, type TestEdge } from '../helpers.js';

const NAME = 'handoff';
const BODY = 64 * 1024;

function write(socket: Socket, bytes: Buffer | string): Promise<void> {
  return new Promise((resolve, reject) => socket.write(bytes, (error) => (error ? reject(error) : resolve())));
}

interface SlowUpload {
  socket: Socket;
  /** Sends the rest of the body; resolves with the edge's answer. */
  finish(): Promise<string>;
}

/** A's provider posts a BODY-byte webhook to NAME over raw TCP and stops after `sent` bytes, accepted. */
async function startSlowUpload(target: TestEdge, path: string, sent: number): Promise<SlowUpload> {
  const socket = connect(target.port, '127.0.0.1');
  await once(socket, 'connect');
  let answer = '';
  socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
  await write(socket, `POST ${path} HTTP/1.1\r\nHost: ${NAME}.localhost:${target.port}\r\nContent-Type: application/json\r\nContent-Length: ${BODY}\r\n\r\n`);
  await write(socket, Buffer.alloc(sent, 0x41));
  await waitFor(() => target.edge.offline.receiving(NAME) === 1, 5_000, "A's upload accepted and under way");
  return {
    socket,
    async finish() {
      await write(socket, Buffer.alloc(BODY - sent, 0x41));
      await waitFor(() => answer.includes('\r\n\r\n{'), 5_000, "the answer to A's upload");
      return answer;
    },
  };
}

test('issue 23.6: a webhook arriving while A releases its queued name is never stored, never seen by the next owner B, and never holds B\'s traffic', async () => {
  const target = await startEdge();
  const seen: string[] = [];
  const local = await startLocal((req, res) => {
    void readBody(req).then((body) => {
      seen.push(`${req.method} ${req.url} ${body.toString('latin1').slice(0, 40)}`);
      res.end('from B');
    });
  });
  let client: TunnelClient | null = null;
  let upload: SlowUpload | null = null;
  try {
    const alice = await createAccount(target);
    const bob = await createAccount(target);
    const reserved = await call(target, 'POST', '/api/v1/reserved-subdomains', { token: alice.token, body: { subdomain: NAME, offline: 'queue' } });
    assert.equal(reserved.status, 201, reserved.text);

    // A's provider starts a delivery to A's offline, queued name, and sends half of it.
    upload = await startSlowUpload(target, '/hooks/stripe?secret=alice-secret', BODY / 2);

    // Mid-upload, A releases the name; B reserves it (queue mode too) and connects.
    assert.equal((await call(target, 'DELETE', `/api/v1/reserved-subdomains/${NAME}`, { token: alice.token })).status, 204);
    const taken = await call(target, 'POST', '/api/v1/reserved-subdomains', { token: bob.token, body: { subdomain: NAME, offline: 'queue' } });
    assert.equal(taken.status, 201, taken.text);
    ({ client } = await startClient(target, bob.token, local.port, { subdomain: NAME }));
    const host = `${NAME}.localhost:${target.port}`;
    const during = await call(target, 'GET', '/live-during', { host });
    assert.deepEqual([during.status, during.text], [200, 'from B'], "B's live request goes straight through while A's upload is still arriving");

    // A's upload finishes: nothing is stored, A's provider is told the name is not there.
    const answer = await upload.finish();
    assert.match(answer, /^HTTP\/1\.1 404 /);
    assert.match(answer, /"code":"TUNNEL_NOT_FOUND"/);
    assert.equal(target.edge.offline.receiving(NAME), 0);

    const queue = await call(target, 'GET', `/api/v1/queue?subdomain=${NAME}`, { token: bob.token });
    assert.equal(queue.status, 200, queue.text);
    assert.deepEqual([queue.json.queue, queue.json.events, queue.json.bytes], [[], 0, 0], "B's queue is empty");
    assert.doesNotMatch(queue.text, /alice-secret/);
    const after = await call(target, 'POST', '/live-after', { host, rawBody: 'b' });
    assert.deepEqual([after.status, after.text], [200, 'from B'], "B's live requests are delivered at once");
    assert.deepEqual(seen, ['GET /live-during ', 'POST /live-after b'], "B's local server sees only B's traffic");
    // A has nothing left on the name either.
    const aliceQueue = await call(target, 'GET', `/api/v1/queue?subdomain=${NAME}`, { token: alice.token });
    assert.equal(aliceQueue.status, 404);
  } finally {
    upload?.socket.destroy();
    await client?.close();
    await local.close();
    await target.close();
  }
});

test('issue 23.6: A\'s upload finishing after B reserved the name, B offline: B\'s queue stays empty and B\'s own webhooks are held and delivered', async () => {
  const target = await startEdge();
  const seen: string[] = [];
  const local = await startLocal((req, res) => {
    void readBody(req).then(() => {
      seen.push(req.url!);
      res.end('ok');
    });
  });
  let client: TunnelClient | null = null;
  let upload: SlowUpload | null = null;
  try {
    const alice = await createAccount(target);
    const bob = await createAccount(target);
    await call(target, 'POST', '/api/v1/reserved-subdomains', { token: alice.token, body: { subdomain: NAME, offline: 'queue' } });
    upload = await startSlowUpload(target, '/hooks/a?secret=alice-secret', BODY - 1);
    assert.equal((await call(target, 'DELETE', `/api/v1/reserved-subdomains/${NAME}`, { token: alice.token })).status, 204);
    await call(target, 'POST', '/api/v1/reserved-subdomains', { token: bob.token, body: { subdomain: NAME, offline: 'queue' } });
    const host = `${NAME}.localhost:${target.port}`;
    const bobsOwn = await call(target, 'POST', '/hooks/b', { host, rawBody: 'b' });
    assert.equal(bobsOwn.status, 202, bobsOwn.text);

    assert.match(await upload.finish(), /^HTTP\/1\.1 404 /);
    const queue = await call(target, 'GET', `/api/v1/queue?subdomain=${NAME}`, { token: bob.token });
    assert.deepEqual(queue.json.queue.map((event: { path: string }) => event.path), ['/hooks/b']);

    ({ client } = await startClient(target, bob.token, local.port, { subdomain: NAME }));
    await waitFor(() => seen.length === 1, 5_000, "B's held webhook delivered");
    const live = await callPastQueue(target, 'GET', '/live', host);
    assert.equal(live.status, 200);
    assert.ok(!seen.some((url) => url.includes('alice-secret')), seen.join());
  } finally {
    upload?.socket.destroy();
    await client?.close();
    await local.close();
    await target.close();
  }
});
