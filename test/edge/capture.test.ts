/**
 * Captured requests (issue 4): what the edge keeps of every exchange, for how long, who may see it,
 * and replay through the live tunnel. Real edge, real client, real local server.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertApiError, call, createAccount, ISO_UTC, readBody, startClient, startEdge, startLocal, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';

interface Seen {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A local server that remembers what it received and answers per path. */
async function recordingServer(): Promise<{ server: LocalServer; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = await startLocal((req, res) => {
    void readBody(req).then((body) => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body: body.toString('utf8') });
      if (req.url!.startsWith('/big-response')) {
        res.setHeader('x-big', 'yes');
        res.end('r'.repeat(3000));
        return;
      }
      if (req.url!.startsWith('/fail')) {
        res.statusCode = 500;
        res.end('boom');
        return;
      }
      res.setHeader('content-type', 'application/json');
      res.setHeader('x-local', 'yes');
      res.end(JSON.stringify({ got: req.url, length: body.length }));
    });
  });
  return { server, seen };
}

describe('capture, listing and detail', () => {
  let target: TestEdge;
  let owner: TestAccount;
  let local: { server: LocalServer; seen: Seen[] };
  let started: Awaited<ReturnType<typeof startClient>>;

  before(async () => {
    target = await startEdge({ captureBodyLimit: 1024 });
    owner = await createAccount(target, 'PRO');
    local = await recordingServer();
    started = await startClient(target, owner.token, local.server.port);
  });

  after(async () => {
    await started.client.close();
    await local.server.close();
    await target.close();
  });

  function list(query: string, token = owner.token) {
    return call(target, 'GET', `/api/v1/requests?${query}`, { token });
  }

  test('every exchange is listed newest first with exactly the spec fields', async () => {
    const before = (await list(`subdomain=${started.subdomain}&limit=1000`)).json.requests.length;
    await call(target, 'POST', '/first?x=1', { host: started.host, rawBody: 'one' });
    await call(target, 'GET', '/fail/second', { host: started.host });
    await call(target, 'PUT', '/third', { host: started.host, rawBody: 'three' });
    const response = await list(`subdomain=${started.subdomain}`);
    assert.equal(response.status, 200);
    const requests = response.json.requests as Record<string, unknown>[];
    assert.equal(requests.length, before + 3);
    const [third, second, first] = requests;
    for (const entry of [first, second, third]) {
      // Exactly the spec's fields: `rejected` (a Burrow extension, issue 26) only on captures the edge refused.
      assert.deepEqual(Object.keys(entry!).sort(), ['duration_ms', 'id', 'method', 'path', 'received_at', 'status']);
      assert.match(entry!.id as string, /^req_[0-9a-f]+$/);
      assert.match(entry!.received_at as string, ISO_UTC);
      assert.ok(Number.isInteger(entry!.duration_ms) && (entry!.duration_ms as number) >= 0);
    }
    assert.deepEqual([first!.method, first!.path, first!.status], ['POST', '/first?x=1', 200]);
    assert.deepEqual([second!.method, second!.path, second!.status], ['GET', '/fail/second', 500]);
    assert.deepEqual([third!.method, third!.path, third!.status], ['PUT', '/third', 200]);
    assert.ok((first!.received_at as string) <= (third!.received_at as string));
  });

  test('limit and before page through the list', async () => {
    for (let i = 0; i < 5; i++) await call(target, 'GET', `/page/${i}`, { host: started.host });
    const page = (await list(`subdomain=${started.subdomain}&limit=2`)).json.requests;
    assert.deepEqual(page.map((r: { path: string }) => r.path), ['/page/4', '/page/3']);
    const next = (await list(`subdomain=${started.subdomain}&limit=2&before=${page[1].id}`)).json.requests;
    assert.deepEqual(next.map((r: { path: string }) => r.path), ['/page/2', '/page/1']);
  });

  test('the detail holds the whole exchange; bodies over the cap are truncated and flagged, the local server gets them whole', async () => {
    // Not one repeated letter: the body travels inline in OPEN and the capture is a view of that frame,
    // so a wrong offset would shift it (it did once, when OPEN gained its `upgrade` field).
    const big = Array.from({ length: 5000 }, (_, i) => String.fromCharCode(97 + (i % 26))).join('');
    const response = await call(target, 'POST', '/detail', { host: started.host, rawBody: big, headers: { 'content-type': 'text/plain', 'x-webhook': 'sig' } });
    assert.equal(response.json.length, 5000);
    assert.equal(local.seen.at(-1)!.body, big);
    const [entry] = (await list(`subdomain=${started.subdomain}&limit=1`)).json.requests;
    const detail = await call(target, 'GET', `/api/v1/requests/${entry.id}`, { token: owner.token });
    assert.equal(detail.status, 200);
    const capture = detail.json;
    assert.equal(capture.id, entry.id);
    assert.equal(capture.method, 'POST');
    assert.equal(capture.path, '/detail');
    assert.equal(capture.status, 200);
    assert.equal(capture.subdomain, started.subdomain);
    assert.deepEqual(capture.request.headers.find(([name]: string[]) => name === 'x-webhook'), ['x-webhook', 'sig']);
    assert.equal(capture.request.body, big.slice(0, 1024));
    assert.equal(capture.request.body_size, 5000);
    assert.equal(capture.request.truncated, true);
    assert.equal(capture.response.status, 200);
    assert.deepEqual(capture.response.headers.find(([name]: string[]) => name === 'x-local'), ['x-local', 'yes']);
    assert.equal(JSON.parse(capture.response.body).length, 5000);
    assert.equal(capture.response.truncated, false);
  });

  test('a response body over the cap is truncated and flagged, its headers kept, the public client gets it whole', async () => {
    const response = await call(target, 'GET', '/big-response', { host: started.host });
    assert.equal(response.text, 'r'.repeat(3000));
    const [entry] = (await list(`subdomain=${started.subdomain}&limit=1`)).json.requests;
    const capture = (await call(target, 'GET', `/api/v1/requests/${entry.id}`, { token: owner.token })).json;
    assert.equal(capture.response.body, 'r'.repeat(1024));
    assert.equal(capture.response.body_size, 3000);
    assert.equal(capture.response.truncated, true);
    assert.deepEqual(capture.response.headers.find(([name]: string[]) => name === 'x-big'), ['x-big', 'yes']);
    assert.equal(capture.request.body, '');
    assert.equal(capture.request.truncated, false);
  });

  test('binary bodies are kept as base64', async () => {
    const bytes = Buffer.from([0, 255, 1, 254, 0x80]);
    await call(target, 'POST', '/binary', { host: started.host, rawBody: bytes });
    const [entry] = (await list(`subdomain=${started.subdomain}&limit=1`)).json.requests;
    const capture = (await call(target, 'GET', `/api/v1/requests/${entry.id}`, { token: owner.token })).json;
    assert.equal(capture.request.body_encoding, 'base64');
    assert.deepEqual(Buffer.from(capture.request.body, 'base64'), bytes);
  });

  test('another account gets 404 NOT_FOUND for the list, the detail and the replay', async () => {
    const stranger = await createAccount(target);
    const [entry] = (await list(`subdomain=${started.subdomain}&limit=1`)).json.requests;
    assertApiError(await list(`subdomain=${started.subdomain}`, stranger.token), 'NOT_FOUND');
    assertApiError(await call(target, 'GET', `/api/v1/requests/${entry.id}`, { token: stranger.token }), 'NOT_FOUND');
    assertApiError(await call(target, 'POST', `/api/v1/requests/${entry.id}/replay`, { token: stranger.token }), 'NOT_FOUND');
    assertApiError(await call(target, 'GET', '/api/v1/requests/req_ffffffff000000000001', { token: owner.token }), 'NOT_FOUND');
  });

  test('replay re-sends through the tunnel with overrides and is captured as a new exchange', async () => {
    await call(target, 'POST', '/hook?n=1', { host: started.host, rawBody: '{"event":"paid"}', headers: { 'x-signature': 'original', 'content-type': 'application/json' } });
    const [original] = (await list(`subdomain=${started.subdomain}&limit=1`)).json.requests;
    const received = local.seen.length;

    const plain = await call(target, 'POST', `/api/v1/requests/${original.id}/replay`, { token: owner.token });
    assert.equal(plain.status, 200);
    assert.notEqual(plain.json.id, original.id);
    assert.equal(plain.json.replay_of, original.id);
    assert.equal(plain.json.status, 200);
    const again = local.seen[received]!;
    assert.equal(again.url, '/hook?n=1');
    assert.equal(again.body, '{"event":"paid"}');
    assert.equal(again.headers['x-signature'], 'original');

    const edited = await call(target, 'POST', `/api/v1/requests/${original.id}/replay`, {
      token: owner.token,
      body: { method: 'PUT', path: '/hook?n=2', headers: { 'x-signature': 'replayed' }, body: '{"event":"refunded"}' },
    });
    assert.equal(edited.status, 200);
    const changed = local.seen[received + 1]!;
    assert.equal(changed.method, 'PUT');
    assert.equal(changed.url, '/hook?n=2');
    assert.equal(changed.headers['x-signature'], 'replayed');
    assert.equal(changed.body, '{"event":"refunded"}');
    assert.equal(changed.headers['content-length'], String('{"event":"refunded"}'.length));

    const newest = (await list(`subdomain=${started.subdomain}&limit=2`)).json.requests;
    assert.deepEqual(newest.map((r: { id: string }) => r.id), [edited.json.id, plain.json.id]);
  });

  test('usage counters in the billing summary count real traffic', async () => {
    const before = (await call(target, 'GET', '/api/v1/billing/summary', { token: owner.token })).json.usage;
    await call(target, 'POST', '/counted', { host: started.host, rawBody: 'x'.repeat(100) });
    const after = (await call(target, 'GET', '/api/v1/billing/summary', { token: owner.token })).json.usage;
    assert.equal(after.requests, before.requests + 1);
    assert.equal(after.bytes_in, before.bytes_in + 100);
    assert.ok(after.bytes_out > before.bytes_out);
  });
});

