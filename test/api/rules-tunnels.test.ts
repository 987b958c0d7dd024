/**
 * The spec's rules that need a live tunnel: the tunnel endpoints, the captured-request list and its
 * pagination, request detail and replay, quotas and ownership. Real edge, real tunnel client, real local
 * server (spec sections 2, 3, 4; DESIGN.md section 4).
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import type { ClosedInfo, TunnelClient } from '../../src/client/tunnel-client.js';
import { TunnelRefusedError } from '../../src/client/tunnel-client.js';
import {
  assertApiError,
  call,
  ISO_UTC,
  createAccount,
  readBody,
  startClient,
  startEdge,
  startLocal,
  waitFor,
  type LocalServer,
  type TestAccount,
  type HttpResult,
  type TestEdge,
} from '../helpers.js';
import { ERROR_CODES, type ErrorCode } from '../../src/errors.js';

/** The error shape of spec section 7, with the status this file expects for the code. */
function assertError(response: HttpResult, status: number, code: ErrorCode): void {
  assert.equal(ERROR_CODES[code].status, status, `the registry gives ${code} another status`);
  assertApiError(response, code);
}

let target: TestEdge;
let local: LocalServer;
let alice: TestAccount;
let bob: TestAccount;
const clients: TunnelClient[] = [];

before(async () => {
  target = await startEdge({ rateLimit: 1_000_000, authFailureLimit: 1_000_000, graceMs: 0 });
  // Answers with the status asked for in ?status=, and the body it received.
  local = await startLocal((req, res) => {
    void readBody(req).then((body) => {
      res.statusCode = Number(new URL(req.url ?? '/', 'http://local').searchParams.get('status') ?? 200);
      res.setHeader('content-type', 'text/plain');
      res.end(`${req.method} ${req.url} ${req.headers['x-replayed'] ?? ''} ${body.toString()}`);
    });
  });
  alice = await createAccount(target);
  bob = await createAccount(target);
});
after(async () => {
  for (const client of clients) await client.close();
  await local.close();
  await target.close();
});

async function open(token: string, subdomain?: string) {
  const tunnel = await startClient(target, token, local.port, subdomain === undefined ? {} : { subdomain });
  clients.push(tunnel.client);
  return tunnel;
}

const get = (path: string, token: string) => call(target, 'GET', path, { token });
const publicCall = (host: string, method: string, path: string, body?: string) =>
  call(target, method, path, { host, ...(body === undefined ? {} : { rawBody: body, headers: { 'content-type': 'text/plain' } }) });

