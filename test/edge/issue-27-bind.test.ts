/**
 * Issue 27: several tunnels on one connection (docs/protocol.md section 18), played by hand against a
 * real edge. BIND admits a tunnel as a connect would (BOUND, or BOUND with the refusal), OPENs for it
 * name it, closing one through the API sends UNBOUND and leaves the others serving; a client that never
 * binds gets OPENs without the tunnel element (the frames it always got), with the inline body captured
 * whole beside bound tunnels' OPENs that carry it.
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import { Packr } from 'msgpackr';
import { encode, type BoundFrame, type OpenFrame, type UnboundFrame } from '../../src/protocol/codec.js';
import { FrameType, GoAwayCode } from '../../src/protocol/constants.js';
import { call, createAccount, startEdge, waitFor, type TestAccount, type TestEdge } from '../helpers.js';
import { openRawTunnel, type RawTunnel } from './raw-tunnel.js';

let target: TestEdge;
let account: TestAccount;
const raw = new Packr({ useRecords: false, mapsAsObjects: true, variableMapSize: true });

before(async () => {
  target = await startEdge();
  account = await createAccount(target, 'PRO');
});
after(async () => {
  await target.close();
});

function bind(tunnel: RawTunnel, id: number, name: string, localPort = 3000): Promise<BoundFrame> {
  tunnel.send(encode([FrameType.BIND, 0, id, 'http', name, 0, localPort, '', false, false]));
  return tunnel.next<BoundFrame>(FrameType.BOUND);
}

/** A POST written in one piece, so its body goes inline in the OPEN; resolves with what came back. */
function postInOnePiece(host: string, body: string, port = target.port): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(`POST /hook HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
    });
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
  });
}

/** Answers the next OPEN with 200 and `text`; resolves with that OPEN. */
async function answer(tunnel: RawTunnel, text: string): Promise<OpenFrame> {
  const open = await tunnel.next<OpenFrame>(FrameType.OPEN);
  tunnel.send(encode([FrameType.RESPONSE, open[1], 200, 'OK', ['content-length', String(text.length)], Buffer.from(text), true]));
  return open;
}

test('a connection without a port binds tunnels; OPENs name them; one closed through the API leaves the others', async () => {
  const { tunnel, ready } = await openRawTunnel(target, account.token, 'instance=bind-test-27-a');
  assert.equal(ready[2], '', 'the connect names no tunnel');
  assert.equal(ready[4].maxTunnels, 64, 'READY announces BIND');

  const first = await bind(tunnel, 1, 'bind-one-27');
  assert.deepEqual(first.slice(2, 6), [1, '', '', 'bind-one-27']);
  assert.equal(first[6], `http://bind-one-27.localhost:${target.port}`);
  const second = await bind(tunnel, 7, '');
  assert.equal(second[3], '');
  assert.match(second[5], /^[a-z]+-[a-z]+-[0-9]+$/, 'the edge picks a name when none is asked for');

  // A refusal leaves the connection and its tunnels up.
  const rival = await createAccount(target, 'FREE');
  assert.equal((await call(target, 'POST', '/api/v1/reserved-subdomains', { token: rival.token, body: { subdomain: 'rival-bind-27' } })).status, 201);
  const refused = await bind(tunnel, 2, 'rival-bind-27');
  assert.deepEqual(refused.slice(2, 4), [2, 'SUBDOMAIN_TAKEN']);
  assert.match(refused[4], /reserved by another account/);
  const sameName = await bind(tunnel, 3, 'bind-one-27');
  assert.deepEqual(sameName.slice(2, 4), [3, 'INVALID_REQUEST']);
  assert.match(sameName[4], /already serves "bind-one-27" \(tunnel 1\)/);

  // Each public request reaches its own tunnel, named in its OPEN; a POST's inline body is captured whole.
  const answered = answer(tunnel, 'one');
  const response = postInOnePiece(`bind-one-27.localhost:${target.port}`, '{"a":"bcdefgh"}');
  const open = await answered;
  assert.equal(open.length, 11);
  assert.equal(open[10], 1);
  assert.equal(Buffer.from(open[7]!).toString(), '{"a":"bcdefgh"}', 'the body went inline');
  assert.match(await response, /\r\n\r\none$/);
  const answeredSecond = answer(tunnel, 'two');
  const secondResponse = call(target, 'GET', '/', { host: `${second[5]}.localhost:${target.port}` });
  assert.equal((await answeredSecond)[10], 7);
  assert.equal((await secondResponse).text, 'two');
  await waitFor(async () => (await call(target, 'GET', '/api/v1/requests?subdomain=bind-one-27', { token: account.token })).json.requests?.length === 1, 5_000, 'the capture');
  const listed = (await call(target, 'GET', '/api/v1/requests?subdomain=bind-one-27', { token: account.token })).json as { requests: { id: string }[] };
  const captured = (await call(target, 'GET', `/api/v1/requests/${listed.requests[0]!.id}`, { token: account.token })).json as { request: { body: string } };
  assert.equal(captured.request.body, '{"a":"bcdefgh"}');

  // Both tunnels in the account's list; closing one sends UNBOUND, the other keeps serving.
  const tunnels = (await call(target, 'GET', '/api/v1/tunnels', { token: account.token })).json as { tunnels: { subdomain: string }[] };
  assert.deepEqual(tunnels.tunnels.map((item) => item.subdomain).sort(), ['bind-one-27', second[5]].sort());
  assert.equal((await call(target, 'DELETE', '/api/v1/tunnels/bind-one-27', { token: account.token })).status, 204);
  const unbound = await tunnel.next<UnboundFrame>(FrameType.UNBOUND);
  assert.deepEqual(unbound.slice(2, 4), [1, GoAwayCode.CLOSED_BY_API]);
  assert.equal((await call(target, 'GET', '/', { host: `bind-one-27.localhost:${target.port}` })).status, 404);
  const stillServing = answer(tunnel, 'still');
  assert.equal((await call(target, 'GET', '/', { host: `${second[5]}.localhost:${target.port}` })).text, 'still');
  await stillServing;

  // The id of an ended tunnel may be bound again; one that is live may not (a protocol error).
  assert.equal((await bind(tunnel, 1, 'bind-again-27'))[3], '');
  tunnel.send(encode([FrameType.BIND, 0, 7, 'http', '', 0, 3000, '', false, false]));
  const closed = await tunnel.closed;
  assert.match(closed.reason, /BIND for tunnel 7, which this connection already has/);
  assert.equal((await call(target, 'GET', '/', { host: `bind-again-27.localhost:${target.port}` })).status, 404);
});

