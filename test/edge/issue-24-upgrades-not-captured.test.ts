/**
 * Issue 24 met issue 29.2: with protocol 2 an upgrade is an ordinary stream of the edge, whose capture
 * it had kept at the 101; the exchange view promises that a WebSocket connection is a `ws_` id nothing
 * but the local inspector knows (the edge's API, `burrow requests` and the dashboard list none, and
 * nothing replays it). A public WebSocket that switches, and an upgrade the local server refuses with
 * a body, leave no capture; the plain request made after them is captured as always, and each is
 * still one access log line.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import WebSocket, { WebSocketServer } from 'ws';
import { call, createAccount, startClient, startEdge, startLocal, tempDirs, waitFor } from '../helpers.js';

const tempDir = tempDirs('burrow-issue24-upgrades-');

test('no capture of an upgrade request, switched or refused; a plain request beside it is captured', async () => {
  const file = join(tempDir(), 'access.log');
  const edge = await startEdge({ accessLog: file });
  const local = await startLocal((_req, res) => res.end('plain'));
  const sockets = new WebSocketServer({ noServer: true });
  local.server.on('upgrade', (req, socket, head) => {
    if (req.url === '/refused') {
      socket.end('HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 7\r\nConnection: close\r\n\r\nno room');
      return;
    }
    sockets.handleUpgrade(req, socket, head, (ws) => ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary })));
  });
  const account = await createAccount(edge);
  const started = await startClient(edge, account.token, local.port);
  try {
    const switched = new WebSocket(`ws://127.0.0.1:${edge.port}/live`, { headers: { host: started.host } });
    await once(switched, 'open');
    switched.send('hello');
    assert.equal(String(((await once(switched, 'message')) as [Buffer])[0]), 'hello');
    switched.close(1000);
    await once(switched, 'close');

    const refused = new WebSocket(`ws://127.0.0.1:${edge.port}/refused`, { headers: { host: started.host } });
    refused.on('error', () => undefined);
    const [, answer] = (await once(refused, 'unexpected-response')) as [unknown, import('node:http').IncomingMessage];
    let body = '';
    for await (const chunk of answer) body += String(chunk);
    assert.deepEqual([answer.statusCode, body], [403, 'no room'], 'the refusal and its body reach the public client');

    const plain = await call(edge, 'GET', '/after', { host: started.host });
    assert.equal(plain.text, 'plain');
    await waitFor(() => edge.edge.registry.session(started.subdomain)!.streams.size === 0, 5_000, 'every stream to end');

    const listed = await call(edge, 'GET', `/api/v1/requests?subdomain=${started.subdomain}`, { token: account.token });
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(
      (listed.json.requests as { path: string; status: number }[]).map((entry) => [entry.path, entry.status]),
      [['/after', 200]],
      'only the plain request is captured',
    );
    await waitFor(() => readFileSync(file, 'utf8').trim().split('\n').length === 3, 5_000, 'three access log lines');
    const lines = readFileSync(file, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { path: string; status: number; request_id: string });
    assert.deepEqual(lines.map((line) => [line.path, line.status]).sort(), [['/after', 200], ['/live', 101], ['/refused', 403]]);
    // The ids of the upgrades name no capture.
    for (const line of lines.filter((each) => each.path !== '/after')) {
      assert.equal((await call(edge, 'GET', `/api/v1/requests/${line.request_id}`, { token: account.token })).status, 404, line.path);
    }
  } finally {
    await started.client.close();
    sockets.close();
    await local.close();
    await edge.close();
  }
});
