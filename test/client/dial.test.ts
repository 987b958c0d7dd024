/**
 * The client only ever dials its own configured local ports, whatever a frame says (DESIGN.md section 6).
 * A raw protocol peer plays a hostile edge: it sends OPEN frames whose path, Host header and routes point
 * elsewhere. The real client and real local servers; nothing of ours is mocked.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { WebSocketServer, type WebSocket } from 'ws';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { decode, encode, type Frame } from '../../src/protocol/codec.js';
import { DEFAULT_SETTINGS, FrameType } from '../../src/protocol/constants.js';
import { readBody, startLocal, waitFor } from '../helpers.js';

test('OPEN frames pointing elsewhere still reach only the configured ports', async () => {
  const seen: { server: string; url: string; host: string | undefined }[] = [];
  const own = await startLocal((req, res) => {
    void readBody(req).then(() => {
      seen.push({ server: 'own', url: req.url!, host: req.headers.host });
      res.end('own');
    });
  });
  const routed = await startLocal((req, res) => {
    seen.push({ server: 'routed', url: req.url!, host: req.headers.host });
    res.end('routed');
  });
  const elsewhere = await startLocal((req, res) => {
    seen.push({ server: 'elsewhere', url: req.url!, host: req.headers.host });
    res.end('elsewhere');
  });

  // The hostile edge: accepts the tunnel, says READY, then asks for requests aimed at `elsewhere`.
  const http = createServer((_req, res) => res.end(JSON.stringify({ agent_url: `ws://127.0.0.1:${(http.address() as AddressInfo).port}/api/v1/connect` })));
  const edge = new WebSocketServer({ server: http });
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
  const answers = new Map<number, number>();
  edge.on('headers', (headers) => headers.push('burrow-protocol: 2'));
  edge.on('connection', (socket: WebSocket) => {
    socket.on('message', (data: Buffer) => {
      const frame: Frame = decode(data);
      if (frame[0] === FrameType.RESPONSE) answers.set(frame[1], frame[2]);
    });
    socket.send(encode([FrameType.READY, 0, 'hostile', 'http://hostile.localhost', DEFAULT_SETTINGS]));
    const target = `127.0.0.1:${elsewhere.port}`;
    const attempts: [string, string[]][] = [
      [`http://${target}/absolute-form`, ['host', target]],
      ['/plain', ['host', target, 'x-forwarded-host', target]],
      ['/api/routed', ['host', target]],
      ['//127.0.0.1/double-slash', ['host', target]],
    ];
    attempts.forEach(([path, headers], index) => {
      socket.send(encode([FrameType.OPEN, index + 1, `req_${index}`, 'GET', path, headers, '203.0.113.1', null, true, false]));
    });
  });

  const client = new TunnelClient({
    edge: `http://127.0.0.1:${(http.address() as AddressInfo).port}`,
    token: 'svc_pat_00000000_000000000000000000000000000000000000',
    routes: new RouteTable(own.port, [{ prefix: '/api', port: routed.port }]),
  });
  await client.start();
  await waitFor(() => answers.size === 4, 5_000, 'four answers');

  assert.deepEqual(seen.filter((entry) => entry.server === 'elsewhere'), []);
  assert.deepEqual(seen.map((entry) => entry.server).sort(), ['own', 'own', 'own', 'routed']);
  for (const status of answers.values()) assert.equal(status, 200);

  await client.close();
  edge.close();
  http.closeAllConnections();
  http.close();
  await own.close();
  await routed.close();
  await elsewhere.close();
});