test("a client that never binds gets protocol 2's OPEN as it was (no tunnel element), its inline body captured whole", async () => {
  const { tunnel } = await openRawTunnel(target, account.token, 'port=3000&subdomain=plain-27');
  const answered = answer(tunnel, 'plain');
  const response = postInOnePiece(`plain-27.localhost:${target.port}`, '{"z":"yx"}');
  const open = await answered;
  assert.equal(open.length, 10, 'tunnel 0 is not named');
  assert.equal(Buffer.from(open[7]!).toString(), '{"z":"yx"}', 'the body went inline');
  assert.match(await response, /\r\n\r\nplain$/);
  await waitFor(async () => (await call(target, 'GET', '/api/v1/requests?subdomain=plain-27', { token: account.token })).json.requests?.length === 1, 5_000, 'the capture');
  const listed = (await call(target, 'GET', '/api/v1/requests?subdomain=plain-27', { token: account.token })).json as { requests: { id: string }[] };
  const captured = (await call(target, 'GET', `/api/v1/requests/${listed.requests[0]!.id}`, { token: account.token })).json as { request: { body: string } };
  assert.equal(captured.request.body, '{"z":"yx"}');
  tunnel.ws.close();
  await tunnel.closed;
});

test('kinds this edge does not serve (tcp without --tcp-ports), and more tunnels than maxTunnels, are refused in BOUND', async () => {
  const small = await startEdge({ settings: { maxTunnels: 2 } });
  try {
    const owner = await createAccount(small, 'PRO');
    const { tunnel } = await openRawTunnel(small, owner.token, 'port=3000');
    tunnel.send(encode([FrameType.BIND, 0, 1, 'tcp', '', 0, 22, '', false, false]));
    const tcp = await tunnel.next<BoundFrame>(FrameType.BOUND);
    assert.deepEqual(tcp.slice(2, 4), [1, 'INVALID_REQUEST']);
    assert.match(tcp[4], /serves no TCP tunnels: it was started without --tcp-ports/);
    assert.equal((await bind(tunnel, 2, ''))[3], '');
    const third = await bind(tunnel, 3, '');
    assert.deepEqual(third.slice(2, 4), [3, 'TUNNEL_LIMIT_REACHED']);
    assert.match(third[4], /at most 2 tunnels/);
    // Not a frame an edge takes from a client in any other shape: a BIND on stream 1 is refused by the codec.
    tunnel.send(raw.pack([FrameType.BIND, 1, 4, 'http', '', 0, 3000, '', false, false]));
    assert.match((await tunnel.closed).reason, /element 1/);
  } finally {
    await small.close();
  }
});

test("an inline body cut by the capture limit is sliced from the OPEN at the body, whatever the tunnel id's size", async () => {
  // Cut, the capture keeps the body's first bytes from the frame (not the frame): its offset must skip
  // the booleans and the tunnel id after the body (absent for 0, 3 bytes for 300).
  const cut = await startEdge({ captureBodyLimit: 8 });
  try {
    const owner = await createAccount(cut, 'PRO');
    const { tunnel } = await openRawTunnel(cut, owner.token, 'port=3000&subdomain=cut-zero-27');
    assert.equal((await bind(tunnel, 300, 'cut-bound-27'))[3], '');
    for (const [name, id] of [['cut-zero-27', undefined], ['cut-bound-27', 300]] as const) {
      const answered = answer(tunnel, 'ok');
      const response = postInOnePiece(`${name}.localhost:${cut.port}`, 'abcdefghijklmnop', cut.port);
      const open = await answered;
      assert.equal(open[10], id);
      assert.equal(Buffer.from(open[7]!).toString(), 'abcdefghijklmnop', 'the body went inline');
      await response;
      await waitFor(async () => (await call(cut, 'GET', `/api/v1/requests?subdomain=${name}`, { token: owner.token })).json.requests?.length === 1, 5_000, 'the capture');
      const listed = (await call(cut, 'GET', `/api/v1/requests?subdomain=${name}`, { token: owner.token })).json as { requests: { id: string }[] };
      const captured = (await call(cut, 'GET', `/api/v1/requests/${listed.requests[0]!.id}`, { token: owner.token })).json as { request: { body: string; truncated: boolean } };
      assert.deepEqual([captured.request.body, captured.request.truncated], ['abcdefgh', true], name);
    }
  } finally {
    await cut.close();
  }
});