describe('tunnel endpoints with a live tunnel', () => {
  test('GET /api/v1/tunnels lists it with exactly {subdomain, port, started_at, token_id}', async () => {
    const tunnel = await open(alice.token);
    const list = await get('/api/v1/tunnels', alice.token);
    assert.equal(list.status, 200);
    assert.deepEqual(Object.keys(list.json), ['tunnels']);
    const entry = list.json.tunnels.find((t: { subdomain: string }) => t.subdomain === tunnel.subdomain);
    assert.deepEqual(Object.keys(entry), ['subdomain', 'port', 'started_at', 'token_id']);
    assert.equal(entry.port, local.port);
    assert.equal(entry.token_id, alice.tokenId);
    assert.match(entry.started_at, ISO_UTC);
    assert.match(tunnel.subdomain, /^[a-z]+-[a-z]+-\d+$/, 'a generated name is <word>-<word>-<number>');
    // Not on another account's list.
    assert.equal((await get('/api/v1/tunnels', bob.token)).json.tunnels.some((t: { subdomain: string }) => t.subdomain === tunnel.subdomain), false);
    await tunnel.client.close();
    await waitFor(async () => (await get('/api/v1/tunnels', alice.token)).json.tunnels.length === 0, 5_000, 'the closed tunnel to leave the list');
  });

  test('GET /api/v1/tunnels/:subdomain adds reserved (false, then true for a reserved name)', async () => {
    const plain = await open(alice.token, 'alice-plain');
    const detail = await get('/api/v1/tunnels/alice-plain', alice.token);
    assert.equal(detail.status, 200);
    assert.deepEqual(Object.keys(detail.json), ['subdomain', 'port', 'started_at', 'token_id', 'reserved']);
    assert.equal(detail.json.subdomain, 'alice-plain');
    assert.equal(detail.json.port, local.port);
    assert.equal(detail.json.token_id, alice.tokenId);
    assert.equal(detail.json.reserved, false);
    assert.deepEqual((await get('/api/v1/tunnels/ALICE-PLAIN', alice.token)).json, detail.json, 'names are case-insensitive');
    await plain.client.close();

    assert.equal((await call(target, 'POST', '/api/v1/reserved-subdomains', { token: alice.token, body: { subdomain: 'alice-kept' } })).status, 201);
    const kept = await open(alice.token, 'alice-kept');
    assert.equal((await get('/api/v1/tunnels/alice-kept', alice.token)).json.reserved, true);
    await kept.client.close();
  });

  test('DELETE /api/v1/tunnels/:subdomain: 204; the client is told and the tunnel is gone', async () => {
    const tunnel = await open(alice.token, 'alice-closing');
    assert.equal((await publicCall(tunnel.host, 'GET', '/before')).status, 200);
    const closed = once(tunnel.client, 'closed') as Promise<[ClosedInfo]>;
    const response = await call(target, 'DELETE', '/api/v1/tunnels/alice-closing', { token: alice.token });
    assert.equal(response.status, 204);
    assert.equal(response.text, '');
    const [info] = await closed;
    assert.equal(info.code, 'CLOSED_BY_API');
    assert.equal(info.byUser, false);
    assert.deepEqual((await get('/api/v1/tunnels', alice.token)).json.tunnels, []);
    assertError(await get('/api/v1/tunnels/alice-closing', alice.token), 404, 'NOT_FOUND');
    assertError(await call(target, 'DELETE', '/api/v1/tunnels/alice-closing', { token: alice.token }), 404, 'NOT_FOUND');
    assertError(await publicCall(tunnel.host, 'GET', '/after'), 404, 'TUNNEL_NOT_FOUND');
  });

  test('revoking a token closes the tunnels it opened, and only those', async () => {
    const second = (await call(target, 'POST', '/api/v1/tokens', { token: alice.token, body: { label: 'tunnel token' } })).json;
    const doomed = await open(second.token, 'alice-doomed');
    const survivor = await open(alice.token, 'alice-survivor');
    assert.equal((await get('/api/v1/tunnels/alice-doomed', alice.token)).json.token_id, second.id);
    const closed = once(doomed.client, 'closed') as Promise<[ClosedInfo]>;
    assert.equal((await call(target, 'DELETE', `/api/v1/tokens/${second.id}`, { token: alice.token })).status, 204);
    const [info] = await closed;
    assert.equal(info.code, 'TOKEN_REVOKED');
    const left = (await get('/api/v1/tunnels', alice.token)).json.tunnels.map((t: { subdomain: string }) => t.subdomain);
    assert.deepEqual(left, ['alice-survivor']);
    assert.equal(survivor.client.connected, true);
    await survivor.client.close();
  });

  test("another account's tunnel and requests are 404 NOT_FOUND, and it stays open", async () => {
    const tunnel = await open(bob.token, 'bob-private');
    assert.equal((await publicCall(tunnel.host, 'GET', '/secret')).status, 200);
    const bobsRequest = (await get('/api/v1/requests?subdomain=bob-private', bob.token)).json.requests[0].id;
    assertError(await get('/api/v1/tunnels/bob-private', alice.token), 404, 'NOT_FOUND');
    assertError(await call(target, 'DELETE', '/api/v1/tunnels/bob-private', { token: alice.token }), 404, 'NOT_FOUND');
    assertError(await get('/api/v1/requests?subdomain=bob-private', alice.token), 404, 'NOT_FOUND');
    assertError(await get(`/api/v1/requests/${bobsRequest}`, alice.token), 404, 'NOT_FOUND');
    assertError(await call(target, 'POST', `/api/v1/requests/${bobsRequest}/replay`, { token: alice.token }), 404, 'NOT_FOUND');
    assertError(await get(`/api/v1/requests?subdomain=bob-private&before=${bobsRequest}`, alice.token), 400, 'INVALID_REQUEST');
    assert.equal(tunnel.client.connected, true);
    assert.equal((await get('/api/v1/tunnels/bob-private', bob.token)).status, 200);
    await tunnel.client.close();
  });
});

