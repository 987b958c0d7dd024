/**
 * Issue 27: the real client's side of several tunnels on one connection, against an edge played by hand
 * (a `ws` server sending the frames a test needs). A tunnel ended by a non-final UNBOUND is bound again
 * under the name it had; a final one ends it, and a connection of bound tunnels with none left closes;
 * a refusal that may pass (the cluster's store away) binds again; and an edge whose READY does not offer
 * BIND (no `maxTunnels`: an edge from before it) ends the tunnels with a message saying to update it.
 * Issue 28: to an edge of a cluster each BIND names the attachment it replaces (`drop`, from its last
 * BOUND), and a BIND refused ALREADY_ATTACHED moves the connection to another edge without ending it.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { WebSocketServer, type WebSocket } from 'ws';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { decode, encode, type BindFrame, type Frame } from '../../src/protocol/codec.js';
import { DEFAULT_SETTINGS, FrameType, GoAwayCode } from '../../src/protocol/constants.js';
import { waitFor } from '../helpers.js';

let http: ReturnType<typeof createServer>;
let wss: WebSocketServer;
let socket: WebSocket | null = null;
let received: Frame[] = [];
let closed = false;
/** What READY offers: without maxTunnels, an edge from before BIND. */
let settings: Record<string, number> = { ...DEFAULT_SETTINGS };

before(async () => {
  http = createServer((_req, res) => res.end(JSON.stringify({ agent_url: `ws://127.0.0.1:${(http.address() as AddressInfo).port}/api/v1/connect` })));
  wss = new WebSocketServer({ server: http });
  wss.on('headers', (headers) => headers.push('burrow-protocol: 2'));
  wss.on('connection', (ws: WebSocket) => {
    socket = ws;
    received = [];
    closed = false;
    ws.on('message', (data: Buffer) => received.push(decode(data)));
    ws.on('close', () => (closed = true));
    ws.send(encode([FrameType.READY, 0, '', '', settings as never]));
  });
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
});
after(() => {
  wss.close();
  http.close();
});

function connection(): TunnelClient {
  return new TunnelClient({ edge: `http://127.0.0.1:${(http.address() as AddressInfo).port}`, token: 'svc_pat_00000000_000000000000000000000000000000000000', routes: new RouteTable(1), bindOnly: true });
}

async function nextBind(count: number): Promise<BindFrame> {
  await waitFor(() => received.filter((frame) => frame[0] === FrameType.BIND).length >= count, 5_000, `BIND number ${count}`);
  return received.filter((frame) => frame[0] === FrameType.BIND)[count - 1] as BindFrame;
}

test('a non-final UNBOUND binds the tunnel again under its name; a transient refusal too; a final one ends it and the connection', async () => {
  settings = { ...DEFAULT_SETTINGS };
  const client = connection();
  const { tunnel, started } = client.bind({ routes: new RouteTable(3000) });
  await client.start();
  const first = await nextBind(1);
  assert.deepEqual(first.slice(2, 7), [1, 'http', '', 0, 3000]);
  socket!.send(encode([FrameType.BOUND, 0, 1, '', '', 'given-27', 'http://given-27.localhost']));
  assert.equal((await started).publicUrl, 'http://given-27.localhost');
  assert.equal(tunnel.connected, true);

  const reconnected = once(tunnel, 'ready');
  socket!.send(encode([FrameType.UNBOUND, 0, 1, GoAwayCode.SHUTDOWN, 'moving']));
  const again = await nextBind(2);
  assert.equal(again[4], 'given-27', 'asked for the name it had');
  socket!.send(encode([FrameType.BOUND, 0, 1, 'STORE_UNAVAILABLE', 'the store is away', '', '']));
  const third = await nextBind(3);
  assert.equal(third[4], 'given-27');
  socket!.send(encode([FrameType.BOUND, 0, 1, '', '', 'given-27', 'http://given-27.localhost']));
  const [info] = (await reconnected) as [{ reconnected: boolean }];
  assert.equal(info.reconnected, true);

  const ended = once(tunnel, 'closed');
  socket!.send(encode([FrameType.UNBOUND, 0, 1, GoAwayCode.REPLACED, 'taken over']));
  const [closedInfo] = (await ended) as [{ code: string; reason: string; byUser: boolean }];
  assert.deepEqual(closedInfo, { code: 'REPLACED', reason: 'taken over', byUser: false });
  await waitFor(() => closed, 5_000, 'the connection closed: no tunnel left');
});

test('an edge whose READY offers no BIND: the tunnels end, saying to update the edge', async () => {
  const { maxTunnels: _dropped, ...older } = DEFAULT_SETTINGS;
  settings = older;
  const client = connection();
  const { started } = client.bind({ routes: new RouteTable(3000) });
  await client.start();
  await assert.rejects(started, /does not carry several tunnels on one connection .*update the edge/);
  assert.equal(received.some((frame) => frame[0] === FrameType.BIND), false, 'nothing it does not know was sent');
  await waitFor(() => closed, 5_000, 'the connection closed');
});

test('in a cluster a BIND names the attachment it replaces (drop), and a BIND refused ALREADY_ATTACHED moves the connection to another edge, quietly', async () => {
  settings = { ...DEFAULT_SETTINGS, clusterEdges: 2 };
  const client = connection();
  const { tunnel, started } = client.bind({ routes: new RouteTable(3000), subdomain: 'drop-28' });
  const refusals: (string | null | undefined)[] = [];
  tunnel.on('reconnecting', (event) => refusals.push(event.refusal));
  await client.start();
  const first = await nextBind(1);
  assert.equal(first.length, 11, 'a BIND with drop to an edge of a cluster');
  assert.equal(first[10], 0, 'nothing to drop the first time');
  socket!.send(encode([FrameType.BOUND, 0, 1, '', '', 'drop-28', 'http://drop-28.localhost', 17]));
  await started;

  // The connection is lost: the next one's BIND drops the attachment the tunnel had.
  const lost = socket!;
  lost.close();
  await waitFor(() => socket !== lost && received.some((frame) => frame[0] === FrameType.BIND), 10_000, 'the BIND on the next connection');
  assert.equal((await nextBind(1))[10], 17);

  // This client has the tunnel on this edge already (its other connection): the connection moves on.
  const attachedHere = socket!;
  socket!.send(encode([FrameType.BOUND, 0, 1, 'ALREADY_ATTACHED', 'This client already has a session for "drop-28" on edge a.', '', '', 0]));
  await waitFor(() => socket !== attachedHere && received.some((frame) => frame[0] === FrameType.BIND), 10_000, 'the BIND on the connection after the refusal');
  assert.equal((await nextBind(1))[10], 17, 'still the attachment it had');
  assert.ok(refusals.includes('ALREADY_ATTACHED'), `reconnecting refusals: ${JSON.stringify(refusals)}`);
  assert.equal(tunnel.stopped, false, 'the tunnel goes on');
  await client.close();
});