describe('retention', () => {
  let target: TestEdge;
  let local: { server: LocalServer; seen: Seen[] };

  before(async () => {
    target = await startEdge({ plans: { FREE: { capturedRequests: 5, retentionMs: 60_000 }, PRO: { retentionMs: 400 } }, captureSweepMs: 250 });
    local = await recordingServer();
  });

  after(async () => {
    await local.server.close();
    await target.close();
  });

  test('the ring keeps exactly the newest captures; an overwritten id answers 404', async () => {
    const owner = await createAccount(target, 'FREE');
    const started = await startClient(target, owner.token, local.server.port);
    for (let i = 0; i < 8; i++) await call(target, 'GET', `/ring/${i}`, { host: started.host });
    const listed = (await call(target, 'GET', `/api/v1/requests?subdomain=${started.subdomain}&limit=1000`, { token: owner.token })).json.requests;
    assert.deepEqual(listed.map((r: { path: string }) => r.path), ['/ring/7', '/ring/6', '/ring/5', '/ring/4', '/ring/3']);
    // The first capture's slot now holds the sixth: its id is gone.
    const firstId = listed[4].id.replace(/[0-9a-f]{12}$/, (seq: string) => (parseInt(seq, 16) - 3).toString(16).padStart(12, '0'));
    assertApiError(await call(target, 'GET', `/api/v1/requests/${firstId}`, { token: owner.token }), 'NOT_FOUND');
    await started.client.close();
  });

  test('captures older than the plan window are hidden and swept; a closed tunnel keeps its captures listable within it', async () => {
    const owner = await createAccount(target, 'PRO');
    const started = await startClient(target, owner.token, local.server.port);
    await call(target, 'GET', '/old', { host: started.host });
    const [old] = (await call(target, 'GET', `/api/v1/requests?subdomain=${started.subdomain}`, { token: owner.token })).json.requests;
    await started.client.close();
    // Closed, still listable inside the window.
    const listed = await call(target, 'GET', `/api/v1/requests?subdomain=${started.subdomain}`, { token: owner.token });
    assert.equal(listed.status, 200);
    assert.equal(listed.json.requests.length, 1);
    await waitFor(
      async () => (await call(target, 'GET', `/api/v1/requests?subdomain=${started.subdomain}`, { token: owner.token })).json.requests.length === 0,
      5_000,
      'the capture to leave the window',
    );
    assertApiError(await call(target, 'GET', `/api/v1/requests/${old.id}`, { token: owner.token }), 'NOT_FOUND');
  });
});

describe('replay needs a live tunnel', () => {
  test('replaying while the tunnel is down answers 409 TUNNEL_OFFLINE', async () => {
    const target = await startEdge();
    const local = await recordingServer();
    const owner = await createAccount(target);
    const started = await startClient(target, owner.token, local.server.port);
    await call(target, 'GET', '/before-close', { host: started.host });
    const [entry] = (await call(target, 'GET', `/api/v1/requests?subdomain=${started.subdomain}`, { token: owner.token })).json.requests;
    await started.client.close();
    await waitFor(() => target.edge.registry.session(started.subdomain) === undefined, 2_000, 'the tunnel to close');
    const response = await call(target, 'POST', `/api/v1/requests/${entry.id}/replay`, { token: owner.token });
    assertApiError(response, 'TUNNEL_OFFLINE');
    assert.match(response.json.error.message, /not connected/);
    await local.server.close();
    await target.close();
  });
});