describe('tunnel quotas and names at connect (DESIGN.md section 2)', () => {
  test('FREE allows 3 active tunnels: the 4th is refused 403 TUNNEL_LIMIT_REACHED; closing one frees it', async () => {
    const carol = await createAccount(target);
    const three = [await open(carol.token), await open(carol.token), await open(carol.token)];
    await assert.rejects(open(carol.token), (error: unknown) => {
      assert.ok(error instanceof TunnelRefusedError);
      assert.equal(error.status, 403);
      assert.equal(error.code, 'TUNNEL_LIMIT_REACHED');
      return true;
    });
    assert.equal((await get('/api/v1/tunnels', carol.token)).json.tunnels.length, 3);
    assert.equal((await get('/api/v1/billing/summary', carol.token)).json.usage.active_tunnels, 3);
    assert.equal((await call(target, 'DELETE', `/api/v1/tunnels/${three[0]!.subdomain}`, { token: carol.token })).status, 204);
    const fourth = await open(carol.token);
    assert.equal(fourth.client.connected, true);
    for (const tunnel of [...three.slice(1), fourth]) await tunnel.client.close();
  });

  test("a name reserved by another account: 409 SUBDOMAIN_TAKEN at connect", async () => {
    assert.equal((await call(target, 'POST', '/api/v1/reserved-subdomains', { token: alice.token, body: { subdomain: 'alice-owns' } })).status, 201);
    await assert.rejects(open(bob.token, 'alice-owns'), (error: unknown) => error instanceof TunnelRefusedError && error.status === 409 && error.code === 'SUBDOMAIN_TAKEN');
  });

  test("a name in use by another account's live tunnel: 409 SUBDOMAIN_TAKEN to connect and to reserve", async () => {
    const tunnel = await open(alice.token, 'alice-live');
    await assert.rejects(open(bob.token, 'alice-live'), (error: unknown) => error instanceof TunnelRefusedError && error.code === 'SUBDOMAIN_TAKEN');
    assertError(await call(target, 'POST', '/api/v1/reserved-subdomains', { token: bob.token, body: { subdomain: 'alice-live' } }), 409, 'SUBDOMAIN_TAKEN');
    // Its owner may reserve it.
    assert.equal((await call(target, 'POST', '/api/v1/reserved-subdomains', { token: alice.token, body: { subdomain: 'alice-live' } })).status, 201);
    await tunnel.client.close();
  });

  test('a refused connect is a plain HTTP error in the spec shape, never a 101', async () => {
    const dave = await createAccount(target);
    const three = [await open(dave.token), await open(dave.token), await open(dave.token)];
    const text = await new Promise<string>((resolve) => {
      // The agent port, where tunnel clients connect (GET /api/v1/instance names it).
      const socket = connect(target.edge.agentPort, '127.0.0.1');
      let received = '';
      socket.on('data', (chunk: Buffer) => {
        received += chunk.toString();
        // The whole answer is in once the body has its Content-Length.
        const [head = '', body] = received.split('\r\n\r\n', 2);
        const length = /content-length: (\d+)/i.exec(head)?.[1];
        if (body !== undefined && length !== undefined && Buffer.byteLength(body) >= Number(length)) socket.destroy();
      });
      socket.on('error', () => {});
      socket.on('close', () => resolve(received));
      socket.write(
        `GET /api/v1/connect?port=${local.port} HTTP/1.1\r\nHost: localhost:${target.edge.agentPort}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nburrow-protocol: 2\r\nAuthorization: Bearer ${dave.token}\r\n\r\n`,
      );
      setTimeout(() => socket.destroy(), 5_000);
    });
    const [head = '', body = ''] = text.split('\r\n\r\n', 2);
    assert.match(head, /^HTTP\/1\.1 403 /);
    assert.match(head, /content-type: application\/json/i);
    assert.deepEqual(Object.keys(JSON.parse(body).error), ['code', 'message']);
    assert.equal(JSON.parse(body).error.code, 'TUNNEL_LIMIT_REACHED');
    for (const tunnel of three) await tunnel.client.close();
  });

  test('an invalid name: 400 INVALID_REQUEST; a bad token: 401 UNAUTHORIZED', async () => {
    await assert.rejects(open(alice.token, 'no_underscores'), (error: unknown) => error instanceof TunnelRefusedError && error.status === 400 && error.code === 'INVALID_REQUEST');
    await assert.rejects(open(`svc_pat_00000000_${'0'.repeat(36)}`), (error: unknown) => error instanceof TunnelRefusedError && error.status === 401 && error.code === 'UNAUTHORIZED');
  });
});

describe('errors on public tunnel traffic', () => {
  test('a local port with nothing listening: 502 LOCAL_UNREACHABLE marked burrow-error, captured with its error', async () => {
    const closed = await startLocal((_req, res) => res.end());
    const deadPort = closed.port;
    await closed.close();
    const tunnel = await startClient(target, bob.token, deadPort, { subdomain: 'bob-dead-port' });
    clients.push(tunnel.client);
    const response = await publicCall(tunnel.host, 'GET', '/nobody-home');
    assertError(response, 502, 'LOCAL_UNREACHABLE');
    assert.equal(response.headers['burrow-error'], 'LOCAL_UNREACHABLE');
    const [entry] = (await get('/api/v1/requests?subdomain=bob-dead-port', bob.token)).json.requests;
    assert.equal(entry.status, 502);
    assert.equal((await get(`/api/v1/requests/${entry.id}`, bob.token)).json.error, 'LOCAL_UNREACHABLE');
    await tunnel.client.close();
  });
});

describe('captured requests: GET /api/v1/requests, detail and replay', () => {
  let subdomain: string;
  let host: string;
  let tunnel: Awaited<ReturnType<typeof open>>;
  const sent: string[] = [];

  before(async () => {
    tunnel = await open(alice.token, 'alice-captures');
    subdomain = tunnel.subdomain;
    host = tunnel.host;
    for (let i = 0; i < 55; i++) {
      const path = `/hook/${i}?status=${i % 5 === 0 ? 404 : 201}`;
      const response = await publicCall(host, 'POST', path, `payload ${i}`);
      assert.equal(response.status, i % 5 === 0 ? 404 : 201);
      sent.push(path);
    }
  });

  test('entries are exactly {id, method, path, status, duration_ms, received_at}, newest first; default limit 50', async () => {
    const response = await get(`/api/v1/requests?subdomain=${subdomain}`, alice.token);
    assert.equal(response.status, 200);
    assert.deepEqual(Object.keys(response.json), ['requests']);
    const list = response.json.requests;
    assert.equal(list.length, 50);
    assert.deepEqual(list.map((r: { path: string }) => r.path), sent.slice(-50).reverse());
    for (const [index, entry] of list.entries()) {
      assert.deepEqual(Object.keys(entry), ['id', 'method', 'path', 'status', 'duration_ms', 'received_at']);
      assert.match(entry.id, /^req_[0-9a-z]+$/);
      assert.equal(entry.method, 'POST');
      assert.equal(entry.status, entry.path.endsWith('404') ? 404 : 201);
      assert.ok(Number.isInteger(entry.duration_ms) && entry.duration_ms >= 0);
      assert.match(entry.received_at, ISO_UTC);
      if (index > 0) assert.ok(entry.received_at <= list[index - 1].received_at);
    }
    assert.equal(new Set(list.map((r: { id: string }) => r.id)).size, 50, 'ids are unique');
  });

  test('limit and before page through the list', async () => {
    const first = (await get(`/api/v1/requests?subdomain=${subdomain}&limit=5`, alice.token)).json.requests;
    assert.deepEqual(first.map((r: { path: string }) => r.path), sent.slice(-5).reverse());
    const next = (await get(`/api/v1/requests?subdomain=${subdomain}&limit=5&before=${first[4].id}`, alice.token)).json.requests;
    assert.deepEqual(next.map((r: { path: string }) => r.path), sent.slice(-10, -5).reverse());
    const all = (await get(`/api/v1/requests?subdomain=${subdomain}&limit=1000`, alice.token)).json.requests;
    assert.equal(all.length, 55);
    const oldest = all[all.length - 1].id;
    assert.deepEqual((await get(`/api/v1/requests?subdomain=${subdomain}&before=${oldest}`, alice.token)).json.requests, []);
    assert.equal((await get(`/api/v1/requests?subdomain=${subdomain.toUpperCase()}&limit=1`, alice.token)).json.requests[0].id, first[0].id);
  });

  test('GET /api/v1/requests/:id: the spec fields first, then the exchange', async () => {
    const [latest] = (await get(`/api/v1/requests?subdomain=${subdomain}&limit=1`, alice.token)).json.requests;
    const detail = await get(`/api/v1/requests/${latest.id}`, alice.token);
    assert.equal(detail.status, 200);
    assert.deepEqual(Object.keys(detail.json).slice(0, 6), ['id', 'method', 'path', 'status', 'duration_ms', 'received_at']);
    assert.deepEqual({ ...detail.json, request: undefined, response: undefined, client_address: undefined }, {
      ...latest,
      subdomain,
      client_address: undefined,
      token_id: alice.tokenId,
      error: null,
      rejected: null,
      replay_of: null,
      event_id: null,
      request: undefined,
      response: undefined,
    });
    assert.equal(detail.json.request.body, 'payload 54');
    assert.equal(detail.json.request.body_encoding, 'utf8');
    assert.ok(Array.isArray(detail.json.request.headers));
    assert.equal(detail.json.response.status, 201);
    assert.equal(detail.json.response.body, `POST ${sent[54]}  payload 54`);
  });

  test('POST /api/v1/requests/:id/replay: 200 with the new capture, replay_of set; overrides applied', async () => {
    const [latest] = (await get(`/api/v1/requests?subdomain=${subdomain}&limit=1`, alice.token)).json.requests;
    const replay = await call(target, 'POST', `/api/v1/requests/${latest.id}/replay`, { token: alice.token, body: { headers: { 'X-Replayed': 'yes' } } });
    assert.equal(replay.status, 200, replay.text);
    assert.equal(replay.json.replay_of, latest.id);
    assert.notEqual(replay.json.id, latest.id);
    assert.equal(replay.json.response.body, `POST ${sent[54]} yes payload 54`);
    const bare = await call(target, 'POST', `/api/v1/requests/${latest.id}/replay`, { token: alice.token });
    assert.equal(bare.status, 200, 'the body is optional');
    assertError(await call(target, 'POST', `/api/v1/requests/${latest.id}/replay`, { token: alice.token, body: { method: 'NOT A METHOD' } }), 400, 'INVALID_REQUEST');
    assertError(await call(target, 'POST', `/api/v1/requests/${latest.id}/replay`, { token: alice.token, body: { everything: true } }), 400, 'INVALID_REQUEST');
  });

  test('replay while the tunnel is offline: 409 TUNNEL_OFFLINE; the captures stay listed', async () => {
    const [latest] = (await get(`/api/v1/requests?subdomain=${subdomain}&limit=1`, alice.token)).json.requests;
    await tunnel.client.close();
    await waitFor(async () => (await get('/api/v1/tunnels', alice.token)).json.tunnels.every((t: { subdomain: string }) => t.subdomain !== subdomain), 5_000, 'the tunnel to close');
    assertError(await call(target, 'POST', `/api/v1/requests/${latest.id}/replay`, { token: alice.token }), 409, 'TUNNEL_OFFLINE');
    assert.equal((await get(`/api/v1/requests?subdomain=${subdomain}&limit=1`, alice.token)).json.requests[0].id, latest.id);
  });

  test('the billing summary counts the requests and bytes', async () => {
    await waitFor(async () => (await get('/api/v1/billing/summary', alice.token)).json.usage.requests >= 55, 5_000, 'usage to be flushed');
    const usage = (await get('/api/v1/billing/summary', alice.token)).json.usage;
    assert.ok(usage.bytes_in > 0 && usage.bytes_out > 0);
  });
});
